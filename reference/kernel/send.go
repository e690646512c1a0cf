package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

type evSent struct {
	ID        string `json:"id"` // target + "/" + messageID
	To        string `json:"to"`
	MessageID string `json:"messageId"`
	Delivered bool   `json:"delivered,omitempty"`
	Refused   string `json:"refused,omitempty"` // "not-found" or "closed"
}

// ExecutionSender is the sender identity of a message one execution sends another (SendTo):
// the sending execution's tenant and, as actor, "execution:" and its id.
//
//	m.Sender == kernel.ExecutionSender("acme", "run-7")
func ExecutionSender(tenant, id string) loomtype.Identity {
	return loomtype.Identity{Tenant: tenant, Actor: "execution:" + id}
}

// SendTo delivers payload to the inbox of execution target, as ExecutionSender of this
// execution's principal's tenant and id. The send is journaled on this side, so a replay does not
// send again; and it is deduplicated on the receiver by (sender, messageID) as Kernel.Send is, so
// a send a crash interrupted before it was journaled is not delivered twice either (and is
// still a send, not a refusal, when the target has ended since). A target that does not exist or
// has ended is an outcome, journaled like a delivery: a replay answers the same refusal.
//
// Errors: loomtype.ErrNotFound or loomtype.ErrClosed (the target refused, journaled), a
// *CanceledError, a *loomtype.DivergenceError, ErrStopped or a store error.
//
// Concurrency: the flow's goroutine only.
//
//	if err := c.SendTo("thread-9", "ask#1", payload); err != nil { return nil, err }
func (c *Context) SendTo(target, messageID string, payload json.RawMessage) error {
	id := target + "/" + messageID
	c.mu.Lock()
	data, ok, err := c.replayCommand(kindSent, id)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if ok {
		var ev evSent
		_ = json.Unmarshal(data, &ev)
		return refusal(ev.Refused)
	}
	// The delivery is an effect on the world: what this execution did before it is durable
	// first.
	c.mu.Lock()
	err = c.flush()
	c.mu.Unlock()
	if err != nil {
		return c.stopErr(err)
	}
	ev := evSent{ID: id, To: target, MessageID: messageID}
	delivered, err := c.k.deliver(c.ctx, target, ExecutionSender(c.principal.Tenant, c.id), messageID, payload)
	switch {
	case errors.Is(err, loomtype.ErrNotFound):
		ev.Refused = "not-found"
	case errors.Is(err, loomtype.ErrClosed) && !errors.Is(err, loomtype.ErrStoreClosed):
		ev.Refused = "closed"
	case err != nil:
		return c.stopErr(err)
	}
	ev.Delivered = delivered
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.record(kindSent, ev, nil); err != nil {
		return err
	}
	return refusal(ev.Refused)
}

func refusal(r string) error {
	switch r {
	case "not-found":
		return loomtype.ErrNotFound
	case "closed":
		return loomtype.ErrClosed
	}
	return nil
}

// deliver is Send for SendTo: a message whose key the target remembers was delivered before,
// whatever the target's state now, so it is reported as a duplicate rather than refused.
func (k *Kernel) deliver(ctx context.Context, id string, sender loomtype.Identity, messageID string, payload json.RawMessage) (bool, error) {
	k.need(ctx, id)
	if _, err := k.Info(ctx, id); err != nil {
		return false, err
	}
	key := SenderKey(sender, messageID)
	delivered := false
	err := k.st.Update(ctx, func(tx store.Tx) error {
		v, ok, err := tx.Meta(metaKey(id))
		if err != nil {
			return err
		}
		if !ok {
			return loomtype.ErrNotFound
		}
		fresh, err := tx.Remember(senderDedupeScope(id, sender), key, k.opt.DedupeWindow)
		if err != nil || !fresh {
			return err
		}
		var in Info
		if err := json.Unmarshal(v, &in); err != nil {
			return fmt.Errorf("kernel: execution record %s: %w", id, err)
		}
		if in.State != StateOpen {
			return loomtype.ErrClosed // the transaction, and so the key, is not kept
		}
		_, err = tx.Append(inboxStream(id), 0, -1, store.NewEvent{Kind: kindMessage, Data: encodeInbox(sender, messageID, payload)})
		delivered = err == nil
		return err
	})
	return delivered, err
}
