package conversation

import (
	"context"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// pending is what a history read leaves to fill in once its scan is done: the entries whose
// records name an inbox entry (version 4) or a model response (version 5), and the responses the
// scan passed on its way, which most replies name (the response is committed with its reply).
type pending struct {
	in   []record.Pending
	out  []record.PendingOut
	seen map[loomtype.Cursor]kernel.LogEvent
}

// pass keeps ev when it is a model response.
func (p *pending) pass(ev kernel.LogEvent) {
	if !record.IsResponse(ev) {
		return
	}
	if p.seen == nil {
		p.seen = map[loomtype.Cursor]kernel.LogEvent{}
	}
	p.seen[loomtype.Cursor{Gen: ev.Gen, Seq: ev.Seq}] = ev
}

// note notes what the record of ev, the entry at index at, leaves to other events.
func (p *pending) note(ev kernel.LogEvent, at int, refs record.Refs) {
	if refs.In != nil {
		p.in = append(p.in, record.Pending{At: at, Ref: *refs.In})
	}
	if refs.Out != nil {
		p.out = append(p.out, record.PendingOut{At: at, Gen: ev.Gen, Ref: *refs.Out})
	}
}

// resolve fills in the entries p names: from conversation id's inbox (record.Resolve) and from
// the responses its log holds, the scan's own first (record.ResolveOut).
func (cv *Conversations) resolve(ctx context.Context, id string, out []loomtype.Entry, p *pending) error {
	k := cv.kernel()
	err := record.Resolve(func(seqs []int64) ([]kernel.Message, error) { return k.InboxAt(ctx, id, seqs) }, out, p.in)
	if err != nil || len(p.out) == 0 {
		return err
	}
	m, err := cv.meta(ctx, id)
	if err != nil {
		return err
	}
	if m.mode != ModeOwner {
		return fmt.Errorf("%w: %w: %s: a reply names its response outside owner mode", kernel.ErrUnreadable, record.ErrOutRef, id)
	}
	read := func(gen, seq int64) (kernel.LogEvent, bool, error) {
		if ev, ok := p.seen[loomtype.Cursor{Gen: gen, Seq: seq}]; ok {
			return ev, true, nil
		}
		evs, err := k.ReadLog(ctx, id, gen, seq-1, 1)
		if err != nil || len(evs) == 0 || evs[0].Seq != seq {
			return kernel.LogEvent{}, false, err
		}
		return evs[0], true, nil
	}
	return record.ResolveOut(read, m.owner, out, p.out)
}
