package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// runView is a run as its owner reads it (spec/http.md, Runs).
type runView struct {
	ID          string          `json:"id"`
	Status      string          `json:"status"`
	Output      *string         `json:"output"`
	ToolCalls   []runCall       `json:"toolCalls"`
	Interrupted *runInterrupted `json:"interrupted"`
	Reason      string          `json:"reason"`
}

type runCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	OK        bool            `json:"ok"`
	Output    json.RawMessage `json:"output"`
	Error     string          `json:"error"`
}

type runInterrupted struct {
	Content        string    `json:"content"`
	Iterations     int       `json:"iterations"`
	CompletedCalls []runCall `json:"completedCalls"`
}

// startsRun starts a run as who with the doc string's options and expects 201 and a running or ended run.
func (s *runsSteps) startsRun(who string, doc *godog.DocString) error {
	if err := s.sut(); err != nil {
		return err
	}
	var opts map[string]any
	if err := json.Unmarshal([]byte(doc.Content), &opts); err != nil {
		return harnessErr("the run's options are not a JSON object: %v", err)
	}
	if id, ok := opts["id"].(string); ok {
		opts["id"] = s.own(id)
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runs", opts, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.Status != http.StatusCreated {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "201: a run started")
	}
	var v runView
	if err := r.JSON(&v); err != nil {
		return err
	}
	s.runID, s.runOwner, s.options, s.ended = v.ID, who, opts, nil
	return nil
}

// startsSameRunAgain sends the last run's start again as who and expects 200 and the same run id.
func (s *runsSteps) startsSameRunAgain(who string) error {
	if s.runID == "" {
		return harnessErr("no run was started")
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runs", s.options, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200: the run that exists")
	}
	var v runView
	if err := r.JSON(&v); err != nil {
		return err
	}
	if v.ID != s.runID {
		return fail(r.Op, "run "+v.ID, "the run started before, "+s.runID)
	}
	return nil
}

// runRefused starts a run as who with the options and expects exactly 400 {"error":"bad request","detail":field}.
func (s *runsSteps) runRefused(who, raw, field string) error {
	if err := s.sut(); err != nil {
		return err
	}
	if !json.Valid([]byte(raw)) {
		return harnessErr("the options are not JSON: %s", raw)
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runs", nil, reqOpts{RawBody: []byte(raw), OffSpec: true})
	s.last = r
	if err != nil {
		return err
	}
	want, _ := json.Marshal(map[string]string{"error": "bad request", "detail": field})
	var got, exp any
	_ = json.Unmarshal(want, &exp)
	if r.Status != http.StatusBadRequest || json.Unmarshal(r.Body, &got) != nil || !reflect.DeepEqual(got, exp) {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "400 "+string(want))
	}
	return nil
}

