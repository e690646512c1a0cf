package steps

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/resume"
	"github.com/loomcheck/loomcheck/harness/world"
)

func readerKey(who, transport string) string { return who + " " + transport }

func (s *streamSteps) reader(who, transport string) (*follower, error) {
	f := s.readers[readerKey(who, transport)]
	if f == nil {
		return nil, harnessErr("%s has no %s reader in this scenario", who, transport)
	}
	return f, nil
}

// opens asks for a ticket as who and expects 200 with a well-formed answer, kept.
func (s *streamSteps) opens(who, name, from, device string) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	n := int64(0)
	if from != "" {
		n, _ = strconv.ParseInt(from, 10, 64)
	}
	sent := time.Now()
	r, a, err := s.openSession(s.ctx, who, c.id, n, device)
	s.last = r
	if err != nil {
		return err
	}
	if a == nil {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 with a ticket")
	}
	s.opened, s.openedBy, s.openedAt, s.openedArgs = a, who, time.Now(), [4]string{who, name, from, device}
	s.openSent = sent
	return nil
}

// openAnswerSays expects the last open's head and floor.
func (s *streamSteps) openAnswerSays(head, floor int64) error {
	if s.opened == nil {
		return harnessErr("no open was answered in this scenario")
	}
	if s.opened.Head != head || s.opened.Floor != floor {
		return fail("POST "+streamOpenPath(s.opened.Session), fmt.Sprintf("head %d, floor %d", s.opened.Head, s.opened.Floor), fmt.Sprintf("head %d, floor %d", head, floor))
	}
	return nil
}

// present presents ticket tk as who and returns the connection or the refusal.
func (s *streamSteps) present(who, tk, transport, device, name string) (conn, error) {
	if err := s.sut(); err != nil {
		return nil, err
	}
	c, err := s.conv(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.wait()
	defer cancel()
	cn, err := s.dialSession(ctx, who, c.id, dialOpts{Transport: transport, Ticket: tk, Device: device})
	var ref *refusedErr
	var he *HarnessError
	var fl *Failure
	if err != nil && !errors.As(err, &ref) && !errors.As(err, &he) && !errors.As(err, &fl) {
		if s.ctx.Err() != nil {
			return nil, harnessErr("the run was stopped: %v", s.ctx.Err())
		}
		return nil, fail("GET "+streamPath(c.id)+" ("+transport+")", "no answer ("+err.Error()+")", "an answer")
	}
	return cn, err
}

func (s *streamSteps) lastTicket() (string, error) {
	if s.opened == nil {
		return "", harnessErr("no ticket was made in this scenario")
	}
	return s.opened.Ticket, nil
}

// presentsServed presents the last ticket and expects the stream served.
func (s *streamSteps) presentsServed(who, transport, device, name string) error {
	for try := 1; ; try++ {
		tk, err := s.lastTicket()
		if err != nil {
			return err
		}
		c, err := s.present(who, tk, transport, device, name)
		if err == nil {
			c.Close()
			return nil
		}
		var r *refusedErr
		if !errors.As(err, &r) {
			return err
		}
		if !s.expiredOnTheKitsClock(r) {
			return fail("GET /sessions/{id}/stream ("+transport+") with the ticket", r.Error(), "the stream served")
		}
		// The kit itself was too slow: the ticket may have been older than its lifetime when it
		// reached the system. A fresh ticket, presented again.
		if try == ticketTries {
			return harnessErr("the kit could not present a ticket within stream.ticketMs (%d ms) in %d tries: the machine is too slow for this setting", s.ticketMs(), ticketTries)
		}
		a := s.openedArgs
		if err := s.opens(a[0], a[1], a[2], a[3]); err != nil {
			return err
		}
	}
}

// ticketTries is how many fresh tickets presentsServed presents when the kit's own slowness may
// have let each expire.
const ticketTries = 3

// expiredOnTheKitsClock reports whether a refusal is "expired" while, on the kit's clock, the
// ticket may really have been older than its lifetime when it was checked: the ticket was made
// after its open was sent, and checked before the refusal arrived, so its age was at most that
// span. Within the lifetime, "expired" is the system's fault.
func (s *streamSteps) expiredOnTheKitsClock(r *refusedErr) bool {
	var body map[string]any
	if json.Unmarshal(r.Body, &body) != nil || body["reason"] != "expired" || s.openSent.IsZero() {
		return false
	}
	return time.Since(s.openSent) >= time.Duration(s.ticketMs())*time.Millisecond
}

// ticketMs is the ticket lifetime the system was configured with (spec/sutconfig/sutconfig.go: 15000 when
// unset).
func (s *streamSteps) ticketMs() int64 {
	if ms := s.cfg.Stream.TicketMs; ms > 0 {
		return ms
	}
	return 15000
}

// follows starts a resumable reader of the current conversation's stream from cursor 0.
func (s *streamSteps) follows(who, transport, tickets, device string) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	key := readerKey(who, transport)
	if s.readers[key] != nil {
		return harnessErr("%s already has a %s reader", who, transport)
	}
	f := s.follow(who, c.id, transport, &follower{device: device, ticketed: tickets != ""})
	s.readers[key] = f
	return s.connected(f)
}

