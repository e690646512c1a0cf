package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// StateCanceled is the end state of an execution stopped by Kernel.Cancel. Its Info.Error holds
// the cancel's reason.
const StateCanceled = "canceled"

var (
	// ErrCanceled is what every frame of a cancelled execution returns (match it with
	// errors.Is; the error itself is a *CanceledError carrying the reason).
	ErrCanceled = errors.New("kernel: execution canceled")
	// ErrEnded is what Cancel answers for an execution that has already ended (the error is an
	// *EndedError naming its state). It matches loomtype.ErrClosed too.
	ErrEnded = errors.New("kernel: execution has ended")
)

// CanceledError is the cancel a flow sees at a frame. It matches ErrCanceled.
type CanceledError struct {
	Reason string
}

func (e *CanceledError) Error() string {
	if e.Reason == "" {
		return ErrCanceled.Error()
	}
	return ErrCanceled.Error() + ": " + e.Reason
}

// Is makes a *CanceledError match ErrCanceled.
func (e *CanceledError) Is(target error) bool { return target == ErrCanceled }

// EndedError is an operation refused because its execution has ended. It matches ErrEnded and
// loomtype.ErrClosed.
type EndedError struct {
	ID    string
	State string
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("kernel: execution %s has ended (%s)", e.ID, e.State)
}

// Is makes an *EndedError match ErrEnded and loomtype.ErrClosed.
func (e *EndedError) Is(target error) bool {
	return target == ErrEnded || target == loomtype.ErrClosed
}

type evCancel struct {
	Reason string `json:"reason,omitempty"`
}

func cancelKey(id string) string { return "cancel/" + id }

// Cancel asks an open execution to stop. The request is durable before Cancel returns: the
// execution stops at its next frame (the next Decide, Execute, Receive, ContinueAsNew or
// primitive of this package it calls, or the one it waits in now), which returns a
// *CanceledError (errors.Is(err, ErrCanceled)) and goes on returning it; the context of a step
// or decider in flight (Context.Ctx) is cancelled, and the outcome of that step, or of that
// decider if it fails, is the cancel. That stop is
// journaled, so a replay stops at the same frame, and the execution ends in StateCanceled with
// reason as its Info.Error whatever its flow then returns. A request that a crash interrupts
// before the stop applies at the first live frame after recovery. An execution that ends
// without reaching another frame ends as it would have. Cancelling again keeps the first
// reason and returns nil.
//
// Errors: loomtype.ErrNotFound for an unknown execution, an *EndedError (ErrEnded,
// loomtype.ErrClosed) for one that has ended, the damage (loomtype.ErrCorrupt) of a refused one,
// ErrStopped, or a store error.
//
// Concurrency: safe for concurrent use, also from a step of another execution.
//
//	if err := k.Cancel(ctx, "run-7", "the user pressed stop"); errors.Is(err, kernel.ErrEnded) {
//		// too late: it ended on its own
//	}
func (k *Kernel) Cancel(ctx context.Context, id, reason string) error {
	if err := k.here(id); err != nil {
		return err
	}
	k.need(ctx, id)
	if _, err := k.Info(ctx, id); err != nil {
		return err
	}
	if k.isStopped() {
		return ErrStopped
	}
	err := k.st.Update(ctx, func(tx store.Tx) error {
		if err := openIn(tx, id); err != nil {
			return err
		}
		if old, ok, err := tx.Meta(cancelKey(id)); err != nil {
			return err
		} else if ok {
			var r evCancel
			_ = json.Unmarshal(old, &r)
			reason = r.Reason // the first request stands
			return nil
		}
		b, _ := json.Marshal(evCancel{Reason: reason})
		return tx.PutMeta(cancelKey(id), b)
	})
	if err != nil {
		if errors.Is(err, store.ErrClosed) {
			return ErrStopped
		}
		return err
	}
	k.x.mu.Lock()
	if k.x.cancels == nil {
		k.x.cancels = map[string]string{}
	}
	k.x.cancels[id] = reason
	c := k.x.live[id]
	k.x.mu.Unlock()
	if c != nil {
		c.request(reason)
	}
	return nil
}

// request makes a cancel pending in c: it wakes a wait and cancels the effect in flight.
func (c *Context) request(reason string) {
	c.x.reqMu.Lock()
	if c.x.reqReason == nil {
		c.x.reqReason = &reason
		close(c.x.requested)
	}
	c.x.reqMu.Unlock()
	c.x.effectCancel()
}

func (c *Context) cancelRequested() bool {
	c.x.reqMu.Lock()
	defer c.x.reqMu.Unlock()
	return c.x.reqReason != nil
}

func (c *Context) pendingReason() (string, bool) {
	c.x.reqMu.Lock()
	defer c.x.reqMu.Unlock()
	if c.x.reqReason == nil {
		return "", false
	}
	return *c.x.reqReason, true
}

// frame is the cancel check at the start of every frame (c.mu held): once applied, the cancel
// is returned again; replaying, a cancel logged at this index is applied; live, a pending cancel
// is journaled and applied.
func (c *Context) frame() error {
	if c.x.canceled != nil {
		return c.x.canceled
	}
	if c.broken != nil {
		return c.broken
	}
	if !c.replaying() {
		c.markLive()
	}
	if c.replaying() {
		ev := c.log[c.pos]
		if ev.Kind != kindCancelApplied {
			return nil
		}
		var r evCancel
		_ = json.Unmarshal(ev.Data, &r)
		c.pos++
		c.x.canceled = &CanceledError{Reason: r.Reason}
		return c.x.canceled
	}
	if _, ok := c.pendingReason(); !ok {
		return nil
	}
	return c.cancelNow()
}

// cancelNow journals and applies the pending cancel (c.mu held). It returns the cancel, or the
// store's error when it cannot be journaled (then nothing is applied).
func (c *Context) cancelNow() error {
	if c.x.canceled != nil {
		return c.x.canceled
	}
	reason, _ := c.pendingReason()
	if err := c.record(kindCancelApplied, evCancel{Reason: reason}, nil); err != nil {
		return err
	}
	c.x.canceled = &CanceledError{Reason: reason}
	return c.x.canceled
}

// lockedCancelNow is cancelNow for a live wait woken by the request.
func (c *Context) lockedCancelNow() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cancelNow()
}

// canceledErr is the cancel applied in this generation, if any.
func (c *Context) canceledErr() *CanceledError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.x.canceled
}

// openIn checks, inside a transaction, that execution id exists and is open, so a request to it
// (a cancel, a signal) is stored only while it can still be taken.
//
// Errors: loomtype.ErrNotFound, an *EndedError, a damaged record's error, or a store error.
func openIn(tx store.Tx, id string) error {
	v, ok, err := tx.Meta(metaKey(id))
	if err != nil {
		return err
	}
	if !ok {
		return loomtype.ErrNotFound
	}
	var in Info
	if err := json.Unmarshal(v, &in); err != nil {
		return fmt.Errorf("kernel: execution record %s: %w", id, err)
	}
	if in.State != StateOpen {
		return &EndedError{ID: id, State: in.State}
	}
	return nil
}