// runEnds waits until the run is no longer running and expects the status (the whole run is kept).
func (s *runsSteps) runEnds(status string) error {
	if s.runID == "" {
		return harnessErr("no run was started")
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r, v, err := s.read(s.runOwner, true)
		if err != nil {
			return err
		}
		if v.Status != "running" || status == "running" {
			s.ended, s.endedBody = &v, r.Body
			if v.Status != status {
				return fail(r.Op, "status "+v.Status+": "+clip(string(r.Body), 300), "status "+status)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fail(r.Op, "still running: "+clip(string(r.Body), 300), "status "+status)
		case <-tick.C:
		}
	}
}

// runOutput expects the ended run's output to be exactly the text.
func (s *runsSteps) runOutput(text string) error {
	v, err := s.endedRun()
	if err != nil {
		return err
	}
	want := unescape(text)
	if v.Output == nil || *v.Output != want {
		got := "no output"
		if v.Output != nil {
			got = fmt.Sprintf("%q", *v.Output)
		}
		return fail("GET "+runPath(s.runID, ""), got, fmt.Sprintf("output %q", want))
	}
	return nil
}

// runReason expects the ended run's reason to be exactly the word.
func (s *runsSteps) runReason(reason string) error {
	v, err := s.endedRun()
	if err != nil {
		return err
	}
	if v.Reason != reason {
		return fail("GET "+runPath(s.runID, ""), fmt.Sprintf("reason %q", v.Reason), fmt.Sprintf("reason %q", reason))
	}
	return nil
}

// runLogEmpty expects the ended run's tool-call log to hold nothing.
func (s *runsSteps) runLogEmpty() error {
	v, err := s.endedRun()
	if err != nil {
		return err
	}
	if len(v.ToolCalls) != 0 {
		return fail("GET "+runPath(s.runID, "")+": the tool-call log", renderCalls(v.ToolCalls), "no calls")
	}
	return nil
}

// runInterrupted expects the ended run's interrupted payload: the content, the model calls and exactly the table's completed calls.
func (s *runsSteps) runInterrupted(content string, n int, t *godog.Table) error {
	v, err := s.interrupted(content, n)
	if err != nil {
		return err
	}
	return s.sameCalls("the completed calls", v.Interrupted.CompletedCalls, t)
}

// runInterruptedNothing expects the ended run's interrupted payload: the content, the model calls and no completed call.
func (s *runsSteps) runInterruptedNothing(content string, n int) error {
	v, err := s.interrupted(content, n)
	if err != nil {
		return err
	}
	if len(v.Interrupted.CompletedCalls) != 0 {
		return fail("GET "+runPath(s.runID, "")+": the completed calls", renderCalls(v.Interrupted.CompletedCalls), "no calls")
	}
	return nil
}

// runNotInterrupted expects the ended run to carry no interrupted payload.
func (s *runsSteps) runNotInterrupted() error {
	v, err := s.endedRun()
	if err != nil {
		return err
	}
	if v.Interrupted != nil {
		return fail("GET "+runPath(s.runID, ""), fmt.Sprintf("interrupted %+v", *v.Interrupted), "no interrupted payload")
	}
	return nil
}

// steersRun aborts or cancels the run as who and expects 202.
func (s *runsSteps) steersRun(who, verb string) error {
	route := "/abort"
	if verb == "cancels" {
		route = "/cancel"
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, runPath(s.runID, route), nil, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202")
	}
	return nil
}

// runRoutes are the run routes, each asked of a run id.
var runRoutes = []struct{ method, suffix string }{
	{http.MethodGet, ""}, {http.MethodPost, "/abort"}, {http.MethodPost, "/cancel"},
}

// runMissingEverywhere asks every run route of the run as who and expects each answer to equal, byte for byte, the one a missing run gets.
func (s *runsSteps) runMissingEverywhere(who string) error {
	if s.runID == "" {
		return harnessErr("no run was started")
	}
	for _, rt := range runRoutes {
		if err := s.answeredAsMissing(who, rt.method, rt.suffix, nil); err != nil {
			return err
		}
	}
	// The run goes on untouched: it was neither aborted nor cancelled by those answers.
	return nil
}

// readsRunAsOwner reads the run as who and expects the same status and body as the owner gets.
func (s *runsSteps) readsRunAsOwner(who, owner string) error {
	want, err := s.cl.Do(s.ctx, owner, http.MethodGet, runPath(s.runID, ""), nil, reqOpts{})
	if err != nil {
		return err
	}
	got, err := s.cl.Do(s.ctx, who, http.MethodGet, runPath(s.runID, ""), nil, reqOpts{})
	if err != nil {
		return err
	}
	if want.Status != http.StatusOK {
		return fail(want.Op+" as "+owner, fmt.Sprint(want.Status), "200")
	}
	if got.Status != want.Status || !bytes.Equal(got.Body, want.Body) {
		return fail(got.Op+" as "+who, fmt.Sprintf("%d %s", got.Status, clip(string(got.Body), 200)),
			fmt.Sprintf("what %s gets: %d %s", owner, want.Status, clip(string(want.Body), 200)))
	}
	return nil
}

// runReadsAsEnded reads the run again and expects exactly the run kept when it ended.
func (s *runsSteps) runReadsAsEnded() error {
	if s.ended == nil {
		return harnessErr("the run was not read when it ended")
	}
	r, _, err := s.read(s.runOwner, false)
	if err != nil {
		return err
	}
	if canonicalJSON(r.Body) != canonicalJSON(s.endedBody) {
		return fail(r.Op, clip(string(r.Body), 300), clip(string(s.endedBody), 300))
	}
	return nil
}

// toolsInFlight waits until a call of each listed tool has arrived and none of them has ended.
func (s *runsSteps) toolsInFlight(list string) error {
	names := quotedNames(list)
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var state []string
		all := true
		for _, n := range names {
			calls := s.world.Tools().CallsOf(n)
			open := 0
			for _, c := range calls {
				if c.Status == 0 && !c.Aborted {
					open++
				}
			}
			state = append(state, fmt.Sprintf("%s: %d calls, %d in flight", n, len(calls), open))
			all = all && open > 0
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fail("the tools", strings.Join(state, "; "), "a call of each in flight at once")
		case <-tick.C:
		}
	}
}

