package steps

import (
	"fmt"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// recallSteps fill a memory scope with whole entries for a run to recall (spec/http.md, Run
// recall); what a run recalled is judged by the model's requests and the memory's log.
type recallSteps struct{ *scenario }

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

// recallsAre expects every recall of the memory's log, in the order they arrived, to be exactly
// the table's rows (scope, query): a recall missing, repeated or asked with another query fails.
func (s *recallSteps) recallsAre(t *godog.Table) error {
	var want []string
	for _, row := range t.Rows[1:] {
		if len(row.Cells) != 2 {
			return harnessErr("a recall row has scope, query")
		}
		want = append(want, fmt.Sprintf("[%s %q]", row.Cells[0].Value, unescape(row.Cells[1].Value)))
	}
	var got []string
	for _, op := range s.world.Memory().Log() {
		if op.Op == world.OpRecall {
			got = append(got, fmt.Sprintf("[%s %q]", op.Scope, op.Query))
		}
	}
	if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
		return fail("the recalls of GET /control/memory/log", g, w)
	}
	return nil
}

// agentRecallVocabulary lists the steps of features/agent/recall.feature.
func agentRecallVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?)'s memory scope already holds:$`, a.recall.scopeAlreadyHolds, "puts the table's entries (role, text, tainted) into who's memory scope, each under an id of its own, after what it holds"},
		{`^the memory's recalls are:$`, a.recall.recallsAre, "expects every recall of the memory's log, in order, to be exactly the table's (scope, query)"},
	}
}
