package kernel

import (
	"encoding/json"
)

// MaxSafePointMessages bounds how many waiting messages one safe point takes.
const MaxSafePointMessages = 64

type evSafePoint struct {
	ID       string    `json:"id"`
	Messages []Message `json:"messages"`
}

// SafePoint is a point between two effects (between tool calls, between turns) where the kernel
// may intervene: a pending cancel stops the flow here (a *CanceledError), and messages waiting in
// the inbox (steering: up to MaxSafePointMessages, oldest first) are taken and returned, consumed
// as Receive consumes them. A safe point that takes messages journals them under id, and a replay
// returns the same ones; one that takes none journals nothing, so the safe points a flow passes
// cost nothing while there is nothing to apply.
//
// Errors: a *CanceledError, ErrStopped or a store error.
//
// Concurrency: the flow's goroutine only.
//
//	steer, err := c.SafePoint("turn#2:tool:1")
//	if err != nil { return nil, err } // cancelled
//	for _, m := range steer { history = append(history, m.Payload) }
func (c *Context) SafePoint(id string) ([]Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.diverged != nil {
		return nil, c.diverged
	}
	if err := c.frame(); err != nil {
		return nil, err
	}
	if c.replaying() {
		ev := c.log[c.pos]
		if ev.Kind != kindSafePoint || cmdID(ev.Data) != id {
			// This safe point took nothing when it ran live: nothing was journaled for it.
			return nil, nil
		}
		var sp evSafePoint
		if err := json.Unmarshal(ev.Data, &sp); err != nil {
			return nil, err
		}
		c.pos++
		if n := len(sp.Messages); n > 0 {
			c.inboxCursor = sp.Messages[n-1].Seq
		}
		return sp.Messages, nil
	}
	c.mu.Unlock()
	msgs, err := c.Peek(MaxSafePointMessages)
	c.mu.Lock()
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	if err := c.record(kindSafePoint, evSafePoint{ID: id, Messages: msgs}, nil); err != nil {
		return nil, err
	}
	c.inboxCursor = msgs[len(msgs)-1].Seq
	return msgs, nil
}
