package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

func init() {
	storeCases = append(storeCases,
		testCase{"Kill", testKill},
		testCase{"KillWaitsForTheWriteInProgress", testKillWaitsForTheWriteInProgress},
		testCase{"CrashAfterWrite", testCrashAfterWrite},
		testCase{"CrashAfterWriteKilledFirst", testCrashAfterWriteKilledFirst},
	)
}

// killer is st as a store.Killer; the test is skipped when the backend offers none.
func killer(t *testing.T, st store.Store) store.Killer {
	t.Helper()
	k, ok := st.(store.Killer)
	if !ok {
		t.Skip("the backend offers no store.Killer")
	}
	return k
}

// crasher is st as a store.WriteCrasher; the test is skipped when the backend offers none.
func crasher(t *testing.T, st store.Store) store.WriteCrasher {
	t.Helper()
	c, ok := st.(store.WriteCrasher)
	if !ok {
		t.Skip("the backend offers no store.WriteCrasher")
	}
	return c
}

// letGo waits (bounded) until a handle that died has let go of its storage, when the backend
// says when (store.Killer), so that the next handle may open it.
func letGo(t *testing.T, st store.Store) {
	t.Helper()
	if k, ok := st.(store.Killer); ok {
		k.Kill() // harmless after a crash or a kill
		within(t, k.Released(), "Released after Kill")
	}
}

func testKill(t *testing.T, e *env) {
	st := e.handle(t)
	k := killer(t, st)
	appendKinds(t, st, "s", 0, "a", "b")
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return tx.PutMeta("m", []byte("1")) }))

	k.Kill()
	k.Kill() // a second kill does nothing

	requireAllClosed(t, st)
	err := st.Update(bg, func(tx store.Tx) error { return nil })
	require.ErrorIs(t, err, loomtype.ErrStoreClosed, "ErrClosed is the engine-wide store-closed error")
	require.NoError(t, st.Close(), "closing a killed store is harmless")
	within(t, k.Released(), "Released after Kill")

	re := e.handle(t)
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, re, "s", 0), "everything committed before the kill survives")
	require.Equal(t, "1", metaOf(t, re, "m"))
	require.EqualValues(t, 3, appendKinds(t, re, "s", 0, "c"), "numbering continues")
}

func testKillWaitsForTheWriteInProgress(t *testing.T, e *env) {
	st := e.handle(t)
	k := killer(t, st)
	inside := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free() // a failing test lets the write end before its handle is closed
	updated := make(chan error, 1)
	go func() {
		first := true
		updated <- st.Update(bg, func(tx store.Tx) error {
			if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "in-flight"}); err != nil {
				return err
			}
			if first {
				first = false
				close(inside)
			}
			<-release
			return nil
		})
	}()
	within(t, inside, "the write began")
	killed := make(chan struct{})
	go func() { k.Kill(); close(killed) }()
	// Kill has a while to act on the write in progress: it must wait for it, not return, nor cut
	// it short.
	select {
	case <-killed:
		t.Fatal("Kill returned while a write was in progress")
	case <-time.After(notYet):
	}
	free()
	select {
	case err := <-updated:
		require.NoError(t, err, "the write in progress is not cut short")
	case <-time.After(waitBound):
		t.Fatal("the write in progress never finished")
	}
	within(t, killed, "Kill returned")
	requireAllClosed(t, st)
	within(t, k.Released(), "Released after Kill")

	re := e.handle(t)
	require.Equal(t, []string{"1 in-flight"}, streamLines(t, re, "s", 0))
}

// The crash hook counts only transactions that changed something, lets the armed write commit,
// and lets nothing after it reach the store.
func testCrashAfterWrite(t *testing.T, e *env) {
	st := e.handle(t)
	c := crasher(t, st)
	require.EqualValues(t, 0, c.Writes(), "a new handle counts from zero")
	appendKinds(t, st, "s", 0, "a")
	require.EqualValues(t, 1, c.Writes())
	// Transactions that change nothing are not durable writes: a read, an empty append, a key
	// remembered again, a rolled-back write, a conflict.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Head("s", 0); return err }))
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Append("s", 0, -1); return err }))
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Remember("r", "k", 8); return err }))
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Remember("r", "k", 8); return err }))
	boom := errors.New("boom")
	require.ErrorIs(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("lost", []byte("v")); err != nil {
			return err
		}
		return boom
	}), boom)
	require.ErrorIs(t, st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "stale"})
		return err
	}), store.ErrConflict)
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return tx.PutMeta("m", []byte("v")) }))
	require.EqualValues(t, 3, c.Writes(), "an append, a new remembered key, metadata")

	crashed := c.CrashAfterWrite(2)
	appendKinds(t, st, "s", 0, "b")
	select {
	case <-crashed:
		t.Fatal("the crash fired one write early")
	default:
	}
	err := st.Update(bg, func(tx store.Tx) error { _, err := tx.Append("s", 0, 2, store.NewEvent{Kind: "c"}); return err })
	require.ErrorIs(t, err, store.ErrCrashed, "the armed write reports the crash")
	require.ErrorIs(t, err, store.ErrClosed, "ErrCrashed matches ErrClosed")
	within(t, crashed, "the crash channel closes")
	require.EqualValues(t, 5, c.Writes(), "the armed write is counted")
	err = st.Update(bg, func(tx store.Tx) error { _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "d"}); return err })
	require.ErrorIs(t, err, store.ErrClosed, "a write after the crash")
	require.NotErrorIs(t, err, store.ErrCrashed, "only the armed write reports the crash")
	requireAllClosed(t, st)
	letGo(t, st)

	// The armed write is durable; the one after it is not.
	again := e.handle(t)
	require.Equal(t, []string{"1 a", "2 b", "3 c"}, streamLines(t, again, "s", 0))
	require.Equal(t, "v", metaOf(t, again, "m"))
	require.Equal(t, "<none>", metaOf(t, again, "lost"))
	require.EqualValues(t, 0, crasher(t, again).Writes(), "a new handle counts from zero")

	// Arming again replaces the previous point.
	c = crasher(t, again)
	first := c.CrashAfterWrite(1)
	second := c.CrashAfterWrite(2)
	appendKinds(t, again, "s", 0, "d")
	select {
	case <-first:
		t.Fatal("the replaced point fired")
	case <-second:
		t.Fatal("the crash fired one write early")
	default:
	}
	err = again.Update(bg, func(tx store.Tx) error { return tx.PutMeta("m", []byte("w")) })
	require.ErrorIs(t, err, store.ErrCrashed)
	within(t, second, "the crash channel closes")
	select {
	case <-first:
		t.Fatal("the replaced point's channel closed")
	default:
	}
	letGo(t, again)
}

// A store killed before its crash point never closes the channel.
func testCrashAfterWriteKilledFirst(t *testing.T, e *env) {
	st := e.handle(t)
	c := crasher(t, st)
	k := killer(t, st)
	crashed := c.CrashAfterWrite(2)
	appendKinds(t, st, "s", 0, "a")
	k.Kill()
	within(t, k.Released(), "Released after Kill")
	select {
	case <-crashed:
		t.Fatal("a killed store reported reaching its crash point")
	default:
	}
}
