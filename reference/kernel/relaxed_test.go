package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// plainStore is a store that offers no capability but store.Store's.
type plainStore struct{ store.Store }

// Kernel.UpdateRelaxed is Update's transaction, committed relaxed when the store can: its records
// are read back, a stale lease fences it, and the kernel's loss epoch is its store's. Over a store
// without relaxed commits it is Update, and the loss epoch is 0.
func TestUpdateRelaxedIsAFencedUpdate(t *testing.T) {
	ctx := context.Background()
	var ls store.Leases
	k, st := openTables(t, func(st store.Store) store.Store {
		ls = st.(store.Leases)
		l, err := ls.Acquire(ctx, "engine", "node-1", "", time.Minute)
		require.NoError(t, err)
		return ls.Fence(l)
	})
	tbl := kernel.NewTable[tableRec]("things", 1)
	require.NoError(t, tbl.Open(ctx, k))
	require.NoError(t, k.UpdateRelaxed(ctx, func(tx *kernel.Tx) error { return tbl.Put(tx, "a", tableRec{"a", 1}) }))
	got, ok, err := tbl.Get(ctx, k, "a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tableRec{"a", 1}, got)
	require.Equal(t, st.(*sqlite.SQLite).LossEpoch(), k.LossEpoch())

	_, err = ls.Acquire(ctx, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	err = k.UpdateRelaxed(ctx, func(tx *kernel.Tx) error { return tbl.Put(tx, "b", tableRec{"b", 2}) })
	require.ErrorIs(t, err, store.ErrFenced)
	_, ok, err = tbl.Get(ctx, k, "b")
	require.NoError(t, err)
	require.False(t, ok, "nothing of the fenced write is kept")

	plain, _ := openTables(t, func(st store.Store) store.Store { return plainStore{st} })
	require.NoError(t, tbl.Open(ctx, plain))
	require.NoError(t, plain.UpdateRelaxed(ctx, func(tx *kernel.Tx) error { return tbl.Put(tx, "c", tableRec{"c", 3}) }))
	_, ok, err = tbl.Get(ctx, plain, "c")
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, plain.LossEpoch())
}
