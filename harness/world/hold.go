package world

import (
	"context"
	"sync"
)

// Hold is a gate a scripted answer waits at: a model reply, a tool call or a summary stops at the
// hold until Release is called, the client goes away, World.Reset releases it, or World.Close ends
// it. A Hold may be shared by several answers; Release lets all of them through, including those
// that reach it later. Its methods are safe for concurrent use.
//
//	h := w.NewHold()
//	w.Model().Enqueue(world.Reply{Chunks: []string{"Let me"}, Hold: h, After: []string{" check."}})
//	_ = h.WaitReached(ctx) // "Let me" has been flushed to the client
//	h.Release()
type Hold struct {
	released    chan struct{}
	releaseOnce sync.Once
	reached     chan struct{}
	reachOnce   sync.Once
	gen         <-chan struct{} // closed by World.Reset
	closing     <-chan struct{} // closed by World.Close
}

// holdOutcome says why a wait at a hold ended.
type holdOutcome int

const (
	holdReleased holdOutcome = iota
	holdClientGone
	holdClosed
)

// Release lets every answer waiting at h (now or later) continue. Calling it again does nothing.
//
//	h.Release()
func (h *Hold) Release() { h.releaseOnce.Do(func() { close(h.released) }) }

// Reached reports whether an answer has arrived at h (with everything before it flushed).
//
//	if h.Reached() { h.Release() }
func (h *Hold) Reached() bool {
	select {
	case <-h.reached:
		return true
	default:
		return false
	}
}

// WaitReached blocks until an answer has arrived at h: for a streamed model reply, the chunks
// before the hold have been written and flushed to the client. It returns a *WaitError when ctx
// ends or the World closes first.
//
//	if err := h.WaitReached(ctx); err != nil { t.Fatal(err) }
func (h *Hold) WaitReached(ctx context.Context) error {
	select {
	case <-h.reached:
		return nil
	default:
	}
	select {
	case <-h.reached:
		return nil
	case <-ctx.Done():
		return &WaitError{What: "an answer to reach the hold", Err: ctx.Err()}
	case <-h.closing:
		return &WaitError{What: "an answer to reach the hold", Err: ErrClosed}
	}
}

// wait marks h as reached and blocks until it is released (or reset), the client's request ends,
// or the World closes.
func (h *Hold) wait(client context.Context) holdOutcome {
	h.reachOnce.Do(func() { close(h.reached) })
	select {
	case <-h.released:
		return holdReleased
	case <-h.gen:
		return holdReleased
	case <-client.Done():
		return holdClientGone
	case <-h.closing:
		return holdClosed
	}
}
