package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
	"github.com/loomcheck/loomcheck/reference/store/storetest"
)

// viewAndStore is a namespaced view whose Close closes the store under it too, so that the
// shared suite can open and close it as a backend's handle.
type viewAndStore struct {
	store.Store
	raw store.Store
}

func (v viewAndStore) Close() error {
	err := v.Store.Close()
	return errors.Join(err, v.raw.Close())
}

// UpdateRelaxed and LossEpoch are the view's (it passes the store's relaxed commits through),
// so that the suite's cases of store.Relaxed run on the view.
func (v viewAndStore) UpdateRelaxed(ctx context.Context, fn func(store.Tx) error) error {
	return v.Store.(store.Relaxed).UpdateRelaxed(ctx, fn)
}

func (v viewAndStore) LossEpoch() int64 { return v.Store.(store.Relaxed).LossEpoch() }

// TestNamespaceIsAStore runs the shared store suite on a partition's view of a SQLite store in
// which another partition already keeps streams, keys and remembered ids: every rule of a store
// holds within the view, and nothing of the neighbour shows through (a listing, a head, a
// remembered key).
func TestNamespaceIsAStore(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Fresh: func(t *testing.T) func(t *testing.T) store.Store {
			path := filepath.Join(t.TempDir(), "loom.db")
			raw, err := sqlite.Open(context.Background(), path, sqlite.Options{})
			require.NoError(t, err)
			neighbour(t, raw)
			require.NoError(t, raw.Close())
			return func(t *testing.T) store.Store {
				raw, err := sqlite.Open(context.Background(), path, sqlite.Options{})
				require.NoError(t, err)
				v, err := store.Namespace(raw, store.PartitionNamespace(1))
				require.NoError(t, err)
				return viewAndStore{Store: v, raw: raw}
			}
		},
	})
}

// neighbour fills partition 10 (whose namespace begins as partition 1's key "0/..." would)
// and the store outside every partition.
func neighbour(t *testing.T, raw store.Store) {
	for _, ns := range []string{store.PartitionNamespace(10), ""} {
		require.NoError(t, raw.Update(context.Background(), func(tx store.Tx) error {
			for _, s := range []string{"s", "x/exec-1", "0/x"} {
				if _, err := tx.Append(ns+s, 0, -1, store.NewEvent{Kind: "k", Data: []byte(`{}`)}); err != nil {
					return err
				}
			}
			if err := tx.PutMeta(ns+"k", []byte("v")); err != nil {
				return err
			}
			_, err := tx.Remember(ns+"scope", "m1", 10)
			return err
		}))
	}
}

// TestNamespacesShareNothing: two partitions of one store, each writing the same names, see
// only their own events, keys, heads, remembered ids and wake-ups.
func TestNamespacesShareNothing(t *testing.T) {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer raw.Close()
	p1, err := store.Namespace(raw, store.PartitionNamespace(1))
	require.NoError(t, err)
	p2, err := store.Namespace(raw, store.PartitionNamespace(2))
	require.NoError(t, err)
	wake2, stop := p2.Subscribe("s")
	defer stop()

	var fresh1, fresh2 bool
	require.NoError(t, p1.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "one", Data: []byte(`1`)}, store.NewEvent{Kind: "two", Data: []byte(`2`)}); err != nil {
			return err
		}
		fresh1, err = tx.Remember("scope", "m", 4)
		if err != nil {
			return err
		}
		return tx.PutMeta("k", []byte("p1"))
	}))
	select {
	case <-wake2:
		t.Fatal("partition 2's subscriber woke for partition 1's append")
	default:
	}
	require.NoError(t, p2.Update(ctx, func(tx store.Tx) error {
		head, err := tx.Head("s", 0)
		if err != nil || head != 0 {
			return errors.Join(err, errors.New("partition 2 sees partition 1's head"))
		}
		if _, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "own", Data: []byte(`3`)}); err != nil {
			return err
		}
		fresh2, err = tx.Remember("scope", "m", 4)
		return err
	}))
	assert.True(t, fresh1)
	assert.True(t, fresh2, "a remembered id of partition 1 counted in partition 2")

	evs, err := p1.ReadForward(ctx, "s", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, "s", evs[0].Stream)
	assert.Equal(t, []string{"one", "two"}, []string{evs[0].Kind, evs[1].Kind})
	evs, err = p2.ReadBackward(ctx, "s", 0, 100, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, "own", evs[0].Kind)

	kvs, err := p1.MetaPrefix(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []store.KV{{Key: "k", Val: []byte("p1")}}, kvs)
	kvs, err = p2.MetaPrefix(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, kvs)
	_, ok, err := p2.Meta(ctx, "k")
	require.NoError(t, err)
	assert.False(t, ok)

	all, err := raw.MetaPrefix(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []store.KV{{Key: "partition/1/k", Val: []byte("p1")}}, all, "the view's keys in the store under it")

	require.NoError(t, p1.Close())
	_, err = p1.Head(ctx, "s", 0)
	assert.ErrorIs(t, err, store.ErrClosed)
	evs, err = p1.ReadForward(ctx, "s", 0, 0, 10)
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.Empty(t, evs)
	evs, err = p1.ReadBackward(ctx, "s", 0, 100, 10)
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.Empty(t, evs)
	_, _, err = p1.Meta(ctx, "k")
	assert.ErrorIs(t, err, store.ErrClosed)
	kvs, err = p1.MetaPrefix(ctx, "")
	assert.ErrorIs(t, err, store.ErrClosed)
	assert.Empty(t, kvs)
	assert.ErrorIs(t, p1.Update(ctx, func(store.Tx) error { return nil }), store.ErrClosed)
	h, err := p2.Head(ctx, "s", 0)
	require.NoError(t, err, "closing one view leaves the store and the other view open")
	assert.Equal(t, int64(1), h)
}

func TestNamespaceRefusesABadName(t *testing.T) {
	for _, ns := range []string{"", "partition/1", "/x"[:1] + "x"} {
		_, err := store.Namespace(nil, ns)
		assert.ErrorIs(t, err, store.ErrNamespace, "%q", ns)
	}
	assert.Equal(t, "partition/0/", store.PartitionNamespace(0))
}
