package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// runPending is a call a waiting run waits for a person on (spec/http.md, Approvals and human
// tools).
type runPending struct {
	Kind      string          `json:"kind"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// runWaiting is what the approvals steps read of a run.
type runWaiting struct {
	Status   string       `json:"status"`
	Pending  []runPending `json:"pending"`
	Warnings []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"warnings"`
}

// toolIsHuman declares the tool kind "human" to the system and to the tool server.
func (s *approvalsSteps) toolIsHuman(name string) error {
	d := sutconfig.ToolDef{Name: name, Description: "the " + name + " tool, answered by a person", Parameters: map[string]any{"type": "object"}, Kind: world.KindHuman}
	if err := s.configure(func(c *sutconfig.SUTConfig) {
		for i, o := range c.Tools.Definitions {
			if o.Name == name {
				c.Tools.Definitions[i] = d
				return
			}
		}
		c.Tools.Definitions = append(c.Tools.Definitions, d)
	}); err != nil {
		return err
	}
	if err := s.world.Tools().Declare(sutconfig.ToolDef{Name: name, Kind: world.KindHuman}); err != nil {
		return harnessErr("declare the tool: %v", err)
	}
	return nil
}

// readWaiting reads the run as its owner.
func (s *approvalsSteps) readWaiting(quiet bool) (*response, runWaiting, error) {
	rs := s.areas.runs
	var v runWaiting
	if rs.runID == "" {
		return nil, v, harnessErr("no run was started")
	}
	r, err := s.cl.Do(s.ctx, rs.runOwner, http.MethodGet, runPath(rs.runID, ""), nil, reqOpts{Quiet: quiet})
	if err != nil {
		return r, v, err
	}
	if r.Status != http.StatusOK {
		return r, v, fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200: the run")
	}
	return r, v, r.JSON(&v)
}

func renderPending(ps []runPending) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "[%s %s %s %s] ", p.Kind, p.ID, p.Name, canonicalJSON(p.Arguments))
	}
	if b.Len() == 0 {
		return "nothing pending"
	}
	return strings.TrimSpace(b.String())
}

// runWaitsOn waits until the run's status is waiting and expects its pending calls to be exactly
// the table (kind, id, name, arguments). A run that ends first fails at once; one that waits on
// something else is read again until the wait times out (an answer is taken asynchronously).
func (s *approvalsSteps) runWaitsOn(t *godog.Table) error {
	var want []runPending
	for _, row := range t.Rows[1:] {
		if len(row.Cells) != 4 {
			return harnessErr("a pending row has kind, id, name, arguments")
		}
		p := runPending{Kind: row.Cells[0].Value, ID: row.Cells[1].Value, Name: row.Cells[2].Value, Arguments: json.RawMessage(row.Cells[3].Value)}
		if !json.Valid(p.Arguments) {
			return harnessErr("the arguments of %s are not JSON", p.ID)
		}
		want = append(want, p)
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r, v, err := s.readWaiting(true)
		if err != nil {
			return err
		}
		got := renderPending(v.Pending)
		switch {
		case v.Status == "waiting" && got == renderPending(want):
			return nil
		case v.Status != "waiting" && v.Status != "running":
			return fail(r.Op, "status "+v.Status+": "+clip(string(r.Body), 300), "waiting on "+renderPending(want))
		}
		select {
		case <-ctx.Done():
			return fail(r.Op, "status "+v.Status+", "+got, "waiting on "+renderPending(want))
		case <-tick.C:
		}
	}
}

// answer posts an answer to a parked call of the run as who.
func (s *approvalsSteps) answer(who, route, id string, body any) (*response, error) {
	rs := s.areas.runs
	if rs.runID == "" {
		return nil, harnessErr("no run was started")
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, runPath(rs.runID, "/"+route+"/"+id), body, reqOpts{})
	s.last = r
	return r, err
}

func gateBody(verb string) map[string]string {
	if strings.HasPrefix(verb, "approve") {
		return map[string]string{"decision": "approve"}
	}
	return map[string]string{"decision": "deny"}
}

func expect200Run(r *response) error {
	if r.Status != http.StatusOK {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200: the run")
	}
	var v runView
	return r.JSON(&v)
}

// answersGate answers the run's approval gate as who and expects 200 and the run.
func (s *approvalsSteps) answersGate(who, verb, gate string) error {
	r, err := s.answer(who, "approvals", gate, gateBody(verb))
	if err != nil {
		return err
	}
	return expect200Run(r)
}

