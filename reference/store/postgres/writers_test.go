package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// holdOpen starts an Update through st that runs touch, then waits inside its transaction until
// the returned function is called; it returns once touch has run. wait returns the Update's error.
func holdOpen(t *testing.T, st store.Store, touch func(tx store.Tx) error) (free func(), wait func() error) {
	t.Helper()
	inside := make(chan struct{})
	release, open := gate(t)
	done := make(chan error, 1)
	var once sync.Once
	go func() {
		done <- st.Update(bg, func(tx store.Tx) error {
			if err := touch(tx); err != nil {
				return err
			}
			once.Do(func() { close(inside) })
			<-release
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("the held write ended before it was released: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the held write never got inside")
	}
	return open, func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the held write never ended")
			return nil
		}
	}
}

// A write held open on one stream and one key holds no other: writes of the same handle and of
// another handle to other streams and keys commit meanwhile, while a write to its stream, or of
// its key, waits for its commit and then sees it.
func TestWritesToOtherStreamsDoNotWait(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	free, wait := holdOpen(t, a, func(tx store.Tx) error {
		if _, err := tx.Append("held", 0, 0, store.NewEvent{Kind: "a"}); err != nil {
			return err
		}
		return tx.PutMeta("held", []byte("a"))
	})
	for i, st := range []store.Store{a, b} {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		err := st.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Append(fmt.Sprintf("other/%d", i), 0, 0, store.NewEvent{Kind: "x"}); err != nil {
				return err
			}
			return tx.PutMeta(fmt.Sprintf("other/%d", i), []byte("x"))
		})
		cancel()
		require.NoError(t, err, "handle %d wrote elsewhere while the held write was open", i)
	}
	sameStream, sameKey := make(chan error, 1), make(chan error, 1)
	go func() {
		sameStream <- b.Update(bg, func(tx store.Tx) error { _, err := tx.Append("held", 0, 1, store.NewEvent{Kind: "b"}); return err })
	}()
	go func() {
		sameKey <- a.Update(bg, func(tx store.Tx) error {
			v, ok, err := tx.Meta("held")
			if err == nil && (!ok || string(v) != "a") {
				err = fmt.Errorf("read %q (%v) in place of the held write's value", v, ok)
			}
			return err
		})
	}()
	select {
	case err := <-sameStream:
		t.Fatalf("appended to the held stream while its write was open: %v", err)
	case err := <-sameKey:
		t.Fatalf("read the held key while its write was open: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	free()
	require.NoError(t, wait())
	require.NoError(t, <-sameStream, "the second append saw the first's commit (expected head 1)")
	require.NoError(t, <-sameKey, "the read of the key saw the held write's value")
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, a, "held", 0))
}

// Two writes that lock two keys in opposite orders deadlock; the server aborts one, and the store
// runs its fn again: both commit, and nobody is told of the deadlock.
func TestADeadlockIsRetried(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{})
	var runs atomic.Int64
	var firstA, firstB sync.WaitGroup
	firstA.Add(1)
	firstB.Add(1)
	var onceA, onceB sync.Once
	write := func(first, second string, mine, theirs *sync.WaitGroup, once *sync.Once) error {
		return st.Update(bg, func(tx store.Tx) error {
			runs.Add(1)
			if _, _, err := tx.Meta(first); err != nil {
				return err
			}
			once.Do(func() { mine.Done(); theirs.Wait() }) // the first run only: each holds one key
			if _, _, err := tx.Meta(second); err != nil {
				return err
			}
			return tx.PutMeta(first+"-then-"+second, []byte("v"))
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- write("x", "y", &firstA, &firstB, &onceA) }()
	go func() { errs <- write("y", "x", &firstB, &firstA, &onceB) }()
	for range 2 {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Fatal("the deadlocked writes never ended")
		}
	}
	require.EqualValues(t, 3, runs.Load(), "one of the two ran again")
	require.Equal(t, "v", metaOf(t, st, "x-then-y"))
	require.Equal(t, "v", metaOf(t, st, "y-then-x"))
}

// A transaction that touches many things locks each of them, and nothing else: while it is open,
// writes of other keys and streams commit, and a write of one of its keys (the last it touched)
// waits for its commit and then reads its value.
func TestAWriteOfManyKeysLocksEachAndNothingElse(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st, other := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	const keys = 200
	free, wait := holdOpen(t, st, func(tx store.Tx) error {
		for i := range keys {
			if err := tx.PutMeta(fmt.Sprintf("k/%03d", i), []byte("v")); err != nil {
				return err
			}
			if _, err := tx.Append(fmt.Sprintf("s/%03d", i), 0, 0, store.NewEvent{Kind: "x"}); err != nil {
				return err
			}
		}
		return nil
	})
	db := raw(t, url)
	advisory := func(granted bool) int {
		var n int
		require.NoError(t, db.QueryRow(bg, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = $1
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, granted).Scan(&n))
		return n
	}
	require.Equal(t, 2*keys, advisory(true), "one lock per key and per stream, and no other")

	for i, h := range []store.Store{st, other} {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		err := h.Update(ctx, func(tx store.Tx) error {
			if _, err := tx.Append(fmt.Sprintf("elsewhere/%d", i), 0, 0, store.NewEvent{Kind: "y"}); err != nil {
				return err
			}
			return tx.PutMeta(fmt.Sprintf("elsewhere/%d", i), []byte("y"))
		})
		cancel()
		require.NoError(t, err, "handle %d wrote elsewhere while the write of many keys was open", i)
	}

	last := fmt.Sprintf("k/%03d", keys-1)
	same := make(chan error, 1)
	go func() {
		same <- other.Update(bg, func(tx store.Tx) error {
			v, ok, err := tx.Meta(last)
			if err == nil && (!ok || string(v) != "v") {
				err = fmt.Errorf("read %q (%v) in place of the held write's value", v, ok)
			}
			if err != nil {
				return err
			}
			return tx.PutMeta(last, []byte("w"))
		})
	}()
	require.Eventually(t, func() bool { return advisory(false) == 1 }, 10*time.Second, time.Millisecond,
		"the write of a held key waits for its lock")
	select {
	case err := <-same:
		t.Fatalf("wrote a held key while its write was open: %v", err)
	default:
	}
	free()
	require.NoError(t, wait())
	require.NoError(t, <-same)
	require.Equal(t, "w", metaOf(t, st, last))
	kvs, err := st.MetaPrefix(bg, "k/")
	require.NoError(t, err)
	require.Len(t, kvs, keys)
	require.Equal(t, []string{"1 x"}, streamLines(t, st, fmt.Sprintf("s/%03d", keys-1), 0))
}

// metaOf reads key through st: its value, or "<none>".
func metaOf(t *testing.T, st store.Store, key string) string {
	t.Helper()
	v, ok, err := st.Meta(bg, key)
	require.NoError(t, err)
	if !ok {
		return "<none>"
	}
	return string(v)
}
