package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// Context is a flow's only door to the world. Its methods append facts to the execution's log
// when they run live and serve them from the log when they replay.
//
// Concurrency: a flow calls its Context from one goroutine, except that the functions given to
// ExecuteAll run concurrently (they must not call the Context).
type Context struct {
	k         *Kernel
	id        string
	gen       int64
	principal loomtype.Identity
	ctx       context.Context
	cancel    context.CancelFunc

	mu          sync.Mutex
	log         []store.Event          // the commands of this generation, in order
	pos         int                    // next command to replay
	done        map[string]store.Event // step completions by step id
	head        int64                  // newest seq of this generation's log
	inboxCursor int64                  // newest inbox seq consumed
	// replayInbox holds inbox entries read ahead for the consumed events of version 2 still to be
	// replayed, oldest first; it empties as the replay goes live.
	replayInbox []Message
	diverged    error
	inner       [][]string // step ids run inside the deciders on the stack

	// pend are the events this generation wrote live and has not committed yet (see flush):
	// consecutive writes with nothing observable between them share one transaction.
	pend []store.NewEvent
	// pendCursor is the inbox cursor when pend was last empty: the durable cursor.
	pendCursor int64
	// broken is the error of a commit of pend that failed: what the flow believes it recorded
	// is not in the log, so every later command of this generation answers it.
	broken error
	// joinID is the decision DecideTaken is making: it joins the consumed event still pending
	// right before it, in one row.
	joinID string
	// live is called the first time the generation does anything live (see markLive).
	live func()

	subCh    <-chan struct{}
	subClose func()

	x ctxExt // what the primitives of cancel.go, child.go, signal.go and timer.go keep
}

// ID is the execution id.
func (c *Context) ID() string { return c.id }

// Generation is the current generation (0 until the first ContinueAsNew).
func (c *Context) Generation() int64 { return c.gen }

// Principal is the identity the execution was started under.
func (c *Context) Principal() loomtype.Identity { return c.principal }

// Ctx is cancelled when the kernel stops and when the execution is cancelled (Kernel.Cancel).
// Live I/O inside deciders and steps, and any effect the flow has on the world outside them,
// must use it: asking for it commits every write of this execution still waiting to be
// committed (see the batching rules at Decide), so whatever the effect is based on is durable
// before the effect can happen. When that commit fails the context returned is already
// cancelled (its cause is the failure) and the flow's next command answers the failure.
//
// Concurrency: safe from any goroutine of the execution (a decider, a step, a watcher).
//
//	resp, err := provider.Complete(c.Ctx(), req, onDelta)
func (c *Context) Ctx() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pend) > 0 && c.ctx.Err() == nil {
		_ = c.flush()
	}
	if c.broken != nil {
		ctx, cancel := context.WithCancelCause(c.x.effect)
		cancel(c.broken)
		return ctx
	}
	return c.x.effect
}

// Replaying reports whether the next command will be served from the log.
func (c *Context) Replaying() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.replaying()
}

func (c *Context) replaying() bool { return c.pos < len(c.log) }

// InboxCursor is the inbox sequence of the newest consumed message.
func (c *Context) InboxCursor() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inboxCursor
}

func (c *Context) stop() {
	c.k.detach(c)
	c.cancel()
	if c.subClose != nil {
		c.subClose()
	}
}

// Batching. A command run live does not commit its event at once: it joins c.pend, and pend is
// committed in one transaction, ahead of whatever that transaction writes itself, at the first
// point where something outside the execution could act on it:
//
//   - before a step runs (with the step's start: its intent is durable before its effect);
//   - when a decider, a step or the flow asks for Ctx (the door of every effect on the world);
//   - before a message is delivered to another execution (SendTo) and with a child's start;
//   - with a command that writes beside the log (a signal's cursor);
//   - before the execution waits (Receive with an empty inbox, a timer, a signal, another
//     execution's end): whoever reads the log while it waits finds everything it did;
//   - with the end of the execution or of its generation;
//   - when pend holds maxPend events.
//
// Between two of these points the flow only computes (its code is deterministic and reaches the
// world only through Ctx), so nobody can have seen a pending write: a crash before the commit
// leaves the log as it stood at the previous commit, a state the execution went through, and
// the replay makes the same commands again. Nothing acknowledges a pending write either: every
// acknowledgement (a 202, an ord, an SSE id) is of something read from the store, which holds
// committed writes only.
const maxPend = 256

