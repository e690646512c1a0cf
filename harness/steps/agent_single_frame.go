package steps

import "fmt"

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

// agentSingleFrameVocabulary lists the steps of features/agent/single_frame.feature.
func agentSingleFrameVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^call (\d+) to "([\w-]+)" carried the single-frame key of model call (\d+), position (\d+), for (\{.*\})$`, a.failures.carriedFrameKey, "expects the Nth call of the tool to have carried the idempotency key the kit computes for the run, the model call, the position and the arguments (spec/http.md, the single-frame runner)"},
	}
}
