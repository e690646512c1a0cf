package steps

import (
	"fmt"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// connection changes the kit's connection lab in the configuration.
func (s *threadsSteps) connection(f func(c *sutconfig.ConnectionConfig)) error {
	return s.configure(func(c *sutconfig.SUTConfig) {
		for i := range c.Threads.Connections {
			if c.Threads.Connections[i].ID == world.PeerConnection {
				f(&c.Threads.Connections[i])
			}
		}
	})
}

// budgetBound configures the byte budget of each agent conversation of lab.
func (s *threadsSteps) budgetBound(n int) error {
	return s.connection(func(c *sutconfig.ConnectionConfig) { c.Budget = int64(n) })
}

// rateBound configures the rate of the peer's texts on lab.
func (s *threadsSteps) rateBound(n int) error {
	return s.connection(func(c *sutconfig.ConnectionConfig) { c.Rate = n })
}

// peerSendsTurns sends n texts on the thread, each answered and taken by its own turn.
func (s *threadsSteps) peerSendsTurns(n int, from, to, alias string) error {
	for i := 1; i <= n; i++ {
		text := fmt.Sprintf("text %d", i)
		if err := s.world.Model().EnqueueFor(text, world.Reply{Text: fmt.Sprintf("answer %d", i)}); err != nil {
			return harnessErr("script the model: %v", err)
		}
		if err := s.peerSends(text, from, to, alias); err != nil {
			return err
		}
		if err := s.answerAck(); err != nil {
			return err
		}
		if err := s.turnIs(i, alias, "completed"); err != nil {
			return err
		}
	}
	return nil
}

// threadsLimitsVocabulary lists the steps of features/threads/limits.feature.
func threadsLimitsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the connection "lab" stores at most (\d+) bytes of text per agent conversation$`, a.threads.budgetBound, "configures the byte budget of each agent conversation of the connection"},
		{`^the connection "lab" takes at most (\d+) texts per minute from the peer$`, a.threads.rateBound, "configures the rate of the peer's texts on the connection"},
		{`^the peer sends (\d+) texts from "([a-z0-9-]+)" to "([a-z0-9-]+)" on thread "([^"]+)", each answered by a turn of its own$`, a.threads.peerSendsTurns,
			"sends \"text 1\" to \"text N\" as the peer on the thread, scripting the model to answer \"text I\" with \"answer I\", and waits, after each, for its turn to complete"},
	}
}