// connected waits until f's first connection is made (a reader that is not yet connected would
// see a reply only as its durable record).
func (s *streamSteps) connected(f *follower) error {
	ctx, cancel := s.wait()
	defer cancel()
	_, err := f.waitFor(ctx, "a connection made", func(fw followed) bool { return fw.connects > 0 })
	return err
}

// readsFrom reads the stream over one connection asking from a cursor, holding another.
func (s *streamSteps) readsFrom(who, transport string, from int64, holding string) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	key := readerKey(who, transport)
	if old := s.readers[key]; old != nil {
		_ = old.Close()
	}
	f := &follower{once: true, askFrom: &from}
	f.r.Last = from
	if holding != "" {
		f.r.Last, _ = strconv.ParseInt(holding, 10, 64)
	}
	s.readers[key] = s.follow(who, c.id, transport, f)
	return s.connected(s.readers[key])
}

// reaches waits until the reader's cursor is at least n.
func (s *streamSteps) reaches(who, transport string, n int64) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	_, err = f.waitFor(ctx, fmt.Sprintf("the reader at cursor %d", n), func(fw followed) bool { return fw.last >= n })
	return err
}

// frameCells is one frame's cells by column name.
func frameCells(f sframe, v *resume.Verdict) map[string]string {
	r := frameRow(f)
	m := map[string]string{"cur": r[0], "span": r[1], "type": r[2], "message": r[3], "text": r[4],
		"turn": "", "verdict": ""}
	if f.Turn > 0 {
		m["turn"] = strconv.FormatInt(f.Turn, 10)
	}
	if v != nil {
		m["verdict"] = v.String()
	}
	return m
}

// streamFrames is the frame table of the stream steps: the frame's place, its type, message
// and turn, its text, and the verdict the resume check gave it.
var streamFrames = frameTable{columns: []string{"cur", "span", "type", "message", "text", "turn", "verdict"}}

// gotExactly expects the delivered frames to be exactly the table.
func (s *streamSteps) gotExactly(who, transport string, t *godog.Table) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	if _, err := streamFrames.header(t); err != nil {
		return err
	}
	fw, err := s.framesFor(f, t, "frames delivered", delivered)
	if err != nil {
		return err
	}
	rows := make([]map[string]string, len(fw.delivered))
	for i, d := range fw.delivered {
		rows[i] = frameCells(d, nil)
	}
	if err := streamFrames.judge(who+"'s "+transport+" reader delivered", t, rows); err != nil {
		return err
	}
	return fw.sutErr
}

// noGapNoRepeat expects no problem, and the number of connections when named.
func (s *streamSteps) noGapNoRepeat(who, transport, conns string) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	fw := f.snapshot()
	if fw.kitErr != nil {
		return fw.kitErr
	}
	if fw.sutErr != nil {
		return fw.sutErr
	}
	op := who + "'s " + transport + " reader"
	if len(fw.problems) > 0 {
		var ps []string
		for _, p := range fw.problems {
			ps = append(ps, p.Error())
		}
		return fail(op, strings.Join(ps, "; "), "no gap and no repeat on a transport that lost nothing")
	}
	switch {
	case conns == "one" && fw.connects != 1:
		return fail(op, fmt.Sprintf("%d connections", fw.connects), "one connection")
	case conns == "more than one" && fw.connects < 2:
		return harnessErr("%s made %d connection(s): the scenario did not make it reconnect", op, fw.connects)
	}
	return nil
}