// answersHuman answers the run's human call as who with the JSON result and expects 200 and the run.
func (s *approvalsSteps) answersHuman(who, call, result string) error {
	r, err := s.humanAnswer(who, call, result)
	if err != nil {
		return err
	}
	return expect200Run(r)
}

// humanAnswer posts result (JSON text) as who's answer to the run's human call.
func (s *approvalsSteps) humanAnswer(who, call, result string) (*response, error) {
	if !json.Valid([]byte(result)) {
		return nil, harnessErr("the result is not JSON: %s", result)
	}
	return s.answer(who, "human", call, map[string]json.RawMessage{"result": json.RawMessage(result)})
}

func expectNotPending(r *response) error {
	want := map[string]any{"error": "conflict", "detail": "not pending"}
	var got any
	if r.Status != http.StatusConflict || json.Unmarshal(r.Body, &got) != nil || !reflect.DeepEqual(got, want) {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), `409 {"error":"conflict","detail":"not pending"}`)
	}
	return nil
}

// gateNotPending answers the gate as who and expects exactly 409 {"error":"conflict","detail":"not pending"}.
func (s *approvalsSteps) gateNotPending(who, gate, verb string) error {
	r, err := s.answer(who, "approvals", gate, gateBody(verb))
	if err != nil {
		return err
	}
	return expectNotPending(r)
}

// humanNotPending answers the human call as who and expects exactly 409 {"error":"conflict","detail":"not pending"}.
func (s *approvalsSteps) humanNotPending(who, call, result string) error {
	r, err := s.humanAnswer(who, call, result)
	if err != nil {
		return err
	}
	return expectNotPending(r)
}

// approvesEveryGate approves each gate the run waits on, as who, until the run is neither
// running nor waiting.
func (s *approvalsSteps) approvesEveryGate(who string) error {
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r, v, err := s.readWaiting(true)
		if err != nil {
			return err
		}
		if v.Status != "waiting" && v.Status != "running" {
			return nil
		}
		if v.Status == "waiting" {
			for _, p := range v.Pending {
				if p.Kind != "approval" {
					return fail(r.Op, renderPending(v.Pending), "only approval gates pending")
				}
				if err := s.answersGate(who, "approves", p.ID); err != nil {
					return err
				}
			}
		}
		select {
		case <-ctx.Done():
			return fail(r.Op, "status "+v.Status, "the run ended once every gate was approved")
		case <-tick.C:
		}
	}
}

func (s *approvalsSteps) lastStart() (*response, runWaiting, error) {
	var v runWaiting
	r := s.last
	if r == nil || !strings.HasPrefix(r.Op, "POST /runs") || strings.Count(r.Op, "/") > 2 {
		return nil, v, harnessErr("the last answer is not a run's start")
	}
	return r, v, r.JSON(&v)
}

// startWarns expects the last start answer to carry exactly one warning, with the code and a
// message. The warning is given once per process: through one address in front of several
// processes serving at once, the scenario is not applicable (processLimits).
func (s *approvalsSteps) startWarns(code string) error {
	if l, ok := s.drv.(processLimits); ok {
		if err := l.perProcess(); err != nil {
			return err
		}
	}
	r, v, err := s.lastStart()
	if err != nil {
		return err
	}
	if len(v.Warnings) != 1 || v.Warnings[0].Code != code || v.Warnings[0].Message == "" {
		return fail(r.Op, clip(string(r.Body), 300), "exactly one warning, code "+code+", with a message")
	}
	return nil
}

// startNoWarning expects the last start answer to carry no warnings member.
func (s *approvalsSteps) startNoWarning() error {
	r, _, err := s.lastStart()
	if err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &m); err != nil {
		return fail(r.Op, clip(string(r.Body), 200), "a JSON object")
	}
	if w, ok := m["warnings"]; ok {
		return fail(r.Op, "warnings "+string(w), "no warnings member")
	}
	return nil
}

// answerRoutesMissing answers a gate and a human call of the run as who and expects each answer
// to equal, byte for byte, the one a missing run gets.
func (s *approvalsSteps) answerRoutesMissing(who string) error {
	rs := s.areas.runs
	if rs.runID == "" {
		return harnessErr("no run was started")
	}
	routes := []struct {
		suffix string
		body   any
	}{
		{"/approvals/t1-c0", gateBody("approve")},
		{"/approvals/t1-c0", gateBody("deny")},
		{"/human/t1-c0", map[string]any{"result": map[string]any{"answer": "yes"}}},
	}
	for _, rt := range routes {
		if err := rs.answeredAsMissing(who, http.MethodPost, rt.suffix, rt.body); err != nil {
			return err
		}
	}
	return nil
}

