package steps

import (
	"encoding/json"
	"strconv"

	"github.com/loomcheck/loomcheck/harness/world"
)

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

// agentTerminalFailuresVocabulary lists the steps of features/agent/terminal_failures.feature.
func agentTerminalFailuresVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tool "([\w-]+)" fails with the typed failure (\{.*\})(?: buried at depth (\d+))?$`, a.failures.toolFailsTyped, "scripts the tool's next call to fail with the typed failure (spec/world.md, Tools), under that many Error wrappers"},
		{`^the tool "([\w-]+)" waits, then fails with the typed failure (\{.*\})$`, a.failures.toolWaitsThenFailsTyped, "scripts the tool's next call to wait until released, then fail with the typed failure"},
		{`^the kit classifies the failure scripted for "([\w-]+)" as (terminal|feedback)$`, a.failures.kitClassifies, "expects the kit's own reading of the record (spec/world.md) to classify the tool's last scripted failure so"},
	}
}
