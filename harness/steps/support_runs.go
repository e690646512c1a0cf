package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/cucumber/godog"
)

// runPath is the run route of id with the suffix.
func runPath(id, suffix string) string { return "/runs/" + url.PathEscape(id) + suffix }

// read reads the run as who.
func (s *runsSteps) read(who string, quiet bool) (*response, runView, error) {
	var v runView
	r, err := s.cl.Do(s.ctx, who, http.MethodGet, runPath(s.runID, ""), nil, reqOpts{Quiet: quiet})
	if err != nil {
		return r, v, err
	}
	if r.Status != http.StatusOK {
		return r, v, fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200: the run")
	}
	return r, v, r.JSON(&v)
}

func (s *runsSteps) endedRun() (*runView, error) {
	if s.ended == nil {
		return nil, harnessErr("the run was not read when it ended (use \"the run ends ...\" first)")
	}
	return s.ended, nil
}

// callsOf reads a table of calls: name, arguments (JSON), ok (true/false), result (the output as
// JSON when ok, else the error text).
func callsOf(t *godog.Table) ([]runCall, error) {
	var out []runCall
	for _, row := range t.Rows[1:] {
		if len(row.Cells) != 4 {
			return nil, harnessErr("a call row has name, arguments, ok, result")
		}
		c := runCall{Name: row.Cells[0].Value, Arguments: json.RawMessage(row.Cells[1].Value), OK: row.Cells[2].Value == "true"}
		if !json.Valid(c.Arguments) {
			return nil, harnessErr("the arguments of %s are not JSON", c.Name)
		}
		if c.OK {
			c.Output = json.RawMessage(row.Cells[3].Value)
			if !json.Valid(c.Output) {
				return nil, harnessErr("the output of %s is not JSON", c.Name)
			}
		} else {
			c.Error = row.Cells[3].Value
		}
		out = append(out, c)
	}
	return out, nil
}

// renderCalls writes calls one per line, JSON compared by value.
func renderCalls(cs []runCall) string {
	var b strings.Builder
	for _, c := range cs {
		res := c.Error
		if c.OK {
			res = canonicalJSON(c.Output)
		}
		fmt.Fprintf(&b, "[%s %s ok=%v %s] ", c.Name, canonicalJSON(c.Arguments), c.OK, res)
	}
	if b.Len() == 0 {
		return "no calls"
	}
	return strings.TrimSpace(b.String())
}

// canonicalJSON is raw re-encoded with sorted keys and no spaces (raw itself if it is not JSON).
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(buf.String())
}

func (s *runsSteps) sameCalls(what string, got []runCall, t *godog.Table) error {
	want, err := callsOf(t)
	if err != nil {
		return err
	}
	if g, w := renderCalls(got), renderCalls(want); g != w {
		return fail("GET "+runPath(s.runID, "")+": "+what, g, w)
	}
	return nil
}

func (s *runsSteps) interrupted(content string, n int) (*runView, error) {
	v, err := s.endedRun()
	if err != nil {
		return nil, err
	}
	op := "GET " + runPath(s.runID, "") + ": the interrupted payload"
	if v.Interrupted == nil {
		return nil, fail(op, "none", "one")
	}
	want := unescape(content)
	if v.Interrupted.Content != want || v.Interrupted.Iterations != n {
		return nil, fail(op, fmt.Sprintf("content %q after %d model calls", v.Interrupted.Content, v.Interrupted.Iterations),
			fmt.Sprintf("content %q after %d model calls", want, n))
	}
	return v, nil
}

// answeredAsMissing asks route suffix of the run as who, and of a run that does not exist, and
// expects the second to be a 404 and the first to equal it byte for byte.
func (s *runsSteps) answeredAsMissing(who, method, suffix string, body any) error {
	want, err := s.cl.Do(s.ctx, who, method, runPath("run:missing-"+s.runID, suffix), body, reqOpts{})
	if err != nil {
		return err
	}
	got, err := s.cl.Do(s.ctx, who, method, runPath(s.runID, suffix), body, reqOpts{})
	if err != nil {
		return err
	}
	if want.Status != http.StatusNotFound {
		return fail(want.Op, fmt.Sprintf("%d %s", want.Status, clip(string(want.Body), 200)), "404 for a run that does not exist")
	}
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
		return fail(got.Op+" as "+who, fmt.Sprintf("%d %s", got.Status, clip(string(got.Body), 200)),
			fmt.Sprintf("what a missing run gets: %d %s", want.Status, clip(string(want.Body), 200)))
	}
	return nil
}

// quotedNames reads `"a", "b" and "c"`.
func quotedNames(list string) []string {
	var out []string
	for _, p := range strings.Split(list, `"`) {
		p = strings.TrimSpace(p)
		if p != "" && p != "," && p != "and" {
			out = append(out, p)
		}
	}
	return out
}