// append writes events at the end of this generation's log: they join the pending writes,
// committed at the next point the batching rules name (c.mu held).
func (c *Context) append(evs ...store.NewEvent) error {
	if c.broken != nil {
		return c.broken
	}
	if len(c.pend) == 0 {
		c.pendCursor = c.inboxCursor
	}
	c.pend = append(c.pend, evs...)
	if len(c.pend) >= maxPend {
		return c.flush()
	}
	return nil
}

// flush commits the pending writes now (c.mu held).
func (c *Context) flush() error {
	return c.commit(nil)
}

// commit commits the pending writes and then evs in one transaction, with extra run in it after
// them (c.mu held). A failure leaves the generation broken: its pending writes are dropped and
// every later command answers the failure.
func (c *Context) commit(extra func(store.Tx) error, evs ...store.NewEvent) error {
	if c.broken != nil {
		return c.broken
	}
	if len(c.pend) == 0 && len(evs) == 0 && extra == nil {
		return nil
	}
	all := append(c.pend[:len(c.pend):len(c.pend)], evs...)
	var h int64
	err := c.k.st.Update(c.ctx, func(tx store.Tx) error {
		h = c.head
		if len(all) > 0 {
			var err error
			if h, err = tx.Append(logStream(c.id), c.gen, c.head, all...); err != nil {
				return err
			}
		}
		if extra != nil {
			return extra(tx)
		}
		return nil
	})
	if err != nil {
		c.pend, c.broken = nil, err
		return err
	}
	c.head, c.pend = h, nil
	return nil
}

// appendTx appends the pending writes and then evs inside tx, a transaction of someone else's
// (a child's start, the end of the generation), returning the new head; once tx has committed,
// committed must be told that head (c.mu held from appendTx to committed).
func (c *Context) appendTx(tx store.Tx, evs ...store.NewEvent) (int64, error) {
	all := append(c.pend[:len(c.pend):len(c.pend)], evs...)
	if len(all) == 0 {
		return c.head, nil
	}
	return tx.Append(logStream(c.id), c.gen, c.head, all...)
}

// committed records that a transaction appendTx took part in committed at head h (c.mu held).
func (c *Context) committed(h int64) { c.head, c.pend = h, nil }

// checkPending makes sure, before a decider runs, that the pending writes can still be committed
// where they belong: the store answers and the log's head is still the one they follow. When it
// is not so they are committed now, so that their failure stops the flow here, before the decider
// could act on them (c.mu held). A read costs far less than the commit it saves.
func (c *Context) checkPending() error {
	if len(c.pend) == 0 {
		return nil
	}
	if h, err := c.k.st.Head(c.ctx, logStream(c.id), c.gen); err == nil && h == c.head {
		return nil
	}
	return c.flush()
}

// durableCursor is the inbox cursor of the newest committed consumption (c.mu held).
func (c *Context) durableCursor() int64 {
	if len(c.pend) > 0 {
		return c.pendCursor
	}
	return c.inboxCursor
}

// markLive tells the kernel that the generation has stopped replaying: it runs a command live,
// runs a decider or a step again, or has returned.
func (c *Context) markLive() {
	if c.live != nil {
		c.live()
	}
}

func describe(ev store.Event) string {
	switch ev.Kind {
	case kindDecision:
		d, _ := decodeDecision(ev.Data)
		return "decision " + d.ID
	case kindStepStart:
		var s evStep
		_ = json.Unmarshal(ev.Data, &s)
		return "step " + s.ID
	case kindConsumed:
		return "receive"
	}
	return describeExt(ev)
}

