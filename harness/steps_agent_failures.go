package harness

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strconv"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// failuresSteps script typed tool failures and judge how a run ends on them and whom its
// tool calls were made for.
//
// lastFailure is the failure last scripted for each tool, as the tool server answers it;
// introspected numbers the tokens the identity service was given.
type failuresSteps struct {
	*scenario
	lastFailure  map[string]*world.ToolError
	introspected int
}

// typedFailure reads a typed failure and buries it at depth (empty: 0).
func typedFailure(raw, depth string) (*world.ToolError, error) {
	var te world.ToolError
	if err := json.Unmarshal([]byte(raw), &te); err != nil || te.Class == "" {
		return nil, harnessErr("the typed failure is not a failure with a class: %s", raw)
	}
	d := 0
	if depth != "" {
		d, _ = strconv.Atoi(depth)
	}
	return world.WrapAt(&te, d), nil
}

func (s *failuresSteps) enqueue(name string, b world.Behavior) error {
	if err := s.declareTool(name); err != nil {
		return err
	}
	if s.lastFailure == nil {
		s.lastFailure = map[string]*world.ToolError{}
	}
	s.lastFailure[name] = b.Error
	if err := s.world.Tools().Enqueue(name, b); err != nil {
		return harnessErr("script the tool: %v", err)
	}
	return nil
}

// toolFailsTyped scripts the tool's next call to fail with the typed failure, under that many Error wrappers.
func (s *failuresSteps) toolFailsTyped(name, raw, depth string) error {
	te, err := typedFailure(raw, depth)
	if err != nil {
		return err
	}
	return s.enqueue(name, world.Behavior{Error: te})
}

// toolWaitsThenFailsTyped scripts the tool's next call to wait until released, then fail with the typed failure.
func (s *failuresSteps) toolWaitsThenFailsTyped(name, raw string) error {
	te, err := typedFailure(raw, "")
	if err != nil {
		return err
	}
	h := s.world.NewHold()
	s.areas.agent.toolHolds[name] = append(s.areas.agent.toolHolds[name], h)
	return s.enqueue(name, world.Behavior{Error: te, Hold: h})
}

// toolWaitsThenFails scripts the tool's next call to wait until released, then fail with the status and the words.
func (s *failuresSteps) toolWaitsThenFails(name string, status int, msg string) error {
	h := s.world.NewHold()
	s.areas.agent.toolHolds[name] = append(s.areas.agent.toolHolds[name], h)
	return s.enqueue(name, world.Behavior{Fail: &world.Failure{Status: status, Message: unescape(msg)}, Hold: h})
}

// declaredNotIdempotent declares the tool idempotent: false to the system and to the tool server.
func (s *failuresSteps) declaredNotIdempotent(name string) error {
	def := sutconfig.ToolDef{Name: name, Description: "the " + name + " tool", Parameters: map[string]any{"type": "object"},
		Idempotent: world.Bool(false)}
	if err := s.world.Tools().Declare(def); err != nil {
		return harnessErr("declare the tool: %v", err)
	}
	return s.configure(func(c *sutconfig.SUTConfig) {
		for i, d := range c.Tools.Definitions {
			if d.Name == name {
				c.Tools.Definitions[i].Idempotent = world.Bool(false)
				return
			}
		}
		c.Tools.Definitions = append(c.Tools.Definitions, def)
	})
}

// terminalView is the terminal member of a run (spec/http.md, Runs: tool failures).
type terminalView struct {
	Tool    string `json:"tool"`
	Class   string `json:"class"`
	Failure string `json:"failure"`
	Depth   int    `json:"depth"`
}

// retryableFalse is what a terminal view names as the class when an ordinary class said
// retryable: false.
const retryableFalse = "retryable:false"

// classify is the kit's own reading of the record: the shallowest failure of the chain, at depth
// 0 to world.CauseDepth, whose class or an ancestor is terminal, or that says retryable false.
func classify(e *world.ToolError) (terminalView, bool) {
	terminal := map[string]bool{}
	for _, c := range world.TerminalClasses {
		terminal[c] = true
	}
	for c, d := e, 0; c != nil && d <= world.CauseDepth; c, d = c.Cause, d+1 {
		if terminal[c.Class] {
			return terminalView{Class: c.Class, Failure: c.Class, Depth: d}, true
		}
		for _, a := range c.Extends {
			if terminal[a] {
				return terminalView{Class: a, Failure: c.Class, Depth: d}, true
			}
		}
		if c.Retryable != nil && !*c.Retryable {
			return terminalView{Class: retryableFalse, Failure: c.Class, Depth: d}, true
		}
	}
	return terminalView{}, false
}