// callsOpen is which of the named tools have a call in flight (neither answered nor aborted),
// and how many calls of them arrived in all.
func (s *runsSteps) callsOpen(names []string) (map[string]bool, int) {
	open, arrived := map[string]bool{}, 0
	for _, name := range names {
		for _, c := range s.world.Tools().CallsOf(name) {
			arrived++
			if c.Status == 0 && !c.Aborted {
				open[name] = true
			}
		}
	}
	return open, arrived
}

// boundedInFlight waits until N calls of the listed tools are in flight, expects no more to be,
// releases every listed tool, waits until each has been called, and expects every call that was
// not in flight before the release to have arrived after it.
func (s *runsSteps) boundedInFlight(n int, list string) error {
	names := quotedNames(list)
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	inFlight := func() (map[string]bool, int) { return s.callsOpen(names) }
	var first map[string]bool
	for {
		open, arrived := inFlight()
		if arrived > n {
			return fail("the tools", fmt.Sprintf("%d calls arrived while none could end", arrived), fmt.Sprintf("at most %d in flight", n))
		}
		if len(open) == n {
			first = open
			break
		}
		select {
		case <-ctx.Done():
			return fail("the tools", fmt.Sprintf("%d in flight", len(open)), fmt.Sprintf("%d in flight", n))
		case <-tick.C:
		}
	}
	// A system that ignores the bound starts its other calls at once; give them time to arrive
	// (on a loaded machine a request can take a while) before anything is released.
	settle := time.NewTimer(300 * time.Millisecond)
	defer settle.Stop()
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return harnessErr("the step timed out while it waited for calls beyond the bound")
		case <-settle.C:
			waiting = false
		case <-tick.C:
		}
		if _, arrived := inFlight(); arrived > n {
			return fail("the tools", fmt.Sprintf("%d calls arrived while none could end", arrived), fmt.Sprintf("at most %d in flight", n))
		}
	}
	released := time.Now()
	for _, name := range names {
		if err := s.areas.agent.toolReleased(name); err != nil {
			return err
		}
	}
	for {
		all := true
		for _, name := range names {
			all = all && len(s.world.Tools().CallsOf(name)) > 0
		}
		if all {
			break
		}
		select {
		case <-ctx.Done():
			return fail("the tools", "some never called", "each called once the bound let it")
		case <-tick.C:
		}
	}
	for _, name := range names {
		if first[name] {
			continue
		}
		for _, c := range s.world.Tools().CallsOf(name) {
			if c.Arrived.Before(released) {
				return fail("the tool "+name, fmt.Sprintf("called %s before the calls in flight were released", released.Sub(c.Arrived)),
					fmt.Sprintf("no call while %d were in flight", n))
			}
		}
	}
	return nil
}

// toolAborted waits until a call of the tool has ended and expects the system to have aborted its request.
func (s *runsSteps) toolAborted(name string) error {
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		calls := s.world.Tools().CallsOf(name)
		for _, c := range calls {
			if c.Aborted {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fail("the tool "+name, fmt.Sprintf("%d calls, none aborted by the system", len(calls)), "its request aborted")
		case <-tick.C:
		}
	}
}

// namesInDoubt expects the ended run's inDoubt to be exactly EffectInDoubtError, the tool and the
// Idempotency-Key the tool server saw on call n of the tool.
func (s *failuresSteps) namesInDoubt(tool string, n int) error {
	calls := s.world.Tools().CallsOf(tool)
	if n < 1 || n > len(calls) {
		return fail("the tool "+tool, fmt.Sprintf("%d calls", len(calls)), fmt.Sprintf("a call %d", n))
	}
	want := inDoubtView{Class: world.ClassEffectInDoubt, Tool: tool, IdempotencyKey: calls[n-1].IdempotencyKey}
	if _, err := s.areas.runs.endedRun(); err != nil {
		return err
	}
	var v struct {
		InDoubt *inDoubtView `json:"inDoubt"`
	}
	op := "GET " + runPath(s.areas.runs.runID, "") + ": the call in doubt"
	if err := json.Unmarshal(s.areas.runs.endedBody, &v); err != nil || v.InDoubt == nil {
		return fail(op, clip(string(s.areas.runs.endedBody), 300), fmt.Sprintf("%+v", want))
	}
	if *v.InDoubt != want {
		return fail(op, fmt.Sprintf("%+v", *v.InDoubt), fmt.Sprintf("%+v", want))
	}
	return nil
}

