package harness

import (
	"github.com/cucumber/godog"
)

// register binds every step of the vocabulary to this scenario.
func (s *scenario) register(sc *godog.ScenarioContext) {
	s.registerSetup(sc)
	s.registerModel(sc)
	s.registerConversation(sc)
	s.registerHistory(sc)
	s.registerProcess(sc)
	s.registerDamage(sc)
	s.registerAccess(sc)
	s.registerTools(sc)
	s.registerMore(sc)
	s.registerBudget(sc)
	s.registerEnvelopes(sc)
	s.registerGateway(sc)
	s.registerContract(sc)
	s.registerEdge(sc)
	s.registerShared(sc)
	s.registerStream(sc)
	s.registerBodies(sc)
	s.registerRejections(sc)
}
