package steps

import "github.com/cucumber/godog"

// runLog expects the ended run's tool-call log to be exactly the table (name, arguments, ok, result).
func (s *runsSteps) runLog(t *godog.Table) error {
	v, err := s.endedRun()
	if err != nil {
		return err
	}
	return s.sameCalls("the tool-call log", v.ToolCalls, t)
}

// agentExampleVocabulary lists the steps of features/agent/example.feature.
func agentExampleVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the run's tool-call log is:$`, a.runs.runLog, "expects the ended run's tool-call log to be exactly the table (name, arguments, ok, result)"},
	}
}
