package kernel

import (
	"context"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Auxiliary streams inside the kernel's transaction: a layer that keeps a log beside an execution
// (a session's frame log) and a record that says how far that log has got writes both in one
// Update, so that they commit together or not at all, and not at all once the kernel's store is
// fenced. The stream is the one AppendAux, ReadAux and AuxHead name: "<name>/<id>" in the store.

// AppendAux is Kernel.AppendAux inside tx: it appends evs to the auxiliary stream name of
// execution id, with the same expect rule (>= 0: the stream's head must equal it, else
// ErrConflict; -1: whatever the head), and returns the Seq of the last event appended (the head
// when evs is empty).
//
// Errors: ErrAuxName, ErrConflict, store errors (store.ErrFenced once a newer lease exists).
//
//	err := k.Update(ctx, func(tx *kernel.Tx) error {
//		if _, err := tx.AppendAux("c1", "frames", head, evs...); err != nil { return err }
//		return positions.Put(tx, "c1", pos)
//	})
func (x *Tx) AppendAux(id, name string, expect int64, evs ...AuxEvent) (int64, error) {
	stream, err := auxStream(name, id)
	if err != nil {
		return 0, err
	}
	if len(evs) == 0 {
		return x.tx.Head(stream, 0)
	}
	nevs := make([]store.NewEvent, len(evs))
	for i, e := range evs {
		nevs[i] = store.NewEvent{Kind: e.Kind, Data: e.Data}
	}
	return x.tx.Append(stream, 0, expect, nevs...)
}

// ReadAuxBackward returns up to limit events (at most MaxRead) of execution id's auxiliary
// stream name with Seq < before, newest first: the tail of a long stream is read without reading
// it from its start.
//
// Errors: ErrAuxName, store errors.
//
//	evs, err := k.ReadAuxBackward(ctx, "c1", "frames", head+1, kernel.MaxRead)
func (k *Kernel) ReadAuxBackward(ctx context.Context, id, name string, before int64, limit int) ([]AuxEvent, error) {
	stream, err := auxStream(name, id)
	if err != nil {
		return nil, err
	}
	evs, err := k.st.ReadBackward(ctx, stream, 0, before, limit)
	if err != nil {
		return nil, err
	}
	out := make([]AuxEvent, len(evs))
	for i, ev := range evs {
		out[i] = AuxEvent{Seq: ev.Seq, Kind: ev.Kind, Data: ev.Data, Time: ev.Time}
	}
	return out, nil
}
