package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/store"
)

// InboxAt returns the messages at the inbox positions seqs, in their order. Positions at or below
// the consumed cursor name messages the execution took, which the inbox keeps unchanged, so a flow
// may record a position instead of a copy of what it read there and read it again in a replay or
// a later generation. A position the inbox does not hold is damage: the error matches
// ErrUnreadable.
//
//	msgs, err := c.InboxAt([]int64{3, 4, 7})
func (c *Context) InboxAt(seqs []int64) ([]Message, error) {
	out, err := inboxAt(c.ctx, c.k.st, c.id, seqs)
	if err != nil && !errors.Is(err, ErrUnreadable) {
		return nil, c.stopErr(err)
	}
	return out, err
}

// InboxAt is Context.InboxAt for a reader outside the execution: the messages at the inbox
// positions seqs of execution id, in their order. A record that names a message by its position
// is read back through it.
//
// Errors: ErrUnreadable (wrapped) for a position the inbox does not hold or an entry that cannot
// be decoded; store errors, ctx's.
//
//	msgs, err := k.InboxAt(ctx, "c1", []int64{3})
func (k *Kernel) InboxAt(ctx context.Context, id string, seqs []int64) ([]Message, error) {
	return inboxAt(ctx, k.st, id, seqs)
}

// inboxAt reads the inbox positions seqs of execution id, one read for each run of consecutive
// positions.
func inboxAt(ctx context.Context, st store.Store, id string, seqs []int64) ([]Message, error) {
	out := make([]Message, 0, len(seqs))
	for i := 0; i < len(seqs); {
		n := 1
		for i+n < len(seqs) && seqs[i+n] == seqs[i]+int64(n) {
			n++
		}
		if seqs[i] < 1 {
			return nil, fmt.Errorf("%w: %s: inbox position %d", ErrUnreadable, id, seqs[i])
		}
		evs, err := st.ReadForward(ctx, inboxStream(id), 0, seqs[i]-1, n)
		if err != nil {
			return nil, err
		}
		for j := range n {
			if j >= len(evs) || evs[j].Seq != seqs[i]+int64(j) {
				return nil, fmt.Errorf("%w: %s: the inbox does not hold entry %d", ErrUnreadable, id, seqs[i]+int64(j))
			}
			m, err := decodeInbox(evs[j])
			if err != nil {
				return nil, fmt.Errorf("%w: %s: inbox event %d: %v", ErrUnreadable, id, evs[j].Seq, err)
			}
			out = append(out, m)
		}
		i += n
	}
	return out, nil
}