// mismatch handles a run that does not match the log at c.pos. In fail mode it returns the
// divergence (and keeps returning it); in warn mode it reports it, stops replaying and returns
// nil so that the caller goes on live.
func (c *Context) mismatch(got string) error {
	want := "end of log"
	if c.pos < len(c.log) {
		want = describe(c.log[c.pos])
	}
	d := &loomtype.DivergenceError{Execution: c.id, Generation: c.gen, Index: c.pos, Want: want, Got: got}
	if c.k.opt.Divergence == DivergenceWarn {
		if c.k.opt.OnDivergence != nil {
			c.k.opt.OnDivergence(d)
		}
		c.k.log.Warn("kernel: replay diverged; going on live", "err", d)
		c.pos = len(c.log)
		return nil
	}
	c.diverged = d
	return d
}

func (c *Context) noteInner(stepID string) {
	if n := len(c.inner); n > 0 {
		c.inner[n-1] = append(c.inner[n-1], stepID)
	}
}

// Receive takes the next message from the inbox, waiting for one if none is there. Messages come
// in the order they were delivered, each once.
//
// Errors: a *loomtype.DivergenceError, a store error, or ErrStopped when the kernel stops.
//
//	msg, err := c.Receive()
func (c *Context) Receive() (Message, error) {
	c.mu.Lock()
	if c.diverged != nil {
		c.mu.Unlock()
		return Message{}, c.diverged
	}
	if err := c.frame(); err != nil {
		c.mu.Unlock()
		return Message{}, err
	}
	if c.replaying() {
		ev := c.log[c.pos]
		if ev.Kind == kindConsumed {
			m, err := c.consumedMessage(ev)
			if err != nil {
				c.mu.Unlock()
				return Message{}, err
			}
			c.pos++
			c.inboxCursor = m.Seq
			c.mu.Unlock()
			return m, nil
		}
		if err := c.mismatch("receive"); err != nil {
			c.mu.Unlock()
			return Message{}, err
		}
	}
	if c.subCh == nil {
		c.subCh, c.subClose = c.k.st.Subscribe(inboxStream(c.id))
	}
	sub := c.subCh
	c.mu.Unlock()
	parked := false
	for {
		msgs, err := c.Peek(1)
		if err != nil {
			return Message{}, err
		}
		if len(msgs) > 0 {
			m := msgs[0]
			b, _ := json.Marshal(evConsumed{Seq: m.Seq})
			c.mu.Lock()
			err := c.append(store.NewEvent{Kind: kindConsumed, Data: b})
			if err == nil {
				c.inboxCursor = m.Seq
			}
			c.mu.Unlock()
			if err != nil {
				return Message{}, c.stopErr(err)
			}
			return m, nil
		}
		c.mu.Lock()
		err = c.flush() // whoever reads the log while it waits finds everything it did
		c.mu.Unlock()
		if err != nil {
			return Message{}, c.stopErr(err)
		}
		if !parked {
			parked = true
			c.k.x.parked(c.id, "receive")
		}
		select {
		case <-sub:
		case <-c.x.requested:
			return Message{}, c.lockedCancelNow()
		case <-c.ctx.Done():
			return Message{}, ErrStopped
		}
	}
}

