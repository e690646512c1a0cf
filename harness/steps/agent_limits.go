package steps

import (
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// cachesResponses configures the system to keep the model's responses to runs (model.responseCache).
func (s *limitsSteps) cachesResponses() error {
	return s.configure(func(c *sutconfig.SUTConfig) { c.Model.ResponseCache = true })
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

// firstCall is when the first call of the tool arrived.
func (s *limitsSteps) firstCall(name string) (time.Time, error) {
	calls := s.world.Tools().CallsOf(name)
	if len(calls) == 0 {
		return time.Time{}, harnessErr("the tool %q was never called", name)
	}
	return calls[0].Arrived, nil
}

// toolWaited waits until N ms have passed since the first call of the tool arrived.
func (s *limitsSteps) toolWaited(name string, ms int) error {
	if err := s.areas.agent.toolCalled(name, 1); err != nil {
		return err
	}
	t0, err := s.firstCall(name)
	if err != nil {
		return err
	}
	until := t0.Add(time.Duration(ms) * time.Millisecond)
	s.areas.agent.waitedUntil[name] = until
	select {
	case <-time.After(time.Until(until)):
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

var toolNameRE = regexp.MustCompile(`"([\w-]+)"`)

// endsWithin waits until the run has ended and expects the status, and the end seen less than N
// ms after the first request to the model (or the first call of the tool) arrived. A step that
// begins after that bound cannot tell an end in time from a late one: that is a harness error.
func (s *limitsSteps) endsWithin(status string, ms int, from string) error {
	first := func() (time.Time, bool) {
		if m := toolNameRE.FindStringSubmatch(from); m != nil {
			t, err := s.firstCall(m[1])
			return t, err == nil
		}
		if reqs := s.world.Model().Requests(); len(reqs) > 0 {
			return reqs[0].Arrived, true
		}
		return time.Time{}, false
	}
	ctx, cancel := s.wait()
	defer cancel()
	t0, ok := first()
	for !ok {
		select {
		case <-ctx.Done():
			return fail("the world", "nothing arrived", from)
		case <-time.After(2 * time.Millisecond):
		}
		t0, ok = first()
	}
	bound := t0.Add(time.Duration(ms) * time.Millisecond)
	if time.Now().After(bound) {
		return harnessErr("the step began %s after %s, too late to judge an end within %d ms (a slow restart?)", time.Since(t0).Round(time.Millisecond), from, ms)
	}
	if err := s.areas.runs.runEnds(status); err != nil {
		return err
	}
	if seen := time.Now(); seen.After(bound) {
		return fail("GET "+runPath(s.areas.runs.runID, ""), fmt.Sprintf("ended %s after %s", seen.Sub(t0).Round(time.Millisecond), from),
			fmt.Sprintf("ended within %d ms of it", ms))
	}
	return nil
}

// modelRequestAborted waits until request N to the model has ended and expects the system to
// have gone away before its answer ended.
func (s *limitsSteps) modelRequestAborted(i int) error {
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		reqs := s.world.Model().Requests()
		if i <= len(reqs) && reqs[i-1].Aborted {
			return nil
		}
		select {
		case <-ctx.Done():
			got := fmt.Sprintf("%d requests", len(reqs))
			if i <= len(reqs) {
				got = fmt.Sprintf("request %d finished %v, aborted %v", i, reqs[i-1].Finished, reqs[i-1].Aborted)
			}
			return fail("the model", got, fmt.Sprintf("request %d aborted by the system", i))
		case <-tick.C:
		}
	}
}

// modelWaited waits until N ms have passed since the first request to the model arrived.
func (s *limitsSteps) modelWaited(ms int) error {
	if err := s.areas.model.modelAsked(1); err != nil {
		return err
	}
	t0 := s.world.Model().Requests()[0].Arrived
	select {
	case <-time.After(time.Until(t0.Add(time.Duration(ms) * time.Millisecond))):
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// agentLimitsVocabulary lists the steps of features/agent/limits.feature.
func agentLimitsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the system caches model responses$`, a.limits.cachesResponses, "configures the system to keep the model's responses to runs (model.responseCache)"},
		{`^the question of request (\d+) to the model was asked (\d+) times? in all$`, a.limits.shapeAsked, "expects exactly N requests to the model to have the shape of request i (the same model, messages and tools)"},
		{`^the model replies "((?:[^"\\]|\\.)*)" filled to (\d+) characters$`, a.limits.repliesFilled, "scripts the model's next answer as the text grown with the world's filler to exactly N characters"},
		{`^the model calls "([\w-]+)" with (\{.*\}) filled to (\d+) characters$`, a.limits.callsFilled, "scripts the model's next answer as one call of the tool whose arguments the world grows to exactly N characters"},
		{`^the tool "([\w-]+)" has been waiting (\d+) ms$`, a.limits.toolWaited, "waits until N ms have passed since the first call of the tool arrived"},
		{`^the first request to the model has been waiting (\d+) ms$`, a.limits.modelWaited, "waits until N ms have passed since the first request to the model arrived"},
		{`^the run ends (completed|failed) within (\d+) ms of the (first request to the model|first call of the tool "[\w-]+")$`, a.limits.endsWithin, "waits until the run has ended and expects the status, and the end seen less than N ms after that first request arrived"},
		{`^request (\d+) to the model was aborted by the system$`, a.limits.modelRequestAborted, "waits until request N to the model has ended and expects the system to have gone away before its answer ended"},
		{`^the run's output is "((?:[^"\\]|\\.)*)" filled to (\d+) characters, (whole|cut)$`, a.limits.outputFilled, "expects the ended run's output to be exactly the text grown with the world's filler to N characters, followed by the cut marker \" [cut]\" when cut"},
	}
}
