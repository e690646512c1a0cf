package harness

import (
	"fmt"

	"github.com/cucumber/godog"
)

// recallSteps fill a memory scope with whole entries for a run to recall (spec/http.md, Run
// recall); what a run recalled is judged by the model's requests and the memory's log.
type recallSteps struct{ *scenario }

// steps is the recall vocabulary: each pattern, the method that runs it, what it means.
func (s *recallSteps) steps() []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?)'s memory scope already holds:$`, s.scopeAlreadyHolds, "puts the table's entries (role, text, tainted) into who's memory scope, each under an id of its own, after what it holds"},
	}
}

// scopeAlreadyHolds puts the table's entries (role, text, tainted) into who's memory scope, each
// under an id of its own, after what it holds; seeding is not an operation of the memory's log.
func (s *recallSteps) scopeAlreadyHolds(who string, t *godog.Table) error {
	if _, ok := principals[who]; !ok {
		return harnessErr("unknown principal %q", who)
	}
	entries, err := entriesOf(t)
	if err != nil {
		return err
	}
	scope := memoryScope(who)
	have := len(s.world.Memory().Scope(scope))
	for i := range entries {
		entries[i].ID = fmt.Sprintf("seeded-%d", have+i)
	}
	if err := s.world.Memory().SeedEntries(scope, entries...); err != nil {
		return harnessErr("memory: %v", err)
	}
	return nil
}
