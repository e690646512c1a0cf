package steps

import "github.com/loomcheck/loomcheck/harness/world"

// toolFails scripts the tool's next call to fail with the status and the words.
func (s *agentSteps) toolFails(name string, status int, msg string) error {
	if err := s.declareTool(name); err != nil {
		return err
	}
	if err := s.world.Tools().Enqueue(name, world.Behavior{Fail: &world.Failure{Status: status, Message: unescape(msg)}}); err != nil {
		return harnessErr("script the tool: %v", err)
	}
	return nil
}

// agentTurnFailuresVocabulary lists the steps of features/agent/turn_failures.feature.
func agentTurnFailuresVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tool "([\w-]+)" fails with status (\d+) and says "((?:[^"\\]|\\.)*)"$`, a.agent.toolFails, "scripts the tool's next call to fail with the status and the words"},
	}
}
