package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/cucumber/godog"
)

type jsonRaw string

// MarshalJSON writes the raw JSON text as is.
func (j jsonRaw) MarshalJSON() ([]byte, error) {
	if !json.Valid([]byte(j)) {
		return nil, fmt.Errorf("not JSON: %s", string(j))
	}
	return []byte(j), nil
}

// streamOf returns who's open event stream of the current conversation, opening it if needed.
func (s *scenario) streamOf(who, name string) (*stream, error) {
	key := who + "/" + name
	s.mu.Lock()
	st := s.named[key]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	st, err = s.cl.openStream(s.ctx, who, "/conversations/"+url.PathEscape(c.id)+"/events", nil)
	if err != nil {
		return nil, err
	}
	if st.status != http.StatusOK {
		return nil, fail(st.op, fmt.Sprintf("%d %s", st.status, clip(string(st.body), 200)), "200 and an event stream")
	}
	s.mu.Lock()
	s.named[key] = st
	s.mu.Unlock()
	return st, nil
}

// liveText is the text of the live events seen so far: the last partial plus the deltas after it.
func liveText(evs []sseEvent) string {
	var b strings.Builder
	for _, e := range evs {
		var d struct {
			Text string `json:"text"`
		}
		switch e.Event {
		case "partial":
			_ = json.Unmarshal([]byte(e.Data), &d)
			b.Reset()
			b.WriteString(d.Text)
		case "delta":
			_ = json.Unmarshal([]byte(e.Data), &d)
			b.WriteString(d.Text)
		case "reset":
			b.Reset()
		}
	}
	return b.String()
}

// eventRow is an event of a stream as a table row: the event name, then turn, role, status and
// text where the event has them.
type eventRow struct{ event, turn, role, status, text string }

func (r eventRow) String() string {
	parts := []string{r.event}
	for _, p := range []string{r.turn, r.role, r.status} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if r.text != "" {
		parts = append(parts, fmt.Sprintf("%q", r.text))
	}
	return strings.Join(parts, " ")
}

// rowOf renders a received event the way an expected-events table writes it.
func rowOf(e sseEvent) eventRow {
	r := eventRow{event: e.Event}
	switch e.Event {
	case "message":
		var en entry
		if json.Unmarshal([]byte(e.Data), &en) == nil {
			r.turn, r.role, r.status, r.text = fmt.Sprint(en.Turn), en.Role, en.Status, en.text()
		}
	case "delta", "partial", "reset":
		var d struct {
			Turn int64  `json:"turn"`
			Text string `json:"text"`
		}
		if json.Unmarshal([]byte(e.Data), &d) == nil {
			r.turn, r.text = fmt.Sprint(d.Turn), d.Text
		}
	case "status":
	default:
		r.text = e.Data
	}
	return r
}

// cell reads a table cell; a text in double quotes keeps its spaces and escapes.
func cell(v string) string {
	if len(v) >= 2 && strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) {
		return unescape(v[1 : len(v)-1])
	}
	return v
}