// stopsWaitingAndEnds waits until the run is neither running nor waiting and expects the status
// (the whole run is kept, as "the run ends" keeps it).
func (s *approvalsSteps) stopsWaitingAndEnds(status string) error {
	rs := s.areas.runs
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r, v, err := rs.read(rs.runOwner, true)
		if err != nil {
			return err
		}
		if v.Status != "running" && v.Status != "waiting" {
			rs.ended, rs.endedBody = &v, r.Body
			if v.Status != status {
				return fail(r.Op, "status "+v.Status+": "+clip(string(r.Body), 300), "status "+status)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fail(r.Op, "still "+v.Status+": "+clip(string(r.Body), 300), "status "+status)
		case <-tick.C:
		}
	}
}

// answerBodyRefused posts the raw body to the gate or human route as who and expects exactly 400
// {"error":"bad request","detail":member}.
func (s *approvalsSteps) answerBodyRefused(who, route, id, raw, member string) error {
	rs := s.areas.runs
	if rs.runID == "" {
		return harnessErr("no run was started")
	}
	if !json.Valid([]byte(raw)) {
		return harnessErr("the body is not JSON: %s", raw)
	}
	seg := "/approvals/"
	if route == "human call" {
		seg = "/human/"
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, runPath(rs.runID, seg+id), nil, reqOpts{RawBody: []byte(raw), OffSpec: true})
	s.last = r
	if err != nil {
		return err
	}
	want := map[string]any{"error": "bad request", "detail": member}
	var got any
	if r.Status != http.StatusBadRequest || json.Unmarshal(r.Body, &got) != nil || !reflect.DeepEqual(got, want) {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), fmt.Sprintf(`400 {"error":"bad request","detail":%q}`, member))
	}
	return nil
}

// agentApprovalsVocabulary lists the steps of features/agent/approvals.feature.
func agentApprovalsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tool "([\w-]+)" is answered by a person$`, a.approvals.toolIsHuman, "declares the tool kind \"human\" to the system and to the tool server (which answers it 202 pending)"},
		{`^the run waits for a person on:$`, a.approvals.runWaitsOn, "waits until the run's status is waiting and expects its pending calls to be exactly the table (kind, id, name, arguments)"},
		{`^(\w[\w' ]*?) (approves|denies) the gate "([\w-]+)"$`, a.approvals.answersGate, "answers the run's approval gate as who and expects 200 and the run"},
		{`^(\w[\w' ]*?) answers the human call "([\w-]+)" with (\{.*\})$`, a.approvals.answersHuman, "answers the run's human call as who with the JSON result and expects 200 and the run"},
		{`^(\w[\w' ]*?) answering the gate "([\w-]+)" with (approve|deny) is refused as not pending$`, a.approvals.gateNotPending, "answers the gate as who and expects exactly 409 {\"error\":\"conflict\",\"detail\":\"not pending\"}"},
		{`^(\w[\w' ]*?) answering the human call "([\w-]+)" with (\{.*\}) is refused as not pending$`, a.approvals.humanNotPending, "answers the human call as who and expects exactly 409 {\"error\":\"conflict\",\"detail\":\"not pending\"}"},
		{`^(\w[\w' ]*?) approves every gate until the run ends$`, a.approvals.approvesEveryGate, "approves each gate the run waits on, as who, until the run is neither running nor waiting"},
		{`^the start answer warns "([\w_]+)"$`, a.approvals.startWarns, "expects the last start answer to carry exactly one warning, with the code and a message"},
		{`^the start answer carries no warning$`, a.approvals.startNoWarning, "expects the last start answer to carry no warnings member"},
		{`^(\w[\w' ]*?) answering the (gate|human call) "([\w-]+)" with the body (\{.*\}) is refused naming "(\w+)"$`, a.approvals.answerBodyRefused, "posts the raw body to the gate or human route as who and expects exactly 400 {\"error\":\"bad request\",\"detail\":member}"},
		{`^the run stops waiting and ends (completed|failed|aborted|canceled)$`, a.approvals.stopsWaitingAndEnds, "waits until the run is neither running nor waiting and expects the status (the whole run is kept, as by \"the run ends\")"},
		{`^(\w[\w' ]*?) gets the same 404 as for a missing run on every answer route$`, a.approvals.answerRoutesMissing, "answers a gate and a human call of the run as who and expects each answer to equal, byte for byte, the one a missing run gets"},
	}
}
