package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/resume"
	"github.com/loomcheck/loomcheck/harness/world"
)

// steps is the session stream vocabulary (profile stream): each pattern, the method that runs
// it, what it means.
func (s *streamSteps) steps() []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) opens the session stream(?: of conversation "([^"]*)")?(?: from (\d+))?(?: on device "([^"]*)")?$`, s.opens, "asks for a ticket as who (the current conversation, or the named one; from 0 unless named) and expects 200 with a well-formed answer, kept"},
		{`^(\w[\w' ]*?) fills the session's log with (\d+) terminal lines$`, s.fillLog, "records N terminal lines \"line 1\" .. \"line N\" as who in the current conversation's session, a few requests at a time, each expected 202 {logged: true, cur}; the N cursors must have no gap, and rise for each sender"},
		{`^the ticket is (\d+) ms old$`, s.ticketAged, "waits until the last ticket is at least N ms old, counted from the arrival of its open's answer"},
		{`^the open answer says the ticket is good for (\d+) seconds$`, s.openAnswerGoodFor, "expects the last open's expiresIn to be exactly N"},
		{`^the open answer says head (\d+) and floor (\d+)$`, s.openAnswerSays, "expects the last open's head and floor to be exactly the numbers"},
		{`^(\w[\w' ]*?) opening the session stream gets the same 404 as for a missing session$`, s.openRefusedAsMissing, "opens the current conversation's stream as who and expects 404, byte for byte the answer an id nothing holds gets"},
		{`^(\w[\w' ]*?) presents the ticket over (WebSocket|SSE)(?: on device "([^"]*)")?(?: for conversation "([^"]*)")? and is served$`, s.presentsServed, "presents the last ticket as who (on the device, for the conversation, when named) and expects the stream served"},
		{`^(\w[\w' ]*?) presents (the ticket|a ticket never made) over (WebSocket|SSE)(?: on device "([^"]*)")?(?: for conversation "([^"]*)")? and is refused as "(\w+)"$`, s.presentsRefused, "presents the last ticket (or a made-up one) as who and expects exactly 401 {\"error\":\"ticket refused\",\"reason\":R}"},
		{`^(\w[\w' ]*?) follows the session stream over (WebSocket|SSE)( with tickets)?(?: on device "([^"]*)")?$`, s.follows, "reads the current conversation's stream as who through the kit's resumable reader from cursor 0, reconnecting from its cursor whenever a connection ends (SSE: Last-Event-ID, or a ticket each time)"},
		{`^(\w[\w' ]*?) reads the session stream over (WebSocket|SSE) from (\d+)(?: holding cursor (\d+))?$`, s.readsFrom, "reads the stream as who over one connection asking from the cursor, with the reader holding the other cursor (the same unless named)"},
		{`^` + readerPat + ` reaches cursor (\d+)$`, s.reaches, "waits until the reader's cursor is at least N"},
		{`^` + readerPat + ` got exactly these frames:$`, s.gotExactly, "waits for as many frames as the table has rows and expects the frames the reader delivered (trimmed where it trimmed them) and the control frames but heartbeats to be exactly the table (cur, span, type, message, text)"},
		{`^` + readerPat + ` received exactly these frames:$`, s.receivedExactly, "waits for as many frames as the table has rows and expects every frame received but heartbeats, as sent, with the reader's verdict, to be exactly the table"},
		{`^` + readerPat + ` saw no gap and no repeat(?: over (more than one|one) connections?)?$`, s.noGapNoRepeat, "expects the reader to have met no frame after a gap and no repeated frame (and, when named, the number of connections it made)"},
		{`^` + readerPat + ` folds the reply to turn (\d+) to "((?:[^"\\]|\\.)*)"$`, s.folds, "waits for turn N's text-done and expects both the folded deltas and the text-done's text to be exactly the text"},
		{`^every frame ` + readerPat + ` received has the frame's shape, with cursors gapless from 1$`, s.shapes, "expects every frame received to have v 1, an id, the session, a type session.<kind> of a known kind, an RFC 3339 UTC time, cursor 0 exactly for control frames, one id per cursor, and the delivered cursors to run 1, 2, 3 ..."},
		{`^` + readerPat + ` gets heartbeats every (\d+) ms while idle, each with cursor 0$`, s.heartbeats, "waits for the heartbeats of at least 3 intervals (more for a short interval) after the last logged frame and expects each with cursor 0, the first at most the interval plus 400 ms after that frame, all of them on a schedule of one per interval with each arriving up to 400 ms late, the reader's cursor unmoved"},
		{`^` + readerPat + ` and ` + readerPat + ` received the same frames$`, s.sameFrames, "expects the two readers to have received the same frames but heartbeats, member for member, in the same order"},
		{`^` + readerPat + ` stops$`, s.stops, "closes the reader's connection and stops it"},
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) to "((?:[^"\\]|\\.)*)" one piece at a time$`, s.modelPaced, "scripts the model to answer the text with the deltas, waiting after each one (the last included) until the scenario lets it go on"},
		{`^the model goes on after piece (\d+)$`, s.modelGoesOn, "lets the paced answer go on after its piece N (after the last: to its end)"},
		{`^the model goes on after every piece, one every (\d+) ms$`, s.modelGoesOnEvery, "lets the newest paced answer go on after each of its pieces in turn, each the interval after the piece reached its hold, while the scenario goes on"},
	}
}

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
		return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200 with a ticket")
	}
	s.opened, s.openedBy, s.openedAt, s.openedArgs = a, who, time.Now(), [4]string{who, name, from, device}
	s.openSent = sent
	return nil
}

