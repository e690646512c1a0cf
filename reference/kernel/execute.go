package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// run drives one execution through its generations.
func (k *Kernel) run(e *execution) {
	defer k.wg.Done()
	defer func() {
		k.mu.Lock()
		delete(k.running, e.id)
		k.mu.Unlock()
		e.markLoaded()
		e.markCaught()
		close(e.done)
	}()
	gen := e.info.Gen
	for {
		c, input, err := k.load(e, gen)
		if err == nil {
			e.mu.Lock()
			e.ctx = c
			e.mu.Unlock()
			e.markLoaded()
		}
		if err != nil {
			if errors.Is(err, loomtype.ErrCorrupt) {
				k.refuse(e.id, err)
				e.markLoaded()
				return
			}
			if !k.isStopped() {
				k.log.Error("kernel: cannot load execution", "id", e.id, "gen", gen, "err", err)
			}
			return
		}
		out, ferr := runFlow(e.flow, c, input)
		e.markCaught()
		c.stop()
		if c.diverged != nil {
			ferr = c.diverged
		}
		if k.isStopped() {
			return
		}
		if ce := c.canceledErr(); ce != nil && c.diverged == nil {
			// A cancel applied at a frame ends the execution canceled, whatever the flow returned.
			k.finish(e, c, StateCanceled, nil, ce.Reason)
			return
		}
		if errors.Is(ferr, loomtype.ErrCorrupt) {
			// Damage met while running is not the execution's failure: nothing is recorded.
			k.refuse(e.id, ferr)
			return
		}
		var can *continueAsNew
		switch {
		case errors.As(ferr, &can):
			if err := k.rotate(e, c, can.carry); err != nil {
				k.log.Error("kernel: continue-as-new failed", "id", e.id, "err", err)
				return
			}
			gen++
			continue
		case ferr == nil:
			k.finish(e, c, StateCompleted, out, "")
		default:
			var d *loomtype.DivergenceError
			if errors.As(ferr, &d) && k.opt.OnDivergence != nil {
				k.opt.OnDivergence(d)
			}
			k.finish(e, c, StateFailed, nil, ferr.Error())
		}
		return
	}
}

// refuse marks an execution refused for damaged storage and reports it once.
func (k *Kernel) refuse(id string, err error) {
	k.mu.Lock()
	_, again := k.damaged[id]
	k.damaged[id] = err
	k.mu.Unlock()
	if again {
		return
	}
	if k.opt.OnCorrupt != nil {
		k.opt.OnCorrupt(id, err)
		return
	}
	k.log.Error("kernel: the stored data of an execution is damaged; it is refused", "id", id, "err", err)
}

// runFlow runs the body, turning a panic into a failure of the execution.
func runFlow(fl Flow, c *Context, input json.RawMessage) (out json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kernel: flow panicked: %v", r)
		}
	}()
	return fl(c, input)
}

func (k *Kernel) finish(e *execution, c *Context, state string, out json.RawMessage, msg string) {
	in := e.info
	in.State, in.Output, in.Error, in.Gen = state, out, msg, c.gen
	kind := endKind(state)
	b, _ := json.Marshal(evEnd{Output: out, Error: msg})
	// The end is committed with the writes still pending, so nobody learns of it before them.
	c.mu.Lock()
	var h int64
	err := k.st.Update(k.ctx, func(tx store.Tx) error {
		var err error
		if h, err = c.appendTx(tx, store.NewEvent{Kind: kind, Data: b}); err != nil {
			return err
		}
		return putInfo(tx, in)
	})
	if err == nil {
		c.committed(h)
	}
	c.mu.Unlock()
	if err != nil {
		if !k.isStopped() {
			k.log.Error("kernel: cannot record the end of an execution", "id", e.id, "err", err)
		}
		return
	}
	k.mu.Lock()
	k.infos[e.id] = in
	e.info = in
	dormant := !k.listed || k.next < len(k.dormant)
	k.mu.Unlock()
	k.ended(e.id, state)
	if dormant {
		// A parent not replayed yet that awaits this child is needed now.
		if ref, ok, err := k.Parent(k.ctx, e.id); err == nil && ok {
			k.wake(k.ctx, ref.Parent)
		}
	}
}

func (k *Kernel) rotate(e *execution, c *Context, carry json.RawMessage) error {
	in := e.info
	in.Gen = c.gen + 1
	c.mu.Lock()
	defer c.mu.Unlock()
	started, _ := json.Marshal(evStarted{Flow: in.Flow, Principal: in.Principal, Input: carry, InboxCursor: c.inboxCursor})
	err := k.st.Update(k.ctx, func(tx store.Tx) error {
		if _, err := c.appendTx(tx, store.NewEvent{Kind: kindContinued}); err != nil {
			return err
		}
		if _, err := tx.Append(logStream(e.id), in.Gen, 0, store.NewEvent{Kind: kindStarted, Data: started}); err != nil {
			return err
		}
		return putInfo(tx, in)
	})
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.infos[e.id] = in
	e.info = in
	k.mu.Unlock()
	return nil
}

// load reads generation gen of an execution's log and prepares a Context that replays it.
func (k *Kernel) load(e *execution, gen int64) (*Context, json.RawMessage, error) {
	c := &Context{k: k, id: e.id, gen: gen, principal: e.info.Principal, done: map[string]store.Event{}, live: e.markCaught}
	c.ctx, c.cancel = context.WithCancel(k.ctx)
	var after int64
	var started *evStarted
	for {
		evs, err := k.st.ReadForward(k.ctx, logStream(e.id), gen, after, store.MaxRead)
		if err != nil {
			c.cancel()
			return nil, nil, err
		}
		for _, ev := range evs {
			after = ev.Seq
			switch ev.Kind {
			case kindStarted:
				var s evStarted
				if err := json.Unmarshal(ev.Data, &s); err != nil {
					c.cancel()
					return nil, nil, fmt.Errorf("kernel: %s: started event: %w", e.id, err)
				}
				started = &s
			case kindStepDone, kindStepFail:
				var s evStep
				_ = json.Unmarshal(ev.Data, &s)
				c.done[s.ID] = ev
			case kindConsumed:
				if cd, dd, ok := splitConsumed(ev.Data); ok { // version 4: two commands in one row
					dec := ev
					ev.Data, dec.Kind, dec.Data = cd, kindDecision, dd
					c.log = append(c.log, ev, dec)
					continue
				}
				c.log = append(c.log, ev)
			case kindDecision, kindStepStart:
				c.log = append(c.log, ev)
			default:
				if isExtCommand(ev.Kind) {
					c.log = append(c.log, ev)
				}
			}
		}
		if len(evs) < store.MaxRead {
			break
		}
	}
	if started == nil {
		c.cancel()
		return nil, nil, fmt.Errorf("kernel: %s generation %d has no start", e.id, gen)
	}
	c.head = after
	c.inboxCursor = started.InboxCursor
	if err := k.attach(c); err != nil {
		c.cancel()
		return nil, nil, err
	}
	return c, started.Input, nil
}

type continueAsNew struct{ carry json.RawMessage }

func (c *continueAsNew) Error() string { return "kernel: continue as new" }
