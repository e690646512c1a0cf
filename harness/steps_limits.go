package harness

import (
	"fmt"

	"github.com/loomcheck/loomcheck/spec"
)

// steps is the limits vocabulary (the response cache, the cap on a recorded response, the turn
// and tool timeouts of runs): each pattern, the method that runs it, what it means.
func (s *limitsSteps) steps() []stepDef {
	return []stepDef{
		{`^the system caches model responses$`, s.cachesResponses, "configures the system to keep the model's responses to runs (model.responseCache)"},
		{`^the question of request (\d+) to the model was asked (\d+) times? in all$`, s.shapeAsked, "expects exactly N requests to the model to have the shape of request i (the same model, messages and tools)"},
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
