package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/stretchr/testify/require"
)

func testSubscribe(t *testing.T, e *env) {
	st := e.handle(t)
	ch, cancel := st.Subscribe("s")
	other, cancelOther := st.Subscribe("t")
	defer cancelOther()

	toldInside := true
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"})
		toldInside = received(ch)
		return err
	}))
	require.False(t, toldInside, "nobody is told before the commit")
	require.True(t, received(ch), "told after the commit, before Update returns")
	require.False(t, received(other), "a subscriber of another stream is not told")
	h, err := st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, h, "a woken reader sees the commit")

	// Several commits before the subscriber looks coalesce into one wake-up; another generation
	// of the stream is the stream.
	appendKinds(t, st, "s", 0, "b")
	appendKinds(t, st, "s", 1, "c")
	require.True(t, received(ch))
	require.False(t, received(ch), "coalesced")

	// Writes that append nothing to the stream wake nobody: metadata, remembered keys, empty
	// appends, a rolled-back append.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("s", []byte("x")); err != nil {
			return err
		}
		if _, err := tx.Remember("s", "k", 3); err != nil {
			return err
		}
		_, err := tx.Append("s", 0, -1)
		return err
	}))
	require.False(t, received(ch), "metadata, remembered keys and empty appends wake nobody")
	rollback := errors.New("rollback")
	require.ErrorIs(t, st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "lost"}); err != nil {
			return err
		}
		return rollback
	}), rollback)
	require.False(t, received(ch), "a rolled-back append wakes nobody")
	_, err = st.Head(bg, "s", 0) // a read wakes nobody either
	require.NoError(t, err)
	require.False(t, received(ch))

	// One transaction touching two streams tells both.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "d"}); err != nil {
			return err
		}
		_, err := tx.Append("t", 0, -1, store.NewEvent{Kind: "e"})
		return err
	}))
	require.True(t, received(ch))
	require.True(t, received(other))

	// Two subscribers of one stream are both told.
	ch2, cancel2 := st.Subscribe("s")
	appendKinds(t, st, "s", 0, "f")
	require.True(t, received(ch))
	require.True(t, received(ch2))

	cancel()
	cancel() // ending twice is harmless
	appendKinds(t, st, "s", 0, "g")
	require.False(t, received(ch), "an ended subscription is not told")
	require.True(t, received(ch2), "the other subscription still is")
	cancel2()
	require.Equal(t, []string{"1 a", "2 b", "3 d", "4 f", "5 g"}, streamLines(t, st, "s", 0))
}

func testSubscribeNeverBlocksTheWriter(t *testing.T, e *env) {
	st := e.handle(t)
	// Subscribers that never read: every commit still goes through.
	for range 3 {
		_, cancel := st.Subscribe("s")
		defer cancel()
	}
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		for range 100 {
			if err = st.Update(bg, func(tx store.Tx) error {
				_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "x"})
				return err
			}); err != nil {
				return
			}
		}
	}()
	within(t, done, "100 commits to a stream whose subscribers never read")
	require.NoError(t, err)
	h, err := st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 100, h)
}

func testSubscriberWakesAcrossGoroutines(t *testing.T, e *env) {
	st := e.handle(t)
	wakeAndReadAll(t, st, st, 200)
}

// A reader that reads the moment it is woken sees the commit that woke it: the wake-up comes
// after the commit, not before it. (A wake-up sent before the commit is a race the reader may
// win, and then it waits for a wake-up that never comes; the test runs enough rounds, with
// commits large enough to take a while, to see it.)
func testAWokenReaderSeesTheCommit(t *testing.T, e *env) {
	st := e.handle(t)
	wokenReaderSeesTheCommit(t, st, st)
}

// wokenReaderSeesTheCommit commits rounds through writer, one at a time, each waiting for a reader
// subscribed through reader to wake and read the head at once: it must come to see the round's
// commit. A read that sees less (a spurious wake-up, which the contract allows) must be followed
// by another wake-up.
func wokenReaderSeesTheCommit(t *testing.T, writer, reader store.Store) {
	t.Helper()
	const rounds = 60
	ch, cancel := reader.Subscribe("r")
	defer cancel()
	heads := make(chan int64, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-ch:
			case <-stop:
				return
			}
			h, err := reader.Head(bg, "r", 0)
			if err != nil {
				h = -1
			}
			select {
			case heads <- h:
			case <-stop:
				return
			}
		}
	}()
	evs := make([]store.NewEvent, 16)
	for i := range evs {
		evs[i] = store.NewEvent{Kind: "x", Data: make([]byte, 8<<10)}
	}
	for round := range int64(rounds) {
		require.NoError(t, writer.Update(bg, func(tx store.Tx) error {
			_, err := tx.Append("r", 0, -1, evs...)
			return err
		}))
		want := (round + 1) * int64(len(evs))
		deadline := time.After(waitBound)
		for h := int64(0); h != want; {
			select {
			case h = <-heads:
				require.LessOrEqual(t, h, want, "round %d: the head a woken reader reads", round)
				require.GreaterOrEqual(t, h, int64(0), "round %d: the woken reader's read failed", round)
			case <-deadline:
				t.Fatalf("round %d: no wake-up after which the reader sees the commit (it saw %d events of %d)", round, h, want)
			}
		}
	}
}

// wakeAndReadAll appends n events to stream "w" through writer, one commit each, from another
// goroutine, while a reader that reads through reader after each wake-up must see all n: a
// wake-up is never lost after the last commit.
func wakeAndReadAll(t *testing.T, writer, reader store.Store, n int64) {
	t.Helper()
	ch, cancel := reader.Subscribe("w")
	defer cancel()
	writeErr := make(chan error, 1)
	go func() {
		for range n {
			if err := writer.Update(bg, func(tx store.Tx) error {
				_, err := tx.Append("w", 0, -1, store.NewEvent{Kind: "x"})
				return err
			}); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	deadline := time.After(waitBound)
	var seen int64
	for seen < n {
		select {
		case <-ch:
		case err := <-writeErr:
			require.NoError(t, err)
			writeErr = nil // the writer is done; keep waiting for wake-ups
			continue
		case <-deadline:
			t.Fatalf("a woken reader saw only %d of %d events", seen, n)
		}
		evs, err := reader.ReadForward(bg, "w", 0, seen, 0)
		require.NoError(t, err)
		for _, ev := range evs {
			require.Equal(t, seen+1, ev.Seq)
			seen = ev.Seq
		}
	}
	if writeErr != nil {
		select {
		case err := <-writeErr:
			require.NoError(t, err)
		case <-time.After(waitBound):
			t.Fatal("the writer never finished")
		}
	}
}
