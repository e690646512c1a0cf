package harness

import (
	"fmt"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

// steps is the limits vocabulary (the response cache, the cap on a recorded response, the turn
// and tool timeouts of runs): each pattern, the method that runs it, what it means.
func (s *limitsSteps) steps() []stepDef {
	return []stepDef{
		{`^the system caches model responses$`, s.cachesResponses, "configures the system to keep the model's responses to runs (model.responseCache)"},
		{`^the question of request (\d+) to the model was asked (\d+) times? in all$`, s.shapeAsked, "expects exactly N requests to the model to have the shape of request i (the same model, messages and tools)"},
		{`^the model replies "((?:[^"\\]|\\.)*)" filled to (\d+) characters$`, s.repliesFilled, "scripts the model's next answer as the text grown with the world's filler to exactly N characters"},
		{`^the model calls "([\w-]+)" with (\{.*\}) filled to (\d+) characters$`, s.callsFilled, "scripts the model's next answer as one call of the tool whose arguments the world grows to exactly N characters"},
		{`^the run's output is "((?:[^"\\]|\\.)*)" filled to (\d+) characters, (whole|cut)$`, s.outputFilled, "expects the ended run's output to be exactly the text grown with the world's filler to N characters, followed by the cut marker \" [cut]\" when cut"},
	}
}

// cachesResponses configures the system to keep the model's responses to runs (model.responseCache).
func (s *limitsSteps) cachesResponses() error {
	return s.configure(func(c *spec.SUTConfig) { c.Model.ResponseCache = true })
}

// shapeAsked expects exactly N requests to the model to have the shape of request i.
func (s *limitsSteps) shapeAsked(i, n int) error {
	reqs := s.world.Model().Requests()
	if i < 1 || i > len(reqs) {
		return fail("the model", fmt.Sprintf("%d requests", len(reqs)), fmt.Sprintf("a request %d", i))
	}
	if got := s.world.Model().CountShape(reqs[i-1].Shape); got != n {
		return fail("the model", fmt.Sprintf("the question of request %d asked %d times", i, got), fmt.Sprintf("%d times", n))
	}
	return nil
}

// repliesFilled scripts the model's next answer as the text grown with the world's filler to
// exactly N characters.
func (s *limitsSteps) repliesFilled(text string, n int) error {
	return s.areas.model.enqueue(world.Reply{Text: unescape(text), Fill: n})
}

// callsFilled scripts the model's next answer as one call of the tool whose arguments the world
// grows to exactly N characters.
func (s *limitsSteps) callsFilled(name, args string, n int) error {
	m := s.areas.model
	return m.enqueue(world.Reply{ToolCalls: []world.ToolCall{{ID: m.callID(), Name: name, Arguments: args, Fill: n}}})
}

// cutMarker ends a recorded response text that was cut at the cap (spec/http.md, Runs).
const cutMarker = " [cut]"

// outputFilled expects the ended run's output to be exactly the text grown with the world's
// filler to N characters, followed by the cut marker when cut (the whole output is compared; a
// difference is shown by its length and where it starts).
func (s *limitsSteps) outputFilled(text string, n int, how string) error {
	v, err := s.areas.runs.endedRun()
	if err != nil {
		return err
	}
	want := world.FillText(unescape(text), n)
	if how == "cut" {
		want += cutMarker
	}
	op := "GET " + runPath(s.areas.runs.runID, "")
	if v.Output == nil {
		return fail(op, "no output", fmt.Sprintf("an output of %d characters", utf8.RuneCountInString(want)))
	}
	got := *v.Output
	if got == want {
		return nil
	}
	at := 0
	for at < len(got) && at < len(want) && got[at] == want[at] {
		at++
	}
	tail := func(x string) string { return clip(x[min(at, len(x)):], 40) }
	return fail(op, fmt.Sprintf("%d characters, differing at byte %d: %q", utf8.RuneCountInString(got), at, tail(got)),
		fmt.Sprintf("%d characters: %q there", utf8.RuneCountInString(want), tail(want)))
}
