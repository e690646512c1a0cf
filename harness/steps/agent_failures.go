package steps

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"

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

// logHoldsMessageCut expects the ended run's tool-call log to hold one failed call whose error is
// the tool message the scenario scripted, cut to its first n characters: the text recorded with
// the call is the text the model read (spec/http.md, Runs; spec/prompt.md).
func (s *runsSteps) logHoldsMessageCut(n int) error {
	v, err := s.endedRun()
	if err != nil {
		return err
	}
	msg := []rune(s.saved["tool message"])
	want := string(msg[:min(n, len(msg))])
	op := "GET " + runPath(s.runID, "") + ": the tool-call log"
	if len(v.ToolCalls) != 1 || v.ToolCalls[0].OK {
		return fail(op, fmt.Sprintf("%d calls", len(v.ToolCalls)), "one failed call")
	}
	if got := v.ToolCalls[0].Error; got != want {
		return fail(op+": the call's error", fmt.Sprintf("%d characters", len([]rune(got))),
			fmt.Sprintf("the tool's message cut to its first %d characters", len([]rune(want))))
	}
	return nil
}

// agentFailuresVocabulary lists the steps of features/agent/failures.feature.
func agentFailuresVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tool "([\w-]+)" waits, then fails with status (\d+) and says "((?:[^"\\]|\\.)*)"$`, a.failures.toolWaitsThenFails, "scripts the tool's next call to wait until released, then fail with the status and the words"},
		{`^the tool "([\w-]+)" is declared not idempotent$`, a.failures.declaredNotIdempotent, "declares the tool idempotent: false to the system and to the tool server (every attempt runs and is counted)"},
		{`^the run's tool-call log holds that tool message cut to (\d+) characters$`, a.runs.logHoldsMessageCut, "expects the ended run's tool-call log to hold one failed call whose error is the scripted tool message cut to its first N characters (Unicode code points)"},
		{`^the run has no terminal failure$`, a.failures.noTerminal, "expects the ended run to name no terminal failure"},
		{`^every call to "([\w-]+)" was made for (\w[\w' ]*?)$`, a.failures.callsMadeFor, "expects every call of the tool to have carried exactly who's principal headers, percent-encoded, one per present field"},
		{`^every call to "([\w-]+)" was made for the principal (\{.*\})$`, a.failures.callsMadeForPrincipal, "expects every call of the tool to have carried exactly the principal's headers, percent-encoded, one per present field"},
	}
}
