package kernel_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store"
)

// TestAuxAppendCommitsWithTheTableWrite: an auxiliary append and a table write in one Update
// commit together; an expected head that does not match keeps neither; the stream reads back
// forward and backward, and is the store's "<name>/<id>" stream.
func TestAuxAppendCommitsWithTheTableWrite(t *testing.T) {
	ctx := context.Background()
	k, st := openTables(t, nil)
	tbl := kernel.NewTable[tableRec]("auxpos", 1)
	require.NoError(t, tbl.Open(ctx, k))
	ev := func(s string) kernel.AuxEvent {
		return kernel.AuxEvent{Kind: "f", Data: json.RawMessage(`"` + s + `"`)}
	}

	var last int64
	require.NoError(t, k.Update(ctx, func(tx *kernel.Tx) error {
		var err error
		if last, err = tx.AppendAux("c1", "frames", 0, ev("a"), ev("b")); err != nil {
			return err
		}
		return tbl.Put(tx, "c1", tableRec{"pos", 2})
	}))
	require.Equal(t, int64(2), last)

	err := k.Update(ctx, func(tx *kernel.Tx) error {
		if err := tbl.Put(tx, "c1", tableRec{"pos", 9}); err != nil {
			return err
		}
		_, err := tx.AppendAux("c1", "frames", 1, ev("c"))
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)
	r, ok, err := tbl.Get(ctx, k, "c1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, r.Count, "the table write of a refused append is not kept")

	require.NoError(t, k.Update(ctx, func(tx *kernel.Tx) error {
		h, err := tx.AppendAux("c1", "frames", -1)
		require.Equal(t, int64(2), h, "an empty append answers the head")
		return err
	}))

	back, err := k.ReadAuxBackward(ctx, "c1", "frames", 3, kernel.MaxRead)
	require.NoError(t, err)
	require.Len(t, back, 2)
	require.Equal(t, []int64{2, 1}, []int64{back[0].Seq, back[1].Seq})
	require.JSONEq(t, `"b"`, string(back[0].Data))
	raw, err := st.ReadForward(ctx, "frames/c1", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, raw, 2, "the auxiliary stream is the store's frames/<id>")

	_, err = k.ReadAuxBackward(ctx, "c1", "x", 3, 1)
	require.ErrorIs(t, err, kernel.ErrAuxName)
	err = k.Update(ctx, func(tx *kernel.Tx) error { _, err := tx.AppendAux("c1", "a/b", -1, ev("z")); return err })
	require.ErrorIs(t, err, kernel.ErrAuxName)
}

// TestAuxAppendUnderAStaleLeaseIsFenced: once a newer grant of the kernel's lease exists, an
// auxiliary append inside Update is refused with store.ErrFenced and keeps nothing.
func TestAuxAppendUnderAStaleLeaseIsFenced(t *testing.T) {
	ctx := context.Background()
	var ls store.Leases
	k, st := openTables(t, func(st store.Store) store.Store {
		ls = st.(store.Leases)
		l, err := ls.Acquire(ctx, "engine", "node-1", "", time.Minute)
		require.NoError(t, err)
		return ls.Fence(l)
	})
	_, err := ls.Acquire(ctx, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	err = k.Update(ctx, func(tx *kernel.Tx) error {
		_, err := tx.AppendAux("c1", "frames", 0, kernel.AuxEvent{Kind: "f", Data: json.RawMessage(`1`)})
		return err
	})
	require.ErrorIs(t, err, store.ErrFenced)
	h, err := st.Head(ctx, "frames/c1", 0)
	require.NoError(t, err)
	require.Zero(t, h)
}