// ticketAged waits until the last ticket is at least ms old (counted from its answer's arrival,
// after the ticket was made).
func (s *streamSteps) ticketAged(ms int) error {
	if s.opened == nil {
		return harnessErr("no ticket was opened before this step")
	}
	select {
	case <-time.After(time.Until(s.openedAt.Add(time.Duration(ms) * time.Millisecond))):
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
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

// openAnswerGoodFor expects the last open's ticket to be good for exactly secs seconds.
func (s *streamSteps) openAnswerGoodFor(secs int64) error {
	if s.opened == nil {
		return harnessErr("no open was answered in this scenario")
	}
	if s.opened.ExpiresIn != secs {
		return fail("POST "+streamOpenPath(s.opened.Session), fmt.Sprintf("expiresIn %d", s.opened.ExpiresIn), fmt.Sprintf("expiresIn %d", secs))
	}
	return nil
}

// openRefusedAsMissing expects who's open of the current conversation to answer exactly as an
// open of an id nothing holds.
func (s *streamSteps) openRefusedAsMissing(who string) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	missing, _, err := s.openSession(s.ctx, who, "no-such-session-"+s.run.runID, 0, "")
	if err != nil {
		return err
	}
	got, _, err := s.openSession(s.ctx, who, c.id, 0, "")
	s.last = got
	if err != nil {
		return err
	}
	if missing.status != http.StatusNotFound {
		return fail(missing.op, fmt.Sprintf("%d %s", missing.status, clip(string(missing.body), 200)), "404 for a session nothing holds")
	}
	if got.status != missing.status || !bytes.Equal(got.body, missing.body) {
		return fail(got.op, fmt.Sprintf("%d %s", got.status, clip(string(got.body), 200)),
			fmt.Sprintf("exactly the missing session's answer: %d %s", missing.status, clip(string(missing.body), 200)))
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
	cn, err := s.dialSession(ctx, who, c.id, dialOpts{transport: transport, ticket: tk, device: device})
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
			c.close()
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
	if json.Unmarshal(r.body, &body) != nil || body["reason"] != "expired" || s.openSent.IsZero() {
		return false
	}
	return time.Since(s.openSent) >= time.Duration(s.ticketMs())*time.Millisecond
}

// ticketMs is the ticket lifetime the system was configured with (spec/config.go: 15000 when
// unset).
func (s *streamSteps) ticketMs() int64 {
	if ms := s.cfg.Stream.TicketMs; ms > 0 {
		return ms
	}
	return 15000
}

// presentsRefused presents the last (or a made-up) ticket and expects exactly the refusal.
func (s *streamSteps) presentsRefused(who, which, transport, device, name, reason string) error {
	tk := "never-made-" + s.run.runID
	if which == "the ticket" {
		var err error
		if tk, err = s.lastTicket(); err != nil {
			return err
		}
	}
	op := "GET /sessions/{id}/stream (" + transport + ") with " + which
	want := fmt.Sprintf(`401 {"error":"ticket refused","reason":%q}`, reason)
	c, err := s.present(who, tk, transport, device, name)
	if err == nil {
		c.close()
		return fail(op, "the stream served", want)
	}
	var r *refusedErr
	if !errors.As(err, &r) {
		return err
	}
	var body map[string]any
	_ = json.Unmarshal(r.body, &body)
	if r.status != http.StatusUnauthorized || !reflect.DeepEqual(body, map[string]any{"error": "ticket refused", "reason": reason}) {
		return fail(op, r.Error(), want)
	}
	return nil
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

// compareTable expects rows (each frame's cells) to be exactly the table's.
func compareTable(op string, t *godog.Table, rows []map[string]string) error {
	if t == nil || len(t.Rows) == 0 {
		return harnessErr("the step needs a table with a header row")
	}
	var cols []string
	for _, c := range t.Rows[0].Cells {
		if _, ok := rows0Keys[c.Value]; !ok {
			return harnessErr("unknown column %q (cur, span, type, message, text, turn, verdict)", c.Value)
		}
		cols = append(cols, c.Value)
	}
	render := func(cells []string) string { return "| " + strings.Join(cells, " | ") + " |" }
	var want, got []string
	for _, r := range t.Rows[1:] {
		var cells []string
		for _, c := range r.Cells {
			cells = append(cells, c.Value)
		}
		want = append(want, render(cells))
	}
	for _, m := range rows {
		var cells []string
		for _, c := range cols {
			cells = append(cells, m[c])
		}
		got = append(got, render(cells))
	}
	if !slicesEqual(want, got) {
		return fail(op, "\n"+strings.Join(got, "\n"), "exactly\n"+strings.Join(want, "\n"))
	}
	return nil
}

var rows0Keys = map[string]struct{}{"cur": {}, "span": {}, "type": {}, "message": {}, "text": {}, "turn": {}, "verdict": {}}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// settle is how long a table step waits, once it has as many frames as rows, for a frame too
// many to come.
const settle = 200 * time.Millisecond

// gotExactly expects the delivered frames to be exactly the table.
func (s *streamSteps) gotExactly(who, transport string, t *godog.Table) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	n := len(t.Rows) - 1
	ctx, cancel := s.wait()
	defer cancel()
	if _, err := f.waitFor(ctx, fmt.Sprintf("%d frames delivered", n), func(fw followed) bool { return len(fw.delivered) >= n }); err != nil {
		return err
	}
	time.Sleep(settle)
	fw := f.snapshot()
	if fw.kitErr != nil {
		return fw.kitErr
	}
	rows := make([]map[string]string, len(fw.delivered))
	for i, d := range fw.delivered {
		rows[i] = frameCells(d, nil)
	}
	if err := compareTable(who+"'s "+transport+" reader delivered", t, rows); err != nil {
		return err
	}
	return fw.sutErr
}

// receivedExactly expects the frames received (but heartbeats), with their verdicts, to be
// exactly the table.
func (s *streamSteps) receivedExactly(who, transport string, t *godog.Table) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	n := len(t.Rows) - 1
	count := func(fw followed) int {
		k := 0
		for _, r := range fw.raw {
			if r.kind() != "heartbeat" {
				k++
			}
		}
		return k
	}
	ctx, cancel := s.wait()
	defer cancel()
	if _, err := f.waitFor(ctx, fmt.Sprintf("%d frames received", n), func(fw followed) bool { return count(fw) >= n }); err != nil {
		return err
	}
	time.Sleep(settle)
	fw := f.snapshot()
	if fw.kitErr != nil {
		return fw.kitErr
	}
	var rows []map[string]string
	for i, r := range fw.raw {
		if r.kind() != "heartbeat" {
			rows = append(rows, frameCells(r, &fw.verdicts[i]))
		}
	}
	if err := compareTable(who+"'s "+transport+" reader received", t, rows); err != nil {
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

// modelGoesOnEvery releases the newest paced answer's holds one by one in the background, each
// the interval after its piece was sent.
func (s *streamSteps) modelGoesOnEvery(ms int) error {
	if len(s.paced) == 0 {
		return harnessErr("no paced answer was scripted")
	}
	a := s.paced[len(s.paced)-1]
	ctx := s.ctx
	go func() {
		for _, h := range a.holds {
			if h.WaitReached(ctx) != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(ms) * time.Millisecond):
			}
			h.Release()
		}
	}()
	return nil
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

// shapes expects every frame received to have the frame's shape and the cursors to run from 1.
func (s *streamSteps) shapes(who, transport string) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	fw := f.snapshot()
	if fw.kitErr != nil {
		return fw.kitErr
	}
	op := who + "'s " + transport + " reader"
	if len(fw.raw) == 0 {
		return harnessErr("%s received nothing to judge", op)
	}
	ids := map[int64]string{}
	seen := map[string]int64{}
	for _, r := range fw.raw {
		logged, known := frameKinds[r.kind()]
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
			return fail(op, bad+" in "+clip(string(r.raw), 300), "a frame per spec/stream.md: v 1, id, cur, session, type session.<kind>, time in UTC")
		}
	}
	next := int64(1)
	for _, d := range fw.delivered {
		if d.Cur == 0 {
			if fl := d.data().Floor; d.kind() == "reset" && fl != nil {
				next = *fl
			}
			continue
		}
		first := d.resumeFrame().First()
		if first != next {
			return fail(op, fmt.Sprintf("delivered cursors %d..%d where %d was next", first, d.Cur, next), "cursors gapless from 1")
		}
		next = d.Cur + 1
	}
	return fw.sutErr
}

