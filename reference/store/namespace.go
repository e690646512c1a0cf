package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// ErrNamespace: a namespace that is empty or does not end with "/".
var ErrNamespace = errors.New("store: a namespace must be non-empty and end with /")

// PartitionNamespace is the namespace of partition i of a store shared out in partitions:
// "partition/<i>/". The namespaces of two partitions are never one a prefix of the other, so
// their keys never meet.
func PartitionNamespace(i int) string { return "partition/" + strconv.Itoa(i) + "/" }

// Namespace returns a view of st in which every stream, metadata key and remembered-key scope
// is ns followed by the name the caller gives: a store of its own, beside the others in st. What
// a view lists (MetaPrefix) is its own keys alone, with ns taken off; its appends wake its own
// subscribers; its sequences are its own streams'. Two views whose namespaces are not one a
// prefix of the other share nothing; PartitionNamespace makes such namespaces.
//
// Closing the view ends the view alone (its calls answer ErrClosed from then on); st stays
// open. The view offers Relaxed when st does (a relaxed commit and the loss epoch pass through);
// it offers none of st's other capabilities (Killer, WriteCrasher, Leases): they are the whole
// store's, and stay with st.
//
// Errors: ErrNamespace.
//
//	p3, err := store.Namespace(st, store.PartitionNamespace(3))
//	if err != nil { return err }
//	err = p3.Update(ctx, fn) // appends to "partition/3/<stream>"
func Namespace(st Store, ns string) (Store, error) {
	if ns == "" || !strings.HasSuffix(ns, "/") {
		return nil, fmt.Errorf("%w: %q", ErrNamespace, ns)
	}
	return &namespaced{st: st, ns: ns}, nil
}

type namespaced struct {
	st     Store
	ns     string
	closed atomic.Bool
}

func (v *namespaced) alive() error {
	if v.closed.Load() {
		return ErrClosed
	}
	return nil
}

func (v *namespaced) Update(ctx context.Context, fn func(Tx) error) error {
	if err := v.alive(); err != nil {
		return err
	}
	return v.st.Update(ctx, func(tx Tx) error { return fn(namespacedTx{tx: tx, ns: v.ns}) })
}

// UpdateRelaxed is Update as a relaxed commit of st (store.UpdateRelaxed: an ordinary Update when
// st has none).
func (v *namespaced) UpdateRelaxed(ctx context.Context, fn func(Tx) error) error {
	if err := v.alive(); err != nil {
		return err
	}
	return UpdateRelaxed(v.st, ctx, func(tx Tx) error { return fn(namespacedTx{tx: tx, ns: v.ns}) })
}

// LossEpoch is st's (0 when st has no relaxed commits).
func (v *namespaced) LossEpoch() int64 { return LossEpoch(v.st) }

// SyncRelaxed is st's (SyncRelaxed: ErrNoSync when st cannot sync its relaxed commits apart).
func (v *namespaced) SyncRelaxed(ctx context.Context) error {
	if err := v.alive(); err != nil {
		return err
	}
	return SyncRelaxed(v.st, ctx)
}

func (v *namespaced) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]Event, error) {
	if err := v.alive(); err != nil {
		return nil, err
	}
	evs, err := v.st.ReadForward(ctx, v.ns+stream, gen, after, limit)
	return v.strip(evs), err
}

func (v *namespaced) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]Event, error) {
	if err := v.alive(); err != nil {
		return nil, err
	}
	evs, err := v.st.ReadBackward(ctx, v.ns+stream, gen, before, limit)
	return v.strip(evs), err
}

// strip gives the events the stream names the caller knows them by.
func (v *namespaced) strip(evs []Event) []Event {
	for i := range evs {
		evs[i].Stream = strings.TrimPrefix(evs[i].Stream, v.ns)
	}
	return evs
}

func (v *namespaced) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	if err := v.alive(); err != nil {
		return 0, err
	}
	return v.st.Head(ctx, v.ns+stream, gen)
}

func (v *namespaced) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if err := v.alive(); err != nil {
		return nil, false, err
	}
	return v.st.Meta(ctx, v.ns+key)
}

func (v *namespaced) MetaPrefix(ctx context.Context, prefix string) ([]KV, error) {
	if err := v.alive(); err != nil {
		return nil, err
	}
	kvs, err := v.st.MetaPrefix(ctx, v.ns+prefix)
	for i := range kvs {
		kvs[i].Key = strings.TrimPrefix(kvs[i].Key, v.ns)
	}
	return kvs, err
}

func (v *namespaced) Subscribe(stream string) (<-chan struct{}, func()) {
	if v.closed.Load() {
		return make(chan struct{}), func() {}
	}
	return v.st.Subscribe(v.ns + stream)
}

func (v *namespaced) Close() error {
	v.closed.Store(true)
	return nil
}

// namespacedTx is a transaction of a namespaced view.
type namespacedTx struct {
	tx Tx
	ns string
}

func (x namespacedTx) Append(stream string, gen, expect int64, evs ...NewEvent) (int64, error) {
	return x.tx.Append(x.ns+stream, gen, expect, evs...)
}

func (x namespacedTx) Head(stream string, gen int64) (int64, error) {
	return x.tx.Head(x.ns+stream, gen)
}

func (x namespacedTx) PutMeta(key string, val []byte) error { return x.tx.PutMeta(x.ns+key, val) }

func (x namespacedTx) Meta(key string) ([]byte, bool, error) { return x.tx.Meta(x.ns + key) }

func (x namespacedTx) DeleteMeta(key string) error { return x.tx.DeleteMeta(x.ns + key) }

func (x namespacedTx) Remember(scope, key string, keep int) (bool, error) {
	return x.tx.Remember(x.ns+scope, key, keep)
}
