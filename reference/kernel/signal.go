package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/store"
)

// ErrBadSignal: a signal name that is not a valid id, or an empty delivery key.
var ErrBadSignal = errors.New("kernel: invalid signal name or key")

// SignalDelivery is one delivery of a named signal.
type SignalDelivery struct {
	Name    string          `json:"name"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Seq is the delivery's position among the deliveries of its name (1, 2, ...).
	Seq int64 `json:"seq"`
	// Time is when it was delivered (Unix milliseconds).
	Time int64 `json:"time"`
}

type evSignalTaken struct {
	ID string `json:"id"` // the signal's name
	SignalDelivery
}

// Signal streams: one per execution and name, so each name has its own order and cursor. A
// control character cannot occur in an id or a name, so the separator keeps them apart.
func signalStream(id, name string) string { return "sg/" + id + "\x1f" + name }
func signalCursor(id, name string) string { return "sgc/" + id + "\x1f" + name }
func signalScope(id string) string        { return "sgd/" + id }

// Signal delivers the named signal to execution id, once per (name, key): a delivery whose key
// was delivered under that name before (among the last DedupeWindow deliveries to the execution)
// is not delivered again, and Signal reports false with no error. Deliveries of a name are
// taken by WaitSignal in the order they were made, each once; nothing waits for them to be taken.
//
// Errors: ErrBadSignal, loomtype.ErrNotFound for an unknown execution, an *EndedError
// (loomtype.ErrClosed) for one that has ended, the damage of a refused one, or a store error.
//
// Concurrency: safe for concurrent use, also from a step of another execution.
//
//	ok, err := k.Signal(ctx, "run-7", "approval:call-3", "approve-req-81", json.RawMessage(`{"approved":true}`))
func (k *Kernel) Signal(ctx context.Context, id, name, key string, payload json.RawMessage) (bool, error) {
	if !validName(name) || key == "" || (len(payload) > 0 && !json.Valid(payload)) {
		return false, ErrBadSignal
	}
	if err := k.here(id); err != nil {
		return false, err
	}
	k.need(ctx, id)
	if _, err := k.Info(ctx, id); err != nil {
		return false, err
	}
	delivered := false
	err := k.st.Update(ctx, func(tx store.Tx) error {
		if err := openIn(tx, id); err != nil {
			return err
		}
		fresh, err := tx.Remember(signalScope(id), strconv.Quote(name)+key, k.opt.DedupeWindow)
		if err != nil || !fresh {
			return err
		}
		b, _ := json.Marshal(SignalDelivery{Name: name, Key: key, Payload: payload})
		_, err = tx.Append(signalStream(id, name), 0, -1, store.NewEvent{Kind: kindSignal, Data: b})
		delivered = err == nil
		return err
	})
	return delivered, err
}

// WaitSignal takes the next delivery of the named signal, waiting for one if none is there. The
// take is journaled: a replay returns the same delivery without waiting, and a wait a crash
// interrupted waits again for the same next delivery. A delivery is taken once, across
// generations.
//
// Errors: ErrBadSignal, a *CanceledError, a *loomtype.DivergenceError, ErrStopped or a store
// error.
//
// Concurrency: the flow's goroutine only.
//
//	d, err := c.WaitSignal("approval:call-3")
//	if err != nil { return nil, err }
//	approved := string(d.Payload) == `{"approved":true}`
func (c *Context) WaitSignal(name string) (SignalDelivery, error) {
	if !validName(name) {
		return SignalDelivery{}, ErrBadSignal
	}
	c.mu.Lock()
	data, ok, err := c.replayCommand(kindSignalTaken, name)
	c.mu.Unlock()
	if err != nil {
		return SignalDelivery{}, err
	}
	if ok {
		var ev evSignalTaken
		_ = json.Unmarshal(data, &ev)
		return ev.SignalDelivery, nil
	}
	sub, unsub := c.k.st.Subscribe(signalStream(c.id, name))
	defer unsub()
	site := "signal " + name
	for {
		d, ok, err := c.PendingSignal(name)
		if err != nil {
			return SignalDelivery{}, err
		}
		if ok {
			cb, _ := json.Marshal(d.Seq)
			c.mu.Lock()
			defer c.mu.Unlock()
			err := c.record(kindSignalTaken, evSignalTaken{ID: name, SignalDelivery: d}, func(tx store.Tx) error {
				return tx.PutMeta(signalCursor(c.id, name), cb)
			})
			if err != nil {
				return SignalDelivery{}, err
			}
			return d, nil
		}
		if err := c.wait(site, sub); err != nil {
			return SignalDelivery{}, err
		}
		site = ""
	}
}

// PendingSignal returns the next delivery of the named signal that WaitSignal would take, without
// taking it. It reads live state and is not journaled: a flow may use it only inside a decider
// (Decide) or to raise something it then records, as an abort checkpoint does.
//
// Errors: ErrBadSignal, ErrStopped or a store error.
//
// Concurrency: safe from any goroutine of the execution (a watcher, a decider).
//
//	d, ok, err := c.PendingSignal("barge-in")
func (c *Context) PendingSignal(name string) (SignalDelivery, bool, error) {
	if !validName(name) {
		return SignalDelivery{}, false, ErrBadSignal
	}
	var after int64
	raw, ok, err := c.k.st.Meta(c.ctx, signalCursor(c.id, name))
	if err != nil {
		return SignalDelivery{}, false, c.stopErr(err)
	}
	if ok {
		_ = json.Unmarshal(raw, &after)
	}
	evs, err := c.k.st.ReadForward(c.ctx, signalStream(c.id, name), 0, after, 1)
	if err != nil {
		return SignalDelivery{}, false, c.stopErr(err)
	}
	if len(evs) == 0 {
		return SignalDelivery{}, false, nil
	}
	var d SignalDelivery
	if err := json.Unmarshal(evs[0].Data, &d); err != nil {
		return SignalDelivery{}, false, fmt.Errorf("kernel: %s: signal %s delivery %d: %w", c.id, name, evs[0].Seq, err)
	}
	d.Seq, d.Time = evs[0].Seq, evs[0].Time
	return d, true, nil
}

// WatchSignal returns a channel that receives a value after each delivery of the named signal to
// this execution, and a function that ends the watch. Like PendingSignal it is live state, for
// waking something that then looks (PendingSignal) and records what it saw.
//
// Concurrency: safe from any goroutine.
//
//	ch, stop := c.WatchSignal("barge-in")
//	defer stop()
func (c *Context) WatchSignal(name string) (<-chan struct{}, func()) {
	return c.k.st.Subscribe(signalStream(c.id, name))
}
