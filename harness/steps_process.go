package harness

import (
	"errors"

	"github.com/cucumber/godog"
)

func (s *scenario) registerProcess(sc *godog.ScenarioContext) {
	sc.Step(`^the system is killed and restarted$`, func() error {
		if err := s.crash(); err != nil {
			return err
		}
		return s.restart()
	})
	sc.Step(`^the system is killed$`, s.crash)
	sc.Step(`^the system restarts$`, s.restart)
}

func (s *scenario) crash() error {
	if err := s.sut(); err != nil {
		return err
	}
	if err := s.drv.Crash(); err != nil {
		return err
	}
	s.transport.CloseIdleConnections()
	s.down = true
	return nil
}

// restart launches the SUT again on the same data directory. A system that does not come back
// after a crash breaks durability: that is a failure, not a harness error.
func (s *scenario) restart() error {
	var err error
	if s.down {
		err = s.drv.Restart(s.ctx)
	}
	s.down = false
	var se *startError
	if errors.As(err, &se) {
		return fail("restart after a crash", se.Error()+logsOf(s.drv), "the system answering again on the same data directory")
	}
	return err
}
