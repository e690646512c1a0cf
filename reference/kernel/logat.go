package kernel

import (
	"fmt"

	"github.com/loomcheck/loomcheck/reference/store"
)

// LogAt returns the events at positions seqs (ascending) of generation gen of the execution's
// log, a generation before the running one: those are complete and never change, so a flow may
// carry a position instead of a copy of what it recorded there (journal version 5) and read it
// again in a later generation. A position the log does not hold is damage: the error matches
// ErrUnreadable.
//
// Errors: ErrUnreadable (wrapped) for gen not before the running generation or a position the
// log does not hold; store errors.
//
//	evs, err := c.LogAt(0, []int64{12, 15})
func (c *Context) LogAt(gen int64, seqs []int64) ([]LogEvent, error) {
	if gen < 0 || gen >= c.gen {
		return nil, fmt.Errorf("%w: %s: generation %d is not an earlier one", ErrUnreadable, c.id, gen)
	}
	for i, seq := range seqs {
		if seq < 1 || (i > 0 && seq <= seqs[i-1]) {
			return nil, fmt.Errorf("%w: %s: log position %d", ErrUnreadable, c.id, seq)
		}
	}
	out := make([]LogEvent, 0, len(seqs))
	for i := 0; i < len(seqs); {
		n := min(seqs[len(seqs)-1]-seqs[i]+1, store.MaxRead)
		evs, err := c.k.st.ReadForward(c.ctx, logStream(c.id), gen, seqs[i]-1, int(n))
		if err != nil {
			return nil, c.stopErr(err)
		}
		j := i
		for _, ev := range evs {
			if j == len(seqs) || ev.Seq > seqs[j] {
				break
			}
			if ev.Seq == seqs[j] {
				out = append(out, logEvent(ev))
				j++
			}
		}
		if j == i {
			return nil, fmt.Errorf("%w: %s: generation %d holds no event %d", ErrUnreadable, c.id, gen, seqs[i])
		}
		i = j
	}
	return out, nil
}
