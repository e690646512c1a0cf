package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// A write that has begun is bounded by WriteTimeout, not by its caller: a statement that the
// database does not answer fails the write (keeping nothing) instead of holding it forever, and
// the store writes again once the database does.
func TestWriteTimeoutBoundsAStuckWrite(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{WriteTimeout: 300 * time.Millisecond})
	var idle string
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return nil }))

	locker := raw(t, url)
	require.NoError(t, locker.QueryRow(bg, `SHOW idle_in_transaction_session_timeout`).Scan(&idle))
	lock, err := locker.Begin(bg)
	require.NoError(t, err)
	_, err = lock.Exec(bg, `LOCK TABLE meta IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- st.Update(bg, func(tx store.Tx) error {
			if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"}); err != nil {
				return err
			}
			return tx.PutMeta("k", []byte("v")) // waits for the lock
		})
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		require.NoError(t, lock.Rollback(bg))
		t.Fatalf("the write still waited after 10s (then: %v)", <-done)
	}
	took := time.Since(start)
	require.Error(t, err)
	require.Less(t, took, 5*time.Second, "the write gave up after about WriteTimeout")
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.NoError(t, lock.Rollback(bg))
	require.Equal(t, []string{}, streamLines(t, st, "s", 0), "nothing of the failed write")

	appendKinds(t, st, "s", 0, "b")
	require.Equal(t, []string{"1 b"}, streamLines(t, st, "s", 0))
}

// The server ends a write transaction left idle for longer than WriteTimeout, and with it the
// locks it took: a writer that stalls inside fn cannot hold other nodes' writes of what it touched.
func TestAStalledWriterReleasesItsLocks(t *testing.T) {
	url := pgtest.TempDatabase(t)
	stalled := open(t, url, postgres.Options{WriteTimeout: 300 * time.Millisecond})
	other := open(t, url, postgres.Options{})
	free, done := heldWrite(t, stalled, "stalled", -1)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	require.NoError(t, other.Update(ctx, func(tx store.Tx) error {
		h, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "other"})
		if h != 1 {
			err = fmt.Errorf("head %d after appending to what the stalled write left: %w", h, err)
		}
		return err
	}), "the other node wrote once the server ended the stalled transaction, which kept nothing")
	free()
	require.Error(t, <-done, "the stalled write failed")
	require.Equal(t, []string{"1 other"}, streamLines(t, other, "s", 0))
	appendKinds(t, stalled, "s", 0, "again")
}

// ctx governs an Update until its transaction begins: the wait for a write slot (the one slot of
// a store of two connections, held here by another write) ends with ctx, and fn never runs; once
// the slot is free, a write goes through.
func TestContextGovernsTheWaitForAWriteSlot(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{Conns: 2})
	free, done := heldWrite(t, st, "a", 0)

	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	ran := false
	err := st.Update(ctx, func(tx store.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran)

	free()
	require.NoError(t, <-done)
	appendKinds(t, st, "s", 0, "b")
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, st, "s", 0))
}

// Writes of two handles to one stream are serialised by the database: a write held open on one
// handle holds the other's until it commits, and the second then sees the first's events.
func TestWritesOfTwoHandlesToOneStreamAreSerialised(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	free, done := heldWrite(t, a, "a", 0)
	second := make(chan error, 1)
	go func() {
		second <- b.Update(bg, func(tx store.Tx) error {
			_, err := tx.Append("s", 0, 1, store.NewEvent{Kind: "b"})
			return err
		})
	}()
	select {
	case err := <-second:
		t.Fatalf("the second handle wrote while the first's write was open: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	free()
	require.NoError(t, <-done)
	require.NoError(t, <-second, "the second write saw the first's commit (expected head 1)")
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, b, "s", 0))
}
