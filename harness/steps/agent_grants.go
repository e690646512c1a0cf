package steps

import (
	"encoding/json"
	"fmt"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// introspectedStartsRun maps a fresh token to the principal through the identity service and starts a run with it.
func (s *failuresSteps) introspectedStartsRun(raw string, doc *godog.DocString) error {
	var p sutconfig.Principal
	if err := json.Unmarshal([]byte(raw), &p); err != nil || p.Actor == "" {
		return harnessErr("the principal is not JSON with an actor: %s", raw)
	}
	s.introspected++
	token := fmt.Sprintf("tok-introspected-%d", s.introspected)
	if err := s.world.Identity().Add(token, p); err != nil {
		return harnessErr("identity: %v", err)
	}
	return s.areas.runs.startsRun(token, doc)
}

// agentGrantsVocabulary lists the steps of features/agent/grants.feature.
func agentGrantsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^a token introspected as (\{.*\}) starts a run with:$`, a.failures.introspectedStartsRun, "maps a fresh token to the principal through the identity service and starts a run with it"},
	}
}