// heartbeats waits for the heartbeats of heartbeatIntervals(interval) intervals after the last
// logged frame and judges them with judgeHeartbeats.
func (s *streamSteps) heartbeats(who, transport string, ms int) error {
	f, err := s.reader(who, transport)
	if err != nil {
		return err
	}
	op := who + "'s " + transport + " reader, idle"
	period := time.Duration(ms) * time.Millisecond
	if period <= 0 {
		return fmt.Errorf("a heartbeat interval of %d ms", ms)
	}
	need := heartbeatIntervals(period) + 1
	// idleSince is when the reader received the last frame that is not a heartbeat (zero when
	// it received none), and beats the heartbeats it received after that.
	idleSince := func(fw followed) (time.Time, []sframe) {
		var lastAt time.Time
		for _, r := range fw.raw {
			if r.kind() != "heartbeat" {
				lastAt = r.at
			}
		}
		var out []sframe
		for _, r := range fw.raw {
			if r.kind() == "heartbeat" && r.at.After(lastAt) {
				out = append(out, r)
			}
		}
		return lastAt, out
	}
	before := f.snapshot()
	ctx, cancel := s.wait()
	defer cancel()
	// silent is how long the reader has gone without a heartbeat since the stream went idle or
	// the last heartbeat; the wait ends early once that is already too long.
	silent := func(idle time.Time, beats []sframe) (time.Duration, string) {
		if len(beats) > 0 {
			return time.Since(beats[len(beats)-1].at), "the last heartbeat"
		}
		if idle.IsZero() {
			return 0, ""
		}
		return time.Since(idle), "the last logged frame"
	}
	fw, err := f.waitFor(ctx, fmt.Sprintf("%d heartbeats after the last logged frame", need), func(fw followed) bool {
		idle, beats := idleSince(fw)
		d, _ := silent(idle, beats)
		return len(beats) >= need || d > period+heartbeatSlack
	})
	if err != nil {
		return err
	}
	if fw.last != before.last {
		return fail(op, fmt.Sprintf("the reader's cursor moved from %d to %d while idle", before.last, fw.last), "the cursor unmoved by heartbeats")
	}
	idle, beats := idleSince(fw)
	if len(beats) < need {
		d, since := silent(idle, beats)
		return fail(op, fmt.Sprintf("no heartbeat for %s after %s (%d of the %d awaited)", d.Round(time.Millisecond), since, len(beats), need),
			fmt.Sprintf("one every %s (at most %s apart, with %s of slack for a loaded machine)", period, period+heartbeatSlack, heartbeatSlack))
	}
	beats = beats[:need]
	at := make([]time.Time, len(beats))
	for i, b := range beats {
		if b.Cur != 0 {
			return fail(op, fmt.Sprintf("a heartbeat with cursor %d", b.Cur), "cursor 0")
		}
		at[i] = b.at
	}
	if got, want := judgeHeartbeats(idle, at, period); got != "" {
		return fail(op, got, want)
	}
	return nil
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

// sameFrames expects two readers to have received the same frames but heartbeats, member for
// member.
func (s *streamSteps) sameFrames(who1, tr1, who2, tr2 string) error {
	a, err := s.reader(who1, tr1)
	if err != nil {
		return err
	}
	b, err := s.reader(who2, tr2)
	if err != nil {
		return err
	}
	canon := func(f *follower) ([]string, error) {
		fw := f.snapshot()
		if fw.kitErr != nil {
			return nil, fw.kitErr
		}
		var out []string
		for _, r := range fw.raw {
			if r.kind() == "heartbeat" {
				continue
			}
			var v any
			_ = json.Unmarshal(r.raw, &v)
			c, _ := json.Marshal(v)
			out = append(out, string(c))
		}
		return out, nil
	}
	x, err := canon(a)
	if err != nil {
		return err
	}
	y, err := canon(b)
	if err != nil {
		return err
	}
	if len(x) == 0 {
		return harnessErr("%s's %s reader received nothing to compare", who1, tr1)
	}
	if !slicesEqual(x, y) {
		return fail(who2+"'s "+tr2+" reader", clip(strings.Join(y, "\n"), 3000), "the same frames as "+who1+"'s "+tr1+" reader:\n"+clip(strings.Join(x, "\n"), 3000))
	}
	return nil
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

// fillLog records n terminal lines as who, each a frame of the session's log: a quick way to
// take the log past its default bound. The lines go fillWorkers at a time, each worker sending
// one after the other. Each answer must be 202 {logged: true, cur}; a worker's cursors must rise
// (a line answered before the next is sent comes before it in the log), and the n cursors
// together must be n different ones with no gap between them, as they are when every answer is
// one past the one before. Which line has which cursor is not judged: the rules the filled log
// serves are about its head and its floor.
func (s *streamSteps) fillLog(who string, n int) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	path := "/sessions/" + url.PathEscape(c.id) + "/terminal"
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	curs := make([]int64, n)
	lines := make(chan int)
	errs := make(chan error, fillWorkers)
	var wg sync.WaitGroup
	for range fillWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev int64
			for i := range lines {
				r, err := s.cl.do(ctx, who, http.MethodPost, path, map[string]any{"line": "line " + strconv.Itoa(i)}, reqOpts{quiet: true})
				if err != nil {
					errs <- err
					cancel()
					return
				}
				var a struct {
					Logged bool  `json:"logged"`
					Cur    int64 `json:"cur"`
				}
				if r.status != http.StatusAccepted || r.json(&a) != nil || !a.Logged || a.Cur <= prev {
					errs <- fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)),
						fmt.Sprintf("202 {logged: true, cur} with cur past %d, the cursor of this sender's line before (line %d)", prev, i))
					cancel()
					return
				}
				prev, curs[i-1] = a.Cur, a.Cur
			}
		}()
	}
feed:
	for i := 1; i <= n; i++ {
		select {
		case lines <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(lines)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	if err := s.ctx.Err(); err != nil {
		return harnessErr("the run was stopped: %v", err)
	}
	sorted := slices.Sorted(slices.Values(curs))
	for k := 1; k < n; k++ {
		if sorted[k] != sorted[k-1]+1 {
			return fail("the cursors of the "+strconv.Itoa(n)+" lines", fmt.Sprintf("%d then %d", sorted[k-1], sorted[k]),
				"n different cursors with no gap between them")
		}
	}
	return nil
}

// inUTC says whether an RFC 3339 time t, parsed from text, is written in UTC: with "Z" or a zero
// offset ("+00:00"; RFC 3339 reserves "-00:00" for a time whose offset is unknown).
func inUTC(text string, t time.Time) bool {
	_, off := t.Zone()
	return off == 0 && !strings.HasSuffix(text, "-00:00")
}
