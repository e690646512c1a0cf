package steps

import "fmt"

// stillTurns waits, then expects exactly N turns.
func (s *threadsSteps) stillTurns(secs int, alias string, n int) error {
	if err := s.sleep(secs); err != nil {
		return err
	}
	ac, err := s.agentConversation(alias)
	if err != nil {
		return err
	}
	if len(ac.Turns) != n {
		return fail(fmt.Sprintf("the turns of thread %s", alias), fmt.Sprintf("%+v", ac.Turns), fmt.Sprintf("exactly %d", n))
	}
	return nil
}

// threadsLifetimeVocabulary lists the steps of features/threads/lifetime.feature.
func threadsLifetimeVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^after (\d+) seconds thread "([^"]+)" still has (\d+) turns?$`, a.threads.stillTurns, "waits the seconds, then expects the thread's agent conversation to have exactly N turns"},
	}
}
