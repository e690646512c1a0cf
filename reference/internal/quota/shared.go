package quota

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Namespace is the store namespace the shared counts live in, beside the partitions' own
// (store.PartitionNamespace): a kernel given to OpenShared is opened on the store's root viewed
// through it, fenced by the lease of the engine that writes.
const Namespace = "global/"

// The records of Shared, in the global namespace's record tables. Their names and shapes are
// on-disk: never change them without raising the version.
var (
	// slotTable holds, under "<kind>/<hex SHA-256 of the principal's key>", every slot the
	// principal holds of that kind.
	slotTable = kernel.NewTable[slotRecord]("quota.slots", 1)
	// epochTable holds, under a holder's name, the epoch its newest engine opened at.
	epochTable = kernel.NewTable[int64]("quota.epochs", 1)
)

type slotRecord struct {
	Slots []heldSlot `json:"slots"`
}

type heldSlot struct {
	ID      string `json:"id"`
	Holder  string `json:"holder"`
	Epoch   int64  `json:"epoch"`
	Expires int64  `json:"expires,omitempty"`
}

// ErrHolder: OpenShared was given an empty holder name.
var ErrHolder = errors.New("quota: empty holder name")

// Shared counts slots in the store, exact across every engine of the store: each admission reads
// and rewrites the principal's record in one transaction, which the store serializes with any
// other on the same record. Admissions and releases commit relaxed (kernel.UpdateRelaxed: no
// wait for the disk where the store can): a machine crash may lose the newest of them, and what
// it loses is slots of engines that the crash ended, which the next epoch frees anyway. The epoch
// itself is raised by a commit that waits for the disk. Safe for concurrent use.
type Shared struct {
	k      *kernel.Kernel
	holder string
	epoch  int64
}

var _ Counter = (*Shared)(nil)

// OpenShared opens the counts kept in k's store (a kernel on the global namespace of the store)
// for an engine writing as holder (its partition's lease name; one engine at a time per holder).
// It raises holder's epoch, so that every slot an earlier engine of holder took stops counting:
// that engine is gone, and the next admission of each principal drops its slots.
//
// Errors: ErrHolder, kernel table errors, store errors (store.ErrFenced once the lease is lost).
//
//	q, err := quota.OpenShared(ctx, globalKernel, "engine")
func OpenShared(ctx context.Context, k *kernel.Kernel, holder string) (*Shared, error) {
	if holder == "" {
		return nil, ErrHolder
	}
	for _, t := range []interface {
		Open(context.Context, *kernel.Kernel) error
	}{slotTable, epochTable} {
		if err := t.Open(ctx, k); err != nil {
			return nil, err
		}
	}
	s := &Shared{k: k, holder: holder}
	err := k.Update(ctx, func(tx *kernel.Tx) error {
		e, _, err := epochTable.Get(ctx, tx, holder)
		if err != nil {
			return err
		}
		s.epoch = e + 1
		return epochTable.Put(tx, holder, s.epoch)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Epoch is the epoch this engine took its holder's slots at.
func (s *Shared) Epoch() int64 { return s.epoch }

func recordKey(kind Kind, who loomtype.Identity) string {
	sum := sha256.Sum256([]byte(who.Key()))
	return string(kind) + "/" + hex.EncodeToString(sum[:])
}

// live returns the slots of rec that still count at now: neither expired nor taken by an engine
// of a holder that has opened again since. changed reports whether any was dropped.
func (s *Shared) live(ctx context.Context, tx *kernel.Tx, rec slotRecord, now int64) (out []heldSlot, changed bool, err error) {
	epochs := map[string]int64{s.holder: s.epoch}
	for _, h := range rec.Slots {
		e, ok := epochs[h.Holder]
		if !ok {
			if e, _, err = epochTable.Get(ctx, tx, h.Holder); err != nil {
				return nil, false, err
			}
			epochs[h.Holder] = e
		}
		if h.Epoch < e || h.Expires != 0 && h.Expires <= now {
			changed = true
			continue
		}
		out = append(out, h)
	}
	return out, changed, nil
}

// put stores slots as key's record, or deletes the record when none is left.
func put(tx *kernel.Tx, key string, slots []heldSlot) error {
	if len(slots) == 0 {
		return slotTable.Delete(tx, key)
	}
	return slotTable.Put(tx, key, slotRecord{Slots: slots})
}

// Admit is Counter.Admit: one transaction that reads who's record, drops the slots that no longer
// count, and adds s when fewer than max are left.
func (s *Shared) Admit(ctx context.Context, sl Slot, max int, now int64) error {
	key := recordKey(sl.Kind, sl.Who)
	var refused error
	err := s.k.UpdateRelaxed(ctx, func(tx *kernel.Tx) error {
		refused = nil
		rec, _, err := slotTable.Get(ctx, tx, key)
		if err != nil {
			return err
		}
		held, changed, err := s.live(ctx, tx, rec, now)
		if err != nil {
			return err
		}
		switch {
		case slices.ContainsFunc(held, func(h heldSlot) bool { return h.ID == sl.ID }):
		case len(held) >= max:
			refused = &Refusal{Kind: sl.Kind, Max: max}
		default:
			held = append(held, heldSlot{ID: sl.ID, Holder: s.holder, Epoch: s.epoch, Expires: sl.Expires})
			changed = true
		}
		if !changed {
			return nil
		}
		return put(tx, key, held)
	})
	if err != nil {
		return err
	}
	return refused
}

// Release is Counter.Release.
func (s *Shared) Release(ctx context.Context, sl Slot) error {
	key := recordKey(sl.Kind, sl.Who)
	return s.k.UpdateRelaxed(ctx, func(tx *kernel.Tx) error {
		rec, ok, err := slotTable.Get(ctx, tx, key)
		if err != nil || !ok {
			return err
		}
		n := len(rec.Slots)
		rec.Slots = slices.DeleteFunc(rec.Slots, func(h heldSlot) bool { return h.ID == sl.ID })
		if len(rec.Slots) == n {
			return nil
		}
		return put(tx, key, rec.Slots)
	})
}

// Held is Counter.Held, read in a transaction of its own (which writes nothing).
func (s *Shared) Held(ctx context.Context, kind Kind, who loomtype.Identity, now int64) (int, error) {
	n := 0
	err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		rec, _, err := slotTable.Get(ctx, tx, recordKey(kind, who))
		if err != nil {
			return err
		}
		held, _, err := s.live(ctx, tx, rec, now)
		n = len(held)
		return err
	})
	return n, err
}