// consumedMessage is the message a consumed event of the log took: the copy a version 1 event
// holds, or the inbox entry at the position a version 2 event names. c.mu is held.
func (c *Context) consumedMessage(ev store.Event) (Message, error) {
	var m Message
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		return Message{}, fmt.Errorf("kernel: %s: consumed event: %w", c.id, err)
	}
	if m.Payload != nil {
		return m, nil // version 1: the message itself
	}
	for len(c.replayInbox) > 0 && c.replayInbox[0].Seq < m.Seq {
		c.replayInbox = c.replayInbox[1:]
	}
	if len(c.replayInbox) == 0 || c.replayInbox[0].Seq != m.Seq {
		// The messages a generation consumed are mostly consecutive in the inbox: read ahead, as
		// many as the log still has consumed events (so that nothing is held once it is
		// replayed), at most replayInboxAhead.
		n := 0
		for _, ev := range c.log[c.pos:] {
			if ev.Kind == kindConsumed {
				if n++; n == replayInboxAhead {
					break
				}
			}
		}
		evs, err := c.k.st.ReadForward(c.ctx, inboxStream(c.id), 0, m.Seq-1, max(n, 1))
		if err != nil {
			return Message{}, c.stopErr(err)
		}
		c.replayInbox = c.replayInbox[:0]
		for _, ev := range evs {
			in, err := decodeInbox(ev)
			if err != nil {
				return Message{}, fmt.Errorf("kernel: %s: inbox event %d: %w", c.id, ev.Seq, err)
			}
			c.replayInbox = append(c.replayInbox, in)
		}
	}
	if len(c.replayInbox) == 0 || c.replayInbox[0].Seq != m.Seq {
		c.replayInbox = nil
		return Message{}, fmt.Errorf("%w: %s: consumed event names inbox entry %d, which the inbox does not hold", ErrUnreadable, c.id, m.Seq)
	}
	in := c.replayInbox[0]
	c.replayInbox = c.replayInbox[1:]
	if len(c.replayInbox) == 0 {
		c.replayInbox = nil
	}
	return in, nil
}

// replayInboxAhead is how many inbox entries a replay reads at a time for the consumed events
// of version 2.
const replayInboxAhead = 64

func (c *Context) stopErr(err error) error {
	if c.ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
		return ErrStopped
	}
	return err
}

// Peek returns up to limit messages waiting in the inbox past the consumed cursor, without
// consuming them. It reads live state: a flow may use it only to raise a signal that it then
// records through Decide.
func (c *Context) Peek(limit int) ([]Message, error) {
	after := c.InboxCursor()
	evs, err := c.k.st.ReadForward(c.ctx, inboxStream(c.id), 0, after, limit)
	if err != nil {
		return nil, c.stopErr(err)
	}
	out := make([]Message, 0, len(evs))
	for _, ev := range evs {
		m, err := decodeInbox(ev)
		if err != nil {
			return nil, fmt.Errorf("kernel: %s: inbox event %d: %w", c.id, ev.Seq, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// WatchInbox returns a channel that receives a value after each delivery to this execution's
// inbox, and a function that ends the watch.
func (c *Context) WatchInbox() (<-chan struct{}, func()) {
	return c.k.st.Subscribe(inboxStream(c.id))
}

// ContinueAsNew returns the error a flow returns to continue as a new generation whose input is
// carry. The inbox cursor and the dedupe window cross into the new generation, so nothing is
// delivered twice.
//
//	return nil, c.ContinueAsNew(carry)
func (c *Context) ContinueAsNew(carry json.RawMessage) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.diverged != nil {
		return c.diverged
	}
	if err := c.frame(); err != nil {
		return err
	}
	if c.replaying() {
		if err := c.mismatch("continue-as-new"); err != nil {
			return err
		}
	}
	if !json.Valid(carry) {
		return fmt.Errorf("kernel: carry is not JSON")
	}
	return &continueAsNew{carry: carry}
}

// SenderKey is the dedupe identity of a message: envelope.SenderKey of the sender's tenant,
// actor and onBehalfOf and the messageID (spec/envelopes.md).
func SenderKey(sender loomtype.Identity, messageID string) string {
	return envelope.SenderKey(sender.Tenant, sender.Actor, sender.OnBehalfOf, messageID)
}

// Kernel returns the kernel running this execution, so a flow can start child executions from a
// step.
func (c *Context) Kernel() *Kernel { return c.k }
