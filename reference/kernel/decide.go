package kernel

import (
	"encoding/json"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Decide records a choice. Live, it runs fn and records its value under id; replaying, it
// returns the value recorded under id without running fn. A decision is therefore made exactly
// once. If fn fails nothing is recorded and the error is returned. fn may run steps with
// Execute; a replay that finds the decision recorded skips them.
//
// A decision is recorded before anything can act on it, though not always in a transaction of
// its own: it is committed together with the execution's other writes made back to back with
// it, at the latest before the next effect (a step, an I/O through Ctx, a send, a child's start)
// or wait, and before the execution ends (the batching rules are listed at maxPend). fn must
// therefore reach the world only through Ctx.
//
// Errors: fn's error, a *loomtype.DivergenceError, or a store error.
//
//	v, err := c.Decide("clock", func() (json.RawMessage, error) {
//		return json.Marshal(time.Now().UnixMilli())
//	})
func (c *Context) Decide(id string, fn func() (json.RawMessage, error)) (json.RawMessage, error) {
	return c.decide(id, fn, false)
}

// DecideValue is Decide for a decider that returns a Go value: what is recorded, and returned, is
// the value as json.Marshal encodes it, the very record Decide makes of that encoding. It is
// written without another pass over the encoding, which json.Marshal made valid and compact.
//
// Errors: those of Decide, and json.Marshal's (nothing is recorded then).
//
//	raw, err := c.DecideValue("clock", func() (any, error) { return time.Now().UnixMilli(), nil })
func (c *Context) DecideValue(id string, fn func() (any, error)) (json.RawMessage, error) {
	return c.decide(id, func() (json.RawMessage, error) {
		x, err := fn()
		if err != nil {
			return nil, err
		}
		return json.Marshal(x)
	}, true)
}

// DecideTaken is DecideValue for the decision a flow makes of the message it has just taken
// (Receive): when nothing was written between the two and neither is committed yet, the decision
// is kept in the consumed event's row (journal version 4, mergeConsumed), one row where there
// were two. It is committed and replayed exactly as DecideValue's decision is.
//
// Errors: those of DecideValue.
//
//	m, err := c.Receive()
//	raw, err := c.DecideTaken("verdict", func() (any, error) { return check(m), nil })
func (c *Context) DecideTaken(id string, fn func() (any, error)) (json.RawMessage, error) {
	c.mu.Lock()
	c.joinID = id
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.joinID = ""
		c.mu.Unlock()
	}()
	return c.DecideValue(id, fn)
}

// decide is Decide; marshaled says that fn's value is json.Marshal's output.
func (c *Context) decide(id string, fn func() (json.RawMessage, error), marshaled bool) (json.RawMessage, error) {
	c.mu.Lock()
	if c.diverged != nil {
		c.mu.Unlock()
		return nil, c.diverged
	}
	if err := c.frame(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if c.replaying() {
		if v, found, err := c.replayDecision(id); err != nil || found {
			c.mu.Unlock()
			return v, err
		}
	}
	c.markLive()
	if err := c.checkPending(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.inner = append(c.inner, nil)
	c.mu.Unlock()

	c.k.live.begin()
	v, ferr := func() (json.RawMessage, error) {
		defer c.k.live.end()
		return fn()
	}()

	c.mu.Lock()
	defer c.mu.Unlock()
	inner := c.inner[len(c.inner)-1]
	c.inner = c.inner[:len(c.inner)-1]
	return c.recordDecision(id, v, ferr, inner, marshaled)
}

// replayDecision, with c.mu held while replaying, looks for decision id at the replay position:
// found when the log holds it (v is its value, and the position has moved past it), an error on a
// mismatch, and neither when the decider is to run (again).
func (c *Context) replayDecision(id string) (v json.RawMessage, found bool, err error) {
	ev := c.log[c.pos]
	switch ev.Kind {
	case kindDecision:
		if d, err := decodeDecision(ev.Data); err == nil && d.ID == id {
			c.pos++
			return d.Value, true, nil
		}
		err := c.mismatch("decision " + id)
		if err != nil {
			return nil, false, err
		}
	case kindStepStart:
		// Steps run inside this decision come first in the log; skip them when the
		// decision itself was recorded.
		j := c.pos
		for j < len(c.log) && c.log[j].Kind == kindStepStart {
			j++
		}
		if j < len(c.log) && c.log[j].Kind == kindDecision {
			if d, err := decodeDecision(c.log[j].Data); err == nil && d.ID == id && len(d.Inner) == j-c.pos {
				c.pos = j + 1
				return d.Value, true, nil
			}
		}
		// The decider was running when the process stopped: run it again; its steps
		// replay from the log.
	default:
		if err := c.mismatch("decision " + id); err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

// recordDecision, with c.mu held once decider fn of decision id has returned v and ferr (inner:
// the ids of the steps it ran), gives the decision's outcome and appends it to the log when the
// decider succeeded.
func (c *Context) recordDecision(id string, v json.RawMessage, ferr error, inner []string, marshaled bool) (json.RawMessage, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if ferr != nil {
		if c.cancelRequested() && c.ctx.Err() == nil {
			// The decider was aborted by a cancel (its Ctx): its outcome is the cancel.
			return nil, c.cancelNow()
		}
		return nil, ferr
	}
	if c.diverged != nil {
		return nil, c.diverged
	}
	if c.replaying() {
		if err := c.mismatch("decision " + id); err != nil {
			return nil, err
		}
	}
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	encode := encodeDecision
	if marshaled {
		encode = encodeMarshaled
	}
	b, err := encode(evDecision{ID: id, Value: v, Inner: inner})
	if err != nil {
		return nil, fmt.Errorf("kernel: decision %s: value is not JSON", id)
	}
	if c.joinID == id {
		c.joinID = ""
		if n := len(c.pend); n > 0 && c.pend[n-1].Kind == kindConsumed {
			if row, ok := mergeConsumed(c.pend[n-1].Data, b); ok {
				c.pend[n-1].Data = row // one row for the message taken and the decision made of it
				return v, nil
			}
		}
	}
	if err := c.append(store.NewEvent{Kind: kindDecision, Data: b}); err != nil {
		return nil, err
	}
	return v, nil
}