// endedTerminal reads the terminal member of the ended run (nil when it has none).
func (s *failuresSteps) endedTerminal() (*terminalView, error) {
	if _, err := s.areas.runs.endedRun(); err != nil {
		return nil, err
	}
	var v struct {
		Terminal *terminalView `json:"terminal"`
	}
	if err := json.Unmarshal(s.areas.runs.endedBody, &v); err != nil {
		return nil, fail("GET "+runPath(s.areas.runs.runID, ""), clip(string(s.areas.runs.endedBody), 200), "a run")
	}
	return v.Terminal, nil
}

// endedByTerminal expects the ended run's terminal failure to be exactly the tool, the failure's
// class, the class that made it terminal and its depth, as the kit classifies the scripted failure.
func (s *failuresSteps) endedByTerminal(tool, failure, class string, depth int) error {
	want := terminalView{Tool: tool, Class: class, Failure: failure, Depth: depth}
	if scripted := s.lastFailure[tool]; scripted != nil {
		kit, ok := classify(scripted)
		kit.Tool = tool
		if !ok || kit != want || !scripted.Terminal() {
			return harnessErr("the scenario expects %+v, but the kit classifies the failure scripted for %s as %+v (terminal %v)", want, tool, kit, ok)
		}
	} else if want != (terminalView{Tool: tool, Class: world.ClassIdempotentToolRefused, Failure: world.ClassIdempotentToolRefused}) {
		// No failure was scripted: the only terminal stop a system raises of its own is the
		// single-frame runner's refusal of a tool declared not idempotent.
		return harnessErr("no failure was scripted for %s, and %+v is not the single-frame refusal", tool, want)
	}
	got, err := s.endedTerminal()
	if err != nil {
		return err
	}
	op := "GET " + runPath(s.areas.runs.runID, "") + ": the terminal failure"
	if got == nil {
		return fail(op, "none: "+clip(string(s.areas.runs.endedBody), 300), fmt.Sprintf("%+v", want))
	}
	if *got != want {
		return fail(op, fmt.Sprintf("%+v", *got), fmt.Sprintf("%+v", want))
	}
	return nil
}

