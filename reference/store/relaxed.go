package store

import (
	"context"
	"errors"
)

// Relaxed is a store that can commit without waiting for the disk.
//
// A relaxed commit is handed to the operating system before UpdateRelaxed returns: a crash of
// the process keeps it. It does not wait for the disk, so a crash of the machine (a power loss,
// a kernel panic) may lose it, together with every relaxed commit after the newest commit that
// did wait; it never loses a commit that waited, nor anything committed before one. Commits stay
// in order: what a relaxed commit saw is never lost while it stays.
//
// A store records every open at which relaxed commits may have been lost (the machine restarted
// and the store was not closed cleanly): LossEpoch counts them, and the count is durable. A
// caller that hands out something on the strength of a relaxed commit keeps, in a commit that
// waited, how far it may have gone, and compares the loss epoch it wrote beside it with the
// store's when it reads it back.
//
// Everything else is Update's: fn runs in one write transaction, whole and apart from the
// Updates it may share a commit with, and subscribers are woken after the commit. A fenced view
// fences a relaxed commit as it fences any other.
type Relaxed interface {
	// UpdateRelaxed is Update committing without waiting for the disk.
	UpdateRelaxed(ctx context.Context, fn func(Tx) error) error
	// LossEpoch is how many times the store was opened after relaxed commits may have been lost.
	LossEpoch() int64
}

// UpdateRelaxed runs fn as a relaxed commit when st offers one (Relaxed), and as an ordinary
// Update otherwise: a store without the capability waits for the disk every time, which keeps
// more than asked.
//
//	err := store.UpdateRelaxed(st, ctx, func(tx store.Tx) error { _, err := tx.Append(s, 0, h, ev); return err })
func UpdateRelaxed(st Store, ctx context.Context, fn func(Tx) error) error {
	if r, ok := st.(Relaxed); ok {
		return r.UpdateRelaxed(ctx, fn)
	}
	return st.Update(ctx, fn)
}

// LossEpoch is st's loss epoch (Relaxed), 0 for a store without relaxed commits: it never
// loses one.
//
//	if rec.Epoch < store.LossEpoch(st) { /* written before a possible loss */ }
func LossEpoch(st Store) int64 {
	if r, ok := st.(Relaxed); ok {
		return r.LossEpoch()
	}
	return 0
}

// RelaxedSync is a Relaxed store that can make its relaxed commits durable apart from any commit.
//
// SyncRelaxed returns once every relaxed commit that returned before it was called is as durable
// as a commit that waited for the disk: a crash of the machine after it no longer loses them. It
// does not hold up commits meanwhile, so a relaxed commit made while it runs may be made durable
// too, or not (it is then lost or kept whole, as any relaxed commit). A caller that needs
// something to survive the machine without making every commit of its own wait writes it relaxed,
// then calls SyncRelaxed, and counts on it only once SyncRelaxed has returned nil.
type RelaxedSync interface {
	Relaxed
	// SyncRelaxed makes the relaxed commits made before it durable, without holding up commits.
	SyncRelaxed(ctx context.Context) error
}

// ErrNoSync is what SyncRelaxed answers for a store with relaxed commits and no sync of them
// apart from a commit: the caller makes a commit that waits instead.
var ErrNoSync = errors.New("store: relaxed commits cannot be synced apart from a commit")

// SyncRelaxed makes st's relaxed commits made before it durable (RelaxedSync). A store without
// relaxed commits has nothing to sync (nil); one with relaxed commits and no sync apart answers
// ErrNoSync.
//
//	if err := store.SyncRelaxed(st, ctx); err == nil { /* every relaxed commit before it is durable */ }
func SyncRelaxed(st Store, ctx context.Context) error {
	if r, ok := st.(RelaxedSync); ok {
		return r.SyncRelaxed(ctx)
	}
	if _, ok := st.(Relaxed); ok {
		return ErrNoSync
	}
	return ctx.Err()
}
