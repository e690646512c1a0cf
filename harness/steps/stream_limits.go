package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/cucumber/godog"
)

// streamLimitsSteps judge the bounds one caller meets on the session stream (tickets waiting,
// sessions held) and the redaction of terminal lines (profile stream). Readers are the stream
// area's, and the answer an ask keeps is the one "the session answers exactly" judges.
type streamLimitsSteps struct {
	*scenario
}

// asksToOpen asks for a ticket and keeps the answer, whatever it is.
func (s *streamLimitsSteps) asksToOpen(who, name string) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	r, err := s.cl.Do(ctx, who, http.MethodPost, streamOpenPath(c.id), map[string]any{"from": 0}, reqOpts{})
	if err != nil {
		return err
	}
	s.last = r
	return nil
}

// opensOnceReleased asks for a ticket until the caller's share has room again: a reader that
// stopped holds its session no longer (spec/stream.md, Limits), though the system may learn of
// the closed connection a moment later. Only 429 resident is asked again; any other answer is
// judged at once.
func (s *streamLimitsSteps) opensOnceReleased(who, name string) error {
	if err := s.sut(); err != nil {
		return err
	}
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := s.cl.Do(ctx, who, http.MethodPost, streamOpenPath(c.id), map[string]any{"from": 0}, reqOpts{})
		if err != nil {
			return err
		}
		s.last = r
		var body struct {
			Reason string `json:"reason"`
		}
		if r.Status != http.StatusTooManyRequests || json.Unmarshal(r.Body, &body) != nil || body.Reason != "resident" {
			if r.Status != http.StatusOK {
				return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 with a ticket")
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fail(r.Op, fmt.Sprintf("%d %s until the step's deadline", r.Status, clip(string(r.Body), 200)), "200 once the stopped reader no longer holds its session")
		case <-tick.C:
		}
	}
}

// typesEach sends every line of the table to the terminal and judges the frames they became.
func (s *streamLimitsSteps) typesEach(who, readerWho, transport string, t *godog.Table) error {
	if err := s.sut(); err != nil {
		return err
	}
	f, err := s.areas.stream.reader(readerWho, transport)
	if err != nil {
		return err
	}
	if t == nil || len(t.Rows) < 2 || len(t.Rows[0].Cells) != 2 || t.Rows[0].Cells[0].Value != "line" || t.Rows[0].Cells[1].Value != "command" {
		return harnessErr("the step needs a table with the columns line and command, and at least one row")
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	var want []string
	var head int64
	for _, row := range t.Rows[1:] {
		line, command := row.Cells[0].Value, row.Cells[1].Value
		body, err := json.Marshal(map[string]string{"line": line})
		if err != nil {
			return harnessErr("encode: %v", err)
		}
		r, err := s.cl.Do(ctx, who, http.MethodPost, sessionRoutePath(c.id, "terminal"), nil, reqOpts{RawBody: body})
		if err != nil {
			return err
		}
		s.last = r
		var a struct {
			Logged bool  `json:"logged"`
			Cur    int64 `json:"cur"`
		}
		if r.Status != http.StatusAccepted || r.JSON(&a) != nil || !a.Logged || a.Cur <= head {
			return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), fmt.Sprintf("202 {logged: true, cur} with cur above %d for the line %q", head, line))
		}
		head = a.Cur
		d, _ := json.Marshal(map[string]string{"command": command, "via": "terminal"})
		want = append(want, termRow(d))
	}
	fw, err := f.waitFor(ctx, fmt.Sprintf("cursor %d delivered", head), func(fw followed) bool { return fw.last >= head })
	if err != nil {
		return err
	}
	var got []string
	for _, fr := range fw.delivered {
		if fr.Kind() != "term-command" {
			got = append(got, fr.Kind()+" "+string(fr.Data))
			continue
		}
		got = append(got, termRow(fr.Data))
	}
	if !slicesEqual(want, got) {
		return fail(readerWho+"'s "+transport+" reader delivered", "\n"+strings.Join(got, "\n"), "exactly\n"+strings.Join(want, "\n"))
	}
	return fw.sutErr
}

// termRow is a term-command frame's data as one canonical line.
func termRow(data []byte) string {
	if d, ok := groupJSON(data); ok {
		return "term-command " + d
	}
	return "term-command " + string(data)
}

// streamLimitsVocabulary lists the steps of features/stream/limits.feature.
func streamLimitsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) asks to open the session stream(?: of conversation "([^"]*)")?$`, a.streamLimits.asksToOpen, "asks for a ticket as who (the current conversation, or the named one; from 0) and keeps the answer whatever its status"},
		{`^(\w[\w' ]*?) opens the session stream of conversation "([^"]*)" once (?:her|his) stopped reader no longer holds its session$`, a.streamLimits.opensOnceReleased, "asks for a ticket as who for the named conversation until the answer is no longer 429 resident, and expects it to be 200 before the step's deadline"},
		{`^each line (\w[\w' ]*?) types in the session's terminal reaches ` + readerPat + ` as exactly its command:$`, a.streamLimits.typesEach, "sends each line of the table (columns line, command) as who to the current conversation's terminal, expecting 202 {logged: true, cur}, then expects the reader to have delivered exactly one term-command frame per line, in order, each with data exactly {command, via: terminal}"},
	}
}