// eventTable reads a table with the columns event, turn, role, status and text (any may be left
// out; an empty cell is an absent field).
func eventTable(t *godog.Table) ([]eventRow, error) {
	if t == nil || len(t.Rows) < 2 {
		return nil, harnessErr("the table needs a header and at least one event")
	}
	var out []eventRow
	for _, row := range t.Rows[1:] {
		var r eventRow
		for i, h := range t.Rows[0].Cells {
			v := cell(strings.TrimSpace(row.Cells[i].Value))
			switch h.Value {
			case "event":
				r.event = v
			case "turn":
				r.turn = v
			case "role":
				r.role = v
			case "status":
				r.status = v
			case "text":
				r.text = v
			default:
				return nil, harnessErr("unknown column %q (event, turn, role, status, text)", h.Value)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// exactEvents waits until st has received as many events as want holds (or has ended), then
// compares the whole sequence, event by event; consecutive deltas of one turn compare as one.
func (s *scenario) exactEvents(st *stream, t *godog.Table) error {
	want, err := eventTable(t)
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	want = coalesced(want)
	n := len(want)
	evs, err := st.waitFor(ctx, fmt.Sprintf("the events %s", rowsText(want)), func(evs []sseEvent, ended bool) bool {
		rs := make([]eventRow, len(evs))
		for i, e := range evs {
			rs[i] = rowOf(e)
		}
		rs = coalesced(rs)
		if ended || len(rs) > n {
			return true
		}
		// A trailing delta may still grow by coalescing: wait for what follows it, unless the
		// table itself ends with a delta.
		return len(rs) == n && (rs[n-1].event != "delta" || want[len(want)-1].event == "delta")
	})
	if err != nil {
		return err
	}
	got := make([]eventRow, len(evs))
	for i, e := range evs {
		got[i] = rowOf(e)
	}
	got = coalesced(got)
	if !slices.Equal(got, want) {
		return fail(st.op, rowsText(got), "exactly "+rowsText(want))
	}
	return nil
}

// coalesced merges consecutive deltas of one turn into one, and into the partial of that turn
// they follow: a system may coalesce the deltas it queued for a reader (ADR0122-D6-12), and how
// much of a reply in progress its partial already holds depends on timing, so only the text they
// carry, in order, is exact.
func coalesced(rs []eventRow) []eventRow {
	var out []eventRow
	for _, r := range rs {
		if n := len(out); n > 0 && r.event == "delta" && (out[n-1].event == "delta" || out[n-1].event == "partial") && out[n-1].turn == r.turn {
			out[n-1].text += r.text
			continue
		}
		out = append(out, r)
	}
	return out
}

func rowsText(rs []eventRow) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// exactEventsBefore waits until st shows the first event of turn `turn` (the sentinel: the user's
// message of that turn, or its first live delta or partial, which spec/http.md does not order
// against that message; a system sends a stream's events in order, so whatever it sent before has
// arrived once the sentinel has), then compares every event before it with the table, as
// exactEvents does. An event that should not be there cannot come too late to be seen.
func (s *scenario) exactEventsBefore(st *stream, t *godog.Table, turn int64) error {
	want, err := eventTable(t)
	if err != nil {
		return err
	}
	want = coalesced(want)
	sentinel := fmt.Sprint(turn)
	at := func(evs []sseEvent) int {
		for i, e := range evs {
			r := rowOf(e)
			if r.turn == sentinel && ((r.event == "message" && r.role == "user") || r.event == "delta" || r.event == "partial") {
				return i
			}
		}
		return -1
	}
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.waitFor(ctx, fmt.Sprintf("the events %s, then the first event of turn %d", rowsText(want), turn),
		func(evs []sseEvent, _ bool) bool { return at(evs) >= 0 })
	if err != nil {
		return err
	}
	evs = evs[:at(evs)]
	got := make([]eventRow, len(evs))
	for i, e := range evs {
		got[i] = rowOf(e)
	}
	got = coalesced(got)
	if !slices.Equal(got, want) {
		return fail(st.op, rowsText(got)+fmt.Sprintf(" before the first event of turn %d", turn), "exactly "+rowsText(want))
	}
	return nil
}

func (s *scenario) registerStream(sc *godog.ScenarioContext) {
	sc.Step(`^(\w[\w' ]*?)'s stream got exactly these events before the message of turn (\d+):$`, func(who string, turn int64, t *godog.Table) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		return s.exactEventsBefore(st, t, turn)
	})
	sc.Step(`^the stream of conversation "([^"]*)" got exactly these events before the message of turn (\d+):$`, func(name string, turn int64, t *godog.Table) error {
		st, err := s.streamFor(name)
		if err != nil {
			return err
		}
		return s.exactEventsBefore(st, t, turn)
	})
	sc.Step(`^the stream of conversation "([^"]*)" got exactly these events:$`, func(name string, t *godog.Table) error {
		st, err := s.streamFor(name)
		if err != nil {
			return err
		}
		return s.exactEvents(st, t)
	})
	sc.Step(`^(\w[\w' ]*?)'s stream got exactly these events:$`, func(who string, t *godog.Table) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		return s.exactEvents(st, t)
	})
}
