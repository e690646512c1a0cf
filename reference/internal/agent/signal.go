package agent

import "sync"

// Signal interrupts a run from outside it. It fires at most once. Arm is called by the run the
// first time it does something live (a replayed run never arms), so a watcher that costs
// something starts only for turns that actually run.
//
// Safe for concurrent use.
//
//	sig := agent.NewSignal(func(s *agent.Signal) { go watch(s) })
//	defer sig.Disarm()
type Signal struct {
	once     sync.Once
	ch       chan struct{}
	armOnce  sync.Once
	onArm    func(*Signal)
	mu       sync.Mutex
	cleanups []func()
	probe    func() bool
}

// NewSignal returns a signal whose first Arm calls onArm (which may be nil).
func NewSignal(onArm func(*Signal)) *Signal {
	return &Signal{ch: make(chan struct{}), onArm: onArm}
}

// Fire fires the signal.
func (s *Signal) Fire() { s.once.Do(func() { close(s.ch) }) }

// Fired reports whether the signal has fired.
func (s *Signal) Fired() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// SetProbe gives the signal a synchronous check (the watcher's own look at what is waiting), so
// that Check sees a message that has arrived even if the watcher has not woken up for it yet.
func (s *Signal) SetProbe(p func() bool) {
	s.mu.Lock()
	s.probe = p
	s.mu.Unlock()
}

// Check fires the signal if its probe says so, and reports whether it has fired.
func (s *Signal) Check() bool {
	if s.Fired() {
		return true
	}
	s.mu.Lock()
	p := s.probe
	s.mu.Unlock()
	if p != nil && p() {
		s.Fire()
	}
	return s.Fired()
}

// Done is closed when the signal fires.
func (s *Signal) Done() <-chan struct{} { return s.ch }

// Arm starts the watcher once.
func (s *Signal) Arm() {
	s.armOnce.Do(func() {
		if s.onArm != nil {
			s.onArm(s)
		}
	})
}

// OnDisarm registers a function Disarm runs (the watcher's cleanup).
func (s *Signal) OnDisarm(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

// Disarm ends the watch: it runs the registered cleanups once and prevents a later Arm.
func (s *Signal) Disarm() {
	s.armOnce.Do(func() {})
	s.mu.Lock()
	cs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for _, f := range cs {
		f()
	}
}