// folds waits for turn n's text-done and expects the folded deltas and its text to be text.
func (s *streamSteps) folds(who, transport string, n int64, text string) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	text = unescape(text)
	key := fmt.Sprintf("a:%d", n)
	ctx, cancel := s.wait()
	defer cancel()
	fw, err := f.waitFor(ctx, "a text-done for message "+key, func(fw followed) bool { return fw.fold[key].done != nil })
	if err != nil {
		return err
	}
	m := fw.fold[key]
	// The text-done's text is the reply; the deltas since its last restart are what was shown
	// of it on the way, so they begin it.
	if *m.done != text || !strings.HasPrefix(text, m.deltas) {
		return fail(who+"'s "+transport+" reader, message "+key, fmt.Sprintf("text-done %q after deltas folded to %q", *m.done, m.deltas),
			fmt.Sprintf("text-done %q after deltas that begin it", text))
	}
	return nil
}

// modelPaced scripts the model's answer to match as the deltas, each followed by a hold.
func (s *streamSteps) modelPaced(parts, match string) error {
	pieces := quoted(parts)
	holds := make([]*world.Hold, len(pieces))
	for i := range pieces {
		holds[i] = s.world.NewHold()
	}
	if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Chunks: pieces, Paced: holds}); err != nil {
		return harnessErr("script the model: %v", err)
	}
	s.paced = append(s.paced, &pacedAnswer{holds: holds, released: make([]bool, len(holds))})
	return nil
}

// pacedAnswer is one paced answer's holds, and which of them the scenario released.
type pacedAnswer struct {
	holds    []*world.Hold
	released []bool
}

