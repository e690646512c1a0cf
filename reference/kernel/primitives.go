package kernel

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Journal kinds of the primitives in cancel.go, child.go, send.go, signal.go, timer.go and
// safepoint.go. Each command kind is a fact of the execution's log that a replay serves in order,
// as it serves decisions; each carries its identity under "id" so a run that does something else
// at that index is a divergence.
const (
	kindCancelApplied = "cancel.applied" // a cancel stopped the flow at this frame
	kindCanceled      = "canceled"       // the end of a canceled execution
	kindChildStarted  = "child.started"  // a child execution was started (or adopted)
	kindEndObserved   = "end.observed"   // another execution was seen ended
	kindSent          = "sent"           // a message was sent to another execution's inbox
	kindSignalTaken   = "signal.taken"   // a named signal was taken
	kindTimerSet      = "timer.set"      // a durable timer was set, with its due time
	kindTimerFired    = "timer.fired"    // a durable timer fired
	kindSafePoint     = "safepoint"      // messages taken at a safe point
	kindSignal        = "signal"         // a delivered signal (in the signal streams, not the log)
)

// isExtCommand reports whether kind is a command of these primitives (replayed in order).
func isExtCommand(kind string) bool {
	switch kind {
	case kindCancelApplied, kindChildStarted, kindEndObserved, kindSent, kindSignalTaken,
		kindTimerSet, kindTimerFired, kindSafePoint:
		return true
	}
	return false
}

// describeExt names a logged command in a divergence report.
func describeExt(ev store.Event) string {
	if !isExtCommand(ev.Kind) {
		return ev.Kind
	}
	id := cmdID(ev.Data)
	if id == "" {
		return ev.Kind
	}
	return ev.Kind + " " + id
}

// endKind is the log kind that ends an execution in state.
func endKind(state string) string {
	switch state {
	case StateFailed:
		return kindFailed
	case StateCanceled:
		return kindCanceled
	}
	return kindCompleted
}

func cmdID(data []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(data, &v)
	return v.ID
}

// Clock is what durable timers measure time against. The system clock is the default; a test
// gives the kernel one it moves by hand.
//
// Concurrency: both methods are called from any goroutine.
//
//	kernel.Open(ctx, st, kernel.Options{Flows: flows, Clock: myClock})
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// At returns a channel closed once the clock has reached t (at once if it has), and a
	// function that releases the wait.
	At(t time.Time) (<-chan struct{}, func())
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) At(t time.Time) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	tm := time.AfterFunc(time.Until(t), func() { close(ch) })
	return ch, func() { tm.Stop() }
}

// kernelExt is the kernel's state for the primitives: the live contexts (to reach one with a
// cancel), the cancels requested in this process, and a test hook.
type kernelExt struct {
	mu      sync.Mutex
	live    map[string]*Context
	cancels map[string]string
	onPark  func(id, site string)
	// onEndLook is told when AwaitEnd has found id open and is about to wake it (tests only).
	onEndLook func(id string)
}

// endLooked tells the test hook that AwaitEnd found execution id open.
func (x *kernelExt) endLooked(id string) {
	x.mu.Lock()
	f := x.onEndLook
	x.mu.Unlock()
	if f != nil {
		f(id)
	}
}

// parked tells the test hook that execution id waits at site (or has ended: site "end <state>").
func (x *kernelExt) parked(id, site string) {
	x.mu.Lock()
	f := x.onPark
	x.mu.Unlock()
	if f != nil {
		f(id, site)
	}
}

func (k *Kernel) clock() Clock {
	if k.opt.Clock != nil {
		return k.opt.Clock
	}
	return systemClock{}
}

// ctxExt is a Context's state for the primitives.
type ctxExt struct {
	// effect is the context of live effects (steps, deciders' I/O): cancelled with the kernel
	// and by a cancel request.
	effect       context.Context
	effectCancel context.CancelFunc

	reqMu     sync.Mutex
	reqReason *string       // the pending cancel request
	requested chan struct{} // closed when a cancel is requested

	canceled *CanceledError // the cancel once applied (c.mu)
}

// attach prepares c for the primitives and registers it as the live context of its execution:
// a cancel requested before (in this process or, durably, before a crash) is pending in it.
func (k *Kernel) attach(c *Context) error {
	c.x.effect, c.x.effectCancel = context.WithCancel(c.ctx)
	c.x.requested = make(chan struct{})
	k.x.mu.Lock()
	if k.x.live == nil {
		k.x.live = map[string]*Context{}
	}
	k.x.live[c.id] = c
	reason, ok := k.x.cancels[c.id]
	k.x.mu.Unlock()
	if ok {
		c.request(reason)
		return nil
	}
	raw, ok, err := k.st.Meta(c.ctx, cancelKey(c.id))
	if err != nil {
		k.detach(c)
		c.x.effectCancel()
		return err
	}
	if ok {
		var r evCancel
		_ = json.Unmarshal(raw, &r)
		c.request(r.Reason)
	}
	return nil
}

// detach ends c's registration (the generation has returned).
func (k *Kernel) detach(c *Context) {
	k.x.mu.Lock()
	if k.x.live[c.id] == c {
		delete(k.x.live, c.id)
	}
	k.x.mu.Unlock()
	if c.x.effectCancel != nil {
		c.x.effectCancel()
	}
}

// ended forgets what the primitives kept for an execution that has ended.
func (k *Kernel) ended(id, state string) {
	k.x.mu.Lock()
	delete(k.x.cancels, id)
	k.x.mu.Unlock()
	k.x.parked(id, "end "+state)
}

// replayCommand serves the next logged command when it is kind with identity id (c.mu held).
// It returns ok == false when the run is live; a cancel applied at this frame, or a run that does
// something else than the log holds, is the error.
func (c *Context) replayCommand(kind, id string) (data []byte, ok bool, err error) {
	if c.diverged != nil {
		return nil, false, c.diverged
	}
	if err := c.frame(); err != nil {
		return nil, false, err
	}
	if !c.replaying() {
		return nil, false, nil
	}
	ev := c.log[c.pos]
	if ev.Kind == kind && cmdID(ev.Data) == id {
		c.pos++
		return ev.Data, true, nil
	}
	return nil, false, c.mismatch(kind + " " + id)
}

// record appends a command to the log (c.mu held). Without extra it joins the pending writes;
// with extra it is committed now, with them, and extra runs in the same transaction.
func (c *Context) record(kind string, v any, extra func(store.Tx) error) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ev := store.NewEvent{Kind: kind, Data: b}
	if extra == nil {
		err = c.append(ev)
	} else {
		err = c.commit(extra, ev)
	}
	if err != nil {
		return c.stopErr(err)
	}
	return nil
}

// wait commits the pending writes, then blocks until ready is closed, a cancel is requested
// (then applied here and returned) or the kernel stops. Unless site is empty it tells the test
// hook that the execution waits there (a caller that waits again after a wake-up with nothing
// for it passes "").
func (c *Context) wait(site string, ready <-chan struct{}) error {
	c.mu.Lock()
	err := c.flush()
	c.mu.Unlock()
	if err != nil {
		return c.stopErr(err)
	}
	if site != "" {
		c.k.x.parked(c.id, site)
	}
	select {
	case <-ready:
		return nil
	case <-c.x.requested:
		return c.lockedCancelNow()
	case <-c.ctx.Done():
		return ErrStopped
	}
}