// inDoubtView is the inDoubt member of a run (spec/http.md, Runs: A call in doubt).
type inDoubtView struct {
	Class          string `json:"class"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// noTerminal expects the ended run to name no terminal failure.
func (s *failuresSteps) noTerminal() error {
	got, err := s.endedTerminal()
	if err != nil {
		return err
	}
	if got != nil {
		return fail("GET "+runPath(s.areas.runs.runID, "")+": the terminal failure", fmt.Sprintf("%+v", *got), "none")
	}
	return nil
}

// kitClassifies expects the kit's own reading of the record to classify the tool's last scripted failure so.
func (s *failuresSteps) kitClassifies(tool, verdict string) error {
	e := s.lastFailure[tool]
	if e == nil {
		return harnessErr("no typed failure was scripted for %s", tool)
	}
	_, ok := classify(e)
	if ok != e.Terminal() || ok != (verdict == "terminal") {
		return harnessErr("the scenario says %s is %s, the kit reads it as terminal=%v", tool, verdict, ok)
	}
	return nil
}

// callsMadeFor expects every call of the tool to have carried exactly who's principal headers.
func (s *failuresSteps) callsMadeFor(tool, who string) error {
	p, ok := principals[who]
	if !ok {
		return harnessErr("unknown principal %q", who)
	}
	return s.madeFor(tool, p)
}

// callsMadeForPrincipal expects every call of the tool to have carried exactly the principal's headers.
func (s *failuresSteps) callsMadeForPrincipal(tool, raw string) error {
	var p sutconfig.Principal
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return harnessErr("the principal is not JSON: %s", raw)
	}
	return s.madeFor(tool, p)
}

// madeFor compares, call by call, the principal the tool server decoded and the raw headers: one
// header per present field, none for an absent one, each value printable ASCII that
// percent-decodes (RFC 3986) to the field's UTF-8 text.
func (s *failuresSteps) madeFor(tool string, p sutconfig.Principal) error {
	calls := s.world.Tools().CallsOf(tool)
	if len(calls) == 0 {
		return fail("the tool "+tool, "no calls", "calls made for "+describePrincipal(p))
	}
	want := map[string]string{}
	for name, v := range map[string]string{world.HeaderTenant: p.Tenant, world.HeaderActor: p.Actor, world.HeaderOnBehalfOf: p.OnBehalfOf} {
		if v != "" {
			want[name] = v
		}
	}
	for i, c := range calls {
		op := fmt.Sprintf("call %d to %s: its principal headers", i+1, tool)
		got := map[string]string{}
		for name, raw := range c.RawPrincipal {
			if !printableASCII(raw) {
				return fail(op, fmt.Sprintf("%s: %q", name, raw), "a percent-encoded value (printable ASCII)")
			}
			v, err := url.PathUnescape(raw)
			if err != nil {
				return fail(op, fmt.Sprintf("%s: %q", name, raw), "a percent-encoded value")
			}
			got[name] = v
		}
		if !reflect.DeepEqual(got, want) {
			return fail(op, fmt.Sprint(got), fmt.Sprint(want))
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return s != ""
}

func describePrincipal(p sutconfig.Principal) string {
	b, _ := json.Marshal(p)
	return string(b)
}

// carriedFrameKey expects the Nth call of the tool to have carried the idempotency key the kit
// computes for the run, the model call, the position and the arguments.
func (s *failuresSteps) carriedFrameKey(n int, tool string, turn, position int, args string) error {
	if s.areas.runs.runID == "" {
		return harnessErr("no run was started")
	}
	want, err := frameKey(s.areas.runs.runID, turn, position, tool, args)
	if err != nil {
		return harnessErr("the arguments %s: %v", args, err)
	}
	calls := s.world.Tools().CallsOf(tool)
	if n < 1 || n > len(calls) {
		return fail("the tool "+tool, fmt.Sprintf("%d calls", len(calls)), fmt.Sprintf("a call %d", n))
	}
	if got := calls[n-1].IdempotencyKey; got != want {
		return fail(fmt.Sprintf("call %d to %s: its Idempotency-Key", n, tool), fmt.Sprintf("%q", got), fmt.Sprintf("%q", want))
	}
	return nil
}

// agentFailuresVocabulary lists the steps of features/agent/failures.feature.
func agentFailuresVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tool "([\w-]+)" fails with the typed failure (\{.*\})(?: buried at depth (\d+))?$`, a.failures.toolFailsTyped, "scripts the tool's next call to fail with the typed failure (spec/world.md, Tools), under that many Error wrappers"},
		{`^the tool "([\w-]+)" waits, then fails with the typed failure (\{.*\})$`, a.failures.toolWaitsThenFailsTyped, "scripts the tool's next call to wait until released, then fail with the typed failure"},
		{`^the tool "([\w-]+)" waits, then fails with status (\d+) and says "((?:[^"\\]|\\.)*)"$`, a.failures.toolWaitsThenFails, "scripts the tool's next call to wait until released, then fail with the status and the words"},
		{`^the tool "([\w-]+)" is declared not idempotent$`, a.failures.declaredNotIdempotent, "declares the tool idempotent: false to the system and to the tool server (every attempt runs and is counted)"},
		{`^the run was ended by "([\w-]+)" raising "(\w+)" as "([\w:]+)" at depth (\d+)$`, a.failures.endedByTerminal, "expects the ended run's terminal failure to be exactly the tool, the failure's class, the class that made it terminal and its depth, as the kit classifies the scripted failure"},
		{`^the run has no terminal failure$`, a.failures.noTerminal, "expects the ended run to name no terminal failure"},
		{`^the kit classifies the failure scripted for "([\w-]+)" as (terminal|feedback)$`, a.failures.kitClassifies, "expects the kit's own reading of the record (spec/world.md) to classify the tool's last scripted failure so"},
		{`^every call to "([\w-]+)" was made for (\w[\w' ]*?)$`, a.failures.callsMadeFor, "expects every call of the tool to have carried exactly who's principal headers, percent-encoded, one per present field"},
		{`^every call to "([\w-]+)" was made for the principal (\{.*\})$`, a.failures.callsMadeForPrincipal, "expects every call of the tool to have carried exactly the principal's headers, percent-encoded, one per present field"},
		{`^call (\d+) to "([\w-]+)" carried the single-frame key of model call (\d+), position (\d+), for (\{.*\})$`, a.failures.carriedFrameKey, "expects the Nth call of the tool to have carried the idempotency key the kit computes for the run, the model call, the position and the arguments (spec/http.md, the single-frame runner)"},
	}
}
