package kernel

import (
	"sync"
	"sync/atomic"
)

// liveCount counts the deciders and steps running live now (Kernel.LiveWork) and tells those
// waiting for none to run (Kernel.LiveIdle) when the count falls to zero.
type liveCount struct {
	n  atomic.Int64
	mu sync.Mutex
	// idle, if not nil, is closed the next time n falls to zero; made by the first waiter.
	idle chan struct{}
}

// closedChan is a channel closed from the start: what LiveIdle returns when nothing runs.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// begin counts one more piece of live work.
func (l *liveCount) begin() { l.n.Add(1) }

// end counts one piece of live work less, and wakes the waiters once none is left. The count is
// read again under the lock, so work that began meanwhile keeps them waiting.
func (l *liveCount) end() {
	if l.n.Add(-1) != 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idle != nil && l.n.Load() == 0 {
		close(l.idle)
		l.idle = nil
	}
}

// wait is LiveIdle.
func (l *liveCount) wait() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n.Load() == 0 {
		return closedChan
	}
	if l.idle == nil {
		l.idle = make(chan struct{})
	}
	return l.idle
}

// LiveWork is how many deciders (Context.Decide) and journaled steps (Context.Execute and the
// like) run live now, over every execution: work a Close would cut off, for the next kernel on
// the store to run again. A step inside a decider counts as well.
//
//	if k.LiveWork() == 0 { /* nothing would be run twice */ }
func (k *Kernel) LiveWork() int64 { return k.live.n.Load() }

// LiveIdle returns a channel closed once LiveWork is zero: closed already when no live work runs
// now, else closed when the last piece running ends. Work may begin again after it closed, so a
// caller that needs none to run reads LiveWork after the wake-up and waits again.
//
//	for k.LiveWork() > 0 { <-k.LiveIdle() }
func (k *Kernel) LiveIdle() <-chan struct{} { return k.live.wait() }
