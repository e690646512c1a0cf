package kernel

import "fmt"

// InboxAt returns the messages at the inbox positions seqs, in their order. Positions at or below
// the consumed cursor name messages the execution took, which the inbox keeps unchanged, so a flow
// may record a position instead of a copy of what it read there and read it again in a replay or
// a later generation. A position the inbox does not hold is damage: the error matches
// ErrUnreadable.
//
//	msgs, err := c.InboxAt([]int64{3, 4, 7})
func (c *Context) InboxAt(seqs []int64) ([]Message, error) {
	out := make([]Message, 0, len(seqs))
	for i := 0; i < len(seqs); {
		// One read for each run of consecutive positions.
		n := 1
		for i+n < len(seqs) && seqs[i+n] == seqs[i]+int64(n) {
			n++
		}
		if seqs[i] < 1 {
			return nil, fmt.Errorf("%w: %s: inbox position %d", ErrUnreadable, c.id, seqs[i])
		}
		evs, err := c.k.st.ReadForward(c.ctx, inboxStream(c.id), 0, seqs[i]-1, n)
		if err != nil {
			return nil, c.stopErr(err)
		}
		for j := range n {
			if j >= len(evs) || evs[j].Seq != seqs[i]+int64(j) {
				return nil, fmt.Errorf("%w: %s: the inbox does not hold entry %d", ErrUnreadable, c.id, seqs[i]+int64(j))
			}
			m, err := decodeInbox(evs[j])
			if err != nil {
				return nil, fmt.Errorf("%w: %s: inbox event %d: %v", ErrUnreadable, c.id, evs[j].Seq, err)
			}
			out = append(out, m)
		}
		i += n
	}
	return out, nil
}