// agentRunsVocabulary lists the steps of features/agent/runs.feature.
func agentRunsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the run names the call in doubt: "([\w-]+)" with the idempotency key of its call (\d+)$`, a.failures.namesInDoubt, "expects the ended run's inDoubt to be exactly EffectInDoubtError, the tool and the Idempotency-Key the tool server saw on that call of it (spec/http.md, Runs: A call in doubt)"},
		{`^(\w[\w' ]*?) starts a run with:$`, a.runs.startsRun, "starts a run as who with the doc string's options and expects 201 and a running or ended run"},
		{`^(\w[\w' ]*?) starts the same run again$`, a.runs.startsSameRunAgain, "sends the last run's start again as who and expects 200 and the same run id"},
		{`^(\w[\w' ]*?) starting a run with (\{.*\}) is refused naming "([\w.]+)"$`, a.runs.runRefused, "starts a run as who with the options and expects exactly 400 {\"error\":\"bad request\",\"detail\":field}"},
		{`^the run ends (running|completed|failed|aborted|canceled)$`, a.runs.runEnds, "waits until the run is no longer running and expects the status (the whole run is kept)"},
		{`^the run's output is "((?:[^"\\]|\\.)*)"$`, a.runs.runOutput, "expects the ended run's output to be exactly the text"},
		{`^the run's reason is "([\w-]+)"$`, a.runs.runReason, "expects the ended run's reason to be exactly the word"},
		{`^the model says "((?:[^"\\]|\\.)*)" and calls at once:$`, a.model.modelSaysAndCallsAtOnce, "scripts the model's next answer as the text followed by the table's tool calls, all at once"},
		{`^the run's tool-call log is empty$`, a.runs.runLogEmpty, "expects the ended run's tool-call log to hold nothing"},
		{`^the run was interrupted with "((?:[^"\\]|\\.)*)" after (\d+) model calls?, having completed:$`, a.runs.runInterrupted, "expects the ended run's interrupted payload: the content, the model calls and exactly the table's completed calls"},
		{`^the run was interrupted with "((?:[^"\\]|\\.)*)" after (\d+) model calls?, having completed nothing$`, a.runs.runInterruptedNothing, "expects the ended run's interrupted payload: the content, the model calls and no completed call"},
		{`^the run has no interrupted payload$`, a.runs.runNotInterrupted, "expects the ended run to carry no interrupted payload"},
		{`^(\w[\w' ]*?) (aborts|cancels) the run$`, a.runs.steersRun, "aborts or cancels the run as who and expects 202"},
		{`^(\w[\w' ]*?) gets the same 404 as for a missing run on every run route$`, a.runs.runMissingEverywhere, "asks every run route of the run as who and expects each answer to equal, byte for byte, the one a missing run gets"},
		{`^(\w[\w' ]*?) reads the run exactly as (\w+) does$`, a.runs.readsRunAsOwner, "reads the run as who and expects the same status and body as the owner gets"},
		{`^the run reads exactly as when it ended$`, a.runs.runReadsAsEnded, "reads the run again and expects exactly the run kept when it ended"},
		{`^the tools ((?:"[\w-]+"(?:, | and )?)+) are in flight at once$`, a.runs.toolsInFlight, "waits until a call of each listed tool has arrived and none of them has ended"},
		{`^(\d+) of the tools ((?:"[\w-]+"(?:, | and )?)+) are in flight at once, and no more until they are released$`, a.runs.boundedInFlight, "waits until N calls of the tools are in flight, expects no more, releases them all and expects every other call to arrive only after that"},
		{`^the tool "([\w-]+)" was called and its request was aborted$`, a.runs.toolAborted, "waits until a call of the tool has ended and expects the system to have aborted its request"},
	}
}

// modelSaysAndCallsAtOnce scripts the model's next answer as the text followed by the table's
// tool calls, all at once.
func (s *modelSteps) modelSaysAndCallsAtOnce(text string, t *godog.Table) error {
	var calls []world.ToolCall
	for _, row := range t.Rows[1:] {
		args := "{}"
		if len(row.Cells) > 1 {
			args = row.Cells[1].Value
		}
		calls = append(calls, world.ToolCall{ID: s.callID(), Name: row.Cells[0].Value, Arguments: args})
	}
	return s.enqueue(world.Reply{Text: unescape(text), ToolCalls: calls})
}