// modelGoesOn waits until a paced answer waits after its piece n and lets it go on (every
// paced answer waiting there: one whose request the system dropped goes nowhere).
func (s *streamSteps) modelGoesOn(n int) error {
	ctx, cancel := s.wait()
	defer cancel()
	for {
		done := false
		for _, a := range s.paced {
			if n <= len(a.holds) && !a.released[n-1] && a.holds[n-1].Reached() {
				a.holds[n-1].Release()
				a.released[n-1], done = true, true
			}
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fail("the model's paced answer", "no answer waiting after its piece "+strconv.Itoa(n), "an answer streaming")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// The kinds a frame may have (spec/stream.md), and session.hidden, a record drawn for a
// viewer not cleared for it (spec/http.md); true for a logged kind.
var frameKinds = map[string]bool{"text-delta": true, "text-done": true, "tool-started": true, "tool-progress": true,
	"tool-finished": true, "term-chunk": true, "term-command": true, "file-changed": true, "ask": true,
	"ask-answered": true, "user-message": true, "status": true, "hidden": true, "reset": false, "heartbeat": false,
	// the group-chat kinds (spec/stream.md), logged but for the two ephemeral ones
	"participant-joined": true, "participant-left": true, "reaction": true, "pin": true, "mention": true,
	"fanout": true, "fanout-keep": true, "text-cut": true, "presence": false, "read-marker": false}

// received returns the reader and what it has received so far, for a step that judges it: the
// kit's own error when its reader broke, and a harness error when nothing came to judge.
func (s *streamSteps) received(who, transport string) (*follower, followed, error) {
	f, err := s.reader(who, transport)
	if err != nil {
		return nil, followed{}, err
	}
	fw := f.snapshot()
	if fw.kitErr != nil {
		return nil, followed{}, fw.kitErr
	}
	if len(fw.raw) == 0 {
		return nil, followed{}, harnessErr("%s's %s reader received nothing to judge", who, transport)
	}
	return f, fw, nil
}

// shapes expects every frame received to have the frame's shape and the cursors to run from 1.
func (s *streamSteps) shapes(who, transport string) error {
	f, fw, err := s.received(who, transport)
	if err != nil {
		return err
	}
	op := who + "'s " + transport + " reader"
	ids := map[int64]string{}
	seen := map[string]int64{}
	for _, r := range fw.raw {
		logged, known := frameKinds[r.Kind()]
		bad := ""
		t, terr := time.Parse(time.RFC3339Nano, r.Time)
		switch {
		case r.V == nil || *r.V != 1:
			bad = "v is not 1"
		case r.ID == "":
			bad = "no id"
		case r.Session != f.id:
			bad = "session " + r.Session
		case !strings.HasPrefix(r.Type, "session.") || !known:
			bad = "type " + r.Type
		case terr != nil || !inUTC(r.Time, t) || t.IsZero():
			bad = "time " + r.Time
		case logged && r.Cur <= 0:
			bad = "a logged kind with cursor " + strconv.FormatInt(r.Cur, 10)
		case !logged && r.Cur != 0:
			bad = "a control frame with cursor " + strconv.FormatInt(r.Cur, 10)
		}
		if bad == "" && r.Cur > 0 {
			if id, ok := ids[r.Cur]; ok && id != r.ID {
				bad = fmt.Sprintf("cursor %d sent with ids %q and %q", r.Cur, id, r.ID)
			}
			if c, ok := seen[r.ID]; ok && c != r.Cur {
				bad = fmt.Sprintf("id %q at cursors %d and %d", r.ID, c, r.Cur)
			}
			ids[r.Cur], seen[r.ID] = r.ID, r.Cur
		}
		if bad != "" {
			return fail(op, bad+" in "+clip(string(r.Raw), 300), "a frame per spec/stream.md: v 1, id, cur, session, type session.<kind>, time in UTC")
		}
	}
	next := int64(1)
	for _, d := range fw.delivered {
		if d.Cur == 0 {
			if fl := d.Payload().Floor; d.Kind() == "reset" && fl != nil {
				next = *fl
			}
			continue
		}
		first := d.ResumeFrame().First()
		if first != next {
			return fail(op, fmt.Sprintf("delivered cursors %d..%d where %d was next", first, d.Cur, next), "cursors gapless from 1")
		}
		next = d.Cur + 1
	}
	return fw.sutErr
}

// heartbeatSlack is how late, at most, the kit may receive a heartbeat that a correct system
// sent on time: the system and the kit share a machine that runs 8 scenarios at once on as few
// as 2 cores beside other work, and there two beats a correct system sent 200 ms apart have
// been seen to arrive 116 ms apart (the first held back at least 84 ms). 400 ms is several
// times that and, with as many intervals observed as heartbeatIntervals asks for, still at most a quarter
// of the observed window: a system beating at twice or half the interval drifts from any
// schedule by half the window or a whole window, at least twice the slack. A single gap shorter
// than the interval is no fault (a system that ticks on a fixed schedule sends the beat after a
// late one early); only the drift from the schedule is judged.
const heartbeatSlack = 400 * time.Millisecond

// heartbeatIntervals is how many intervals between heartbeats the step observes: at least 3,
// and enough that the window they span is at least four times heartbeatSlack.
func heartbeatIntervals(period time.Duration) int {
	return max(3, int((4*heartbeatSlack+period-1)/period))
}

// judgeHeartbeats judges the arrival times of consecutive heartbeats (at least two) against an
// interval, as what the spec states: an idle stream sends a heartbeat every interval. It returns
// "" when they keep to it, or what was seen and what was expected. They keep to it when the
// first arrives at most interval+heartbeatSlack after idle (the arrival of the last other
// frame; zero when there was none, then not judged) and they fit one schedule of one beat per
// interval with each arriving between 0 and heartbeatSlack late: the drifts at[i]-at[0]-i*period
// are within heartbeatSlack of one another. No gap can then exceed interval+heartbeatSlack, and
// n+1 beats span n intervals give or take heartbeatSlack; a system beating too often, too
// rarely or never (waited for by the caller) falls outside once the window is long enough.
func judgeHeartbeats(idle time.Time, at []time.Time, period time.Duration) (got, want string) {
	late := period + heartbeatSlack
	if !idle.IsZero() {
		if d := at[0].Sub(idle); d > late {
			return fmt.Sprintf("the first heartbeat %s after the last logged frame", d.Round(time.Millisecond)),
				fmt.Sprintf("one every %s (at most %s, with %s of slack for a loaded machine)", period, late, heartbeatSlack)
		}
	}
	lo, hi := time.Duration(0), time.Duration(0)
	for i, t := range at {
		drift := t.Sub(at[0]) - time.Duration(i)*period
		lo, hi = min(lo, drift), max(hi, drift)
	}
	if hi-lo > heartbeatSlack {
		n := len(at) - 1
		span := at[n].Sub(at[0])
		gaps := make([]string, n)
		for i := range n {
			gaps[i] = at[i+1].Sub(at[i]).Round(time.Millisecond).String()
		}
		return fmt.Sprintf("%d heartbeats spanning %s (gaps %s), drifting %s from any schedule of one every %s",
				n+1, span.Round(time.Millisecond), strings.Join(gaps, " "), (hi - lo).Round(time.Millisecond), period),
			fmt.Sprintf("one every %s: %d intervals spanning %s, no beat more than %s late on one schedule", period, n, time.Duration(n)*period, heartbeatSlack)
	}
	return "", ""
}

// stops closes the reader.
func (s *streamSteps) stops(who, transport string) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	return f.Close()
}

// fillWorkers is how many of fillLog's requests are in flight at once: a log of thousands of
// frames is filled in a few seconds instead of one round trip after the other.
const fillWorkers = 4

// inUTC says whether an RFC 3339 time t, parsed from text, is written in UTC: with "Z" or a zero
// offset ("+00:00"; RFC 3339 reserves "-00:00" for a time whose offset is unknown).
func inUTC(text string, t time.Time) bool {
	_, off := t.Zone()
	return off == 0 && !strings.HasSuffix(text, "-00:00")
}

// commonStreamVocabulary lists the steps that several features share (stream).
func commonStreamVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) opens the session stream(?: of conversation "([^"]*)")?(?: from (\d+))?(?: on device "([^"]*)")?$`, a.stream.opens, "asks for a ticket as who (the current conversation, or the named one; from 0 unless named) and expects 200 with a well-formed answer, kept"},
		{`^the open answer says head (\d+) and floor (\d+)$`, a.stream.openAnswerSays, "expects the last open's head and floor to be exactly the numbers"},
		{`^(\w[\w' ]*?) presents the ticket over (WebSocket|SSE)(?: on device "([^"]*)")?(?: for conversation "([^"]*)")? and is served$`, a.stream.presentsServed, "presents the last ticket as who (on the device, for the conversation, when named) and expects the stream served"},
		{`^(\w[\w' ]*?) follows the session stream over (WebSocket|SSE)( with tickets)?(?: on device "([^"]*)")?$`, a.stream.follows, "reads the current conversation's stream as who through the kit's resumable reader from cursor 0, reconnecting from its cursor whenever a connection ends (SSE: Last-Event-ID, or a ticket each time)"},
		{`^(\w[\w' ]*?) reads the session stream over (WebSocket|SSE) from (\d+)(?: holding cursor (\d+))?$`, a.stream.readsFrom, "reads the stream as who over one connection asking from the cursor, with the reader holding the other cursor (the same unless named)"},
		{`^` + readerPat + ` reaches cursor (\d+)$`, a.stream.reaches, "waits until the reader's cursor is at least N"},
		{`^` + readerPat + ` got exactly these frames:$`, a.stream.gotExactly, "waits for as many frames as the table has rows and expects the frames the reader delivered (trimmed where it trimmed them) and the control frames but heartbeats to be exactly the table (cur, span, type, message, text)"},
		{`^` + readerPat + ` saw no gap and no repeat(?: over (more than one|one) connections?)?$`, a.stream.noGapNoRepeat, "expects the reader to have met no frame after a gap and no repeated frame (and, when named, the number of connections it made)"},
		{`^` + readerPat + ` folds the reply to turn (\d+) to "((?:[^"\\]|\\.)*)"$`, a.stream.folds, "waits for turn N's text-done and expects both the folded deltas and the text-done's text to be exactly the text"},
		{`^every frame ` + readerPat + ` received has the frame's shape, with cursors gapless from 1$`, a.stream.shapes, "expects every frame received to have v 1, an id, the session, a type session.<kind> of a known kind, an RFC 3339 UTC time, cursor 0 exactly for control frames, one id per cursor, and the delivered cursors to run 1, 2, 3 ..."},
		{`^` + readerPat + ` stops$`, a.stream.stops, "closes the reader's connection and stops it"},
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) to "((?:[^"\\]|\\.)*)" one piece at a time$`, a.stream.modelPaced, "scripts the model to answer the text with the deltas, waiting after each one (the last included) until the scenario lets it go on"},
		{`^the model goes on after piece (\d+)$`, a.stream.modelGoesOn, "lets the paced answer go on after its piece N (after the last: to its end)"},
	}
}
