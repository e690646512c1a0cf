package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

func init() {
	storeCases = append(storeCases,
		testCase{"AppendAndReadBothWays", testAppendAndReadBothWays},
		testCase{"StreamsAndGenerationsAreSeparate", testStreamsAndGenerationsAreSeparate},
		testCase{"ReadsAreClampedToMaxRead", testReadsAreClampedToMaxRead},
		testCase{"Head", testHead},
		testCase{"OptimisticAppend", testOptimisticAppend},
		testCase{"FailedUpdateLeavesNothing", testFailedUpdateLeavesNothing},
		testCase{"CancelledContextWritesNothing", testCancelledContextWritesNothing},
		testCase{"DataRoundTrips", testDataRoundTrips},
		testCase{"Meta", testMeta},
		testCase{"MetaPrefixFindsKeysAfterAnyByte", testMetaPrefixFindsKeysAfterAnyByte},
		testCase{"DeleteMeta", testDeleteMeta},
		testCase{"RememberKeepsTheNewest", testRememberKeepsTheNewest},
		testCase{"Subscribe", testSubscribe},
		testCase{"SubscribeNeverBlocksTheWriter", testSubscribeNeverBlocksTheWriter},
		testCase{"SubscriberWakesAcrossGoroutines", testSubscriberWakesAcrossGoroutines},
		testCase{"AWokenReaderSeesTheCommit", testAWokenReaderSeesTheCommit},
		testCase{"CloseAndReopen", testCloseAndReopen},
		testCase{"CallsAfterCloseAreErrClosed", testCallsAfterCloseAreErrClosed},
		testCase{"ConcurrentUpdatesAreGapless", testConcurrentUpdatesAreGapless},
		testCase{"ReadsSeeWholeTransactions", testReadsSeeWholeTransactions},
	)
}

func testAppendAndReadBothWays(t *testing.T, e *env) {
	st := e.handle(t)
	before := time.Now().UnixMilli()
	require.EqualValues(t, 3, appendKinds(t, st, "s", 0, "a", "b", "c"))
	require.EqualValues(t, 5, appendKinds(t, st, "s", 0, "d", "e"))
	after := time.Now().UnixMilli()

	fwd, err := st.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 a", "2 b", "3 c", "4 d", "5 e"}, lines(fwd))
	for _, ev := range fwd {
		require.Equal(t, "s", ev.Stream)
		require.EqualValues(t, 0, ev.Gen)
		require.Equal(t, `"`+ev.Kind+`"`, string(ev.Data))
		require.GreaterOrEqual(t, ev.Time, before, "event %d time", ev.Seq)
		require.LessOrEqual(t, ev.Time, after, "event %d time", ev.Seq)
	}

	fwd, err = st.ReadForward(bg, "s", 0, 2, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"3 c", "4 d"}, lines(fwd), "strictly after 2, at most 2")

	fwd, err = st.ReadForward(bg, "s", 0, 5, 10)
	require.NoError(t, err)
	require.Empty(t, fwd, "nothing after the head")

	back, err := st.ReadBackward(bg, "s", 0, 1<<62, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"5 e", "4 d", "3 c", "2 b", "1 a"}, lines(back))

	back, err = st.ReadBackward(bg, "s", 0, 4, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"3 c", "2 b"}, lines(back), "strictly before 4, at most 2, newest first")

	back, err = st.ReadBackward(bg, "s", 0, 1, 10)
	require.NoError(t, err)
	require.Empty(t, back, "nothing before the first event")
}

func testStreamsAndGenerationsAreSeparate(t *testing.T, e *env) {
	st := e.handle(t)
	appendKinds(t, st, "s", 0, "a", "b")
	appendKinds(t, st, "s", 1, "x")
	appendKinds(t, st, "t", 0, "y", "z", "w")
	// A stream whose name is a prefix of another's is not mixed with it.
	appendKinds(t, st, "s/", 0, "p")

	for _, c := range []struct {
		stream string
		gen    int64
		want   []string
	}{
		{"s", 0, []string{"1 a", "2 b"}},
		{"s", 1, []string{"1 x"}},
		{"t", 0, []string{"1 y", "2 z", "3 w"}},
		{"s/", 0, []string{"1 p"}},
		{"t", 1, []string{}},
		{"u", 0, []string{}},
	} {
		evs, err := st.ReadForward(bg, c.stream, c.gen, 0, 0)
		require.NoError(t, err)
		require.Equal(t, c.want, lines(evs), "%s/%d", c.stream, c.gen)
		for _, ev := range evs {
			require.Equal(t, c.stream, ev.Stream)
			require.Equal(t, c.gen, ev.Gen)
		}
		h, err := st.Head(bg, c.stream, c.gen)
		require.NoError(t, err)
		require.EqualValues(t, len(c.want), h, "head of %s/%d", c.stream, c.gen)
	}
}

func testReadsAreClampedToMaxRead(t *testing.T, e *env) {
	st := e.handle(t)
	total := store.MaxRead + 100
	appendKinds(t, st, "big", 0, kindsN("k", total)...)

	for _, limit := range []int{0, -1, store.MaxRead + 1, 1 << 30} {
		evs, err := st.ReadForward(bg, "big", 0, 0, limit)
		require.NoError(t, err)
		require.Len(t, evs, store.MaxRead, "forward limit %d", limit)
		require.EqualValues(t, 1, evs[0].Seq)
		require.EqualValues(t, store.MaxRead, evs[len(evs)-1].Seq)

		evs, err = st.ReadBackward(bg, "big", 0, int64(total)+1, limit)
		require.NoError(t, err)
		require.Len(t, evs, store.MaxRead, "backward limit %d", limit)
		require.EqualValues(t, total, evs[0].Seq)
		require.EqualValues(t, total-store.MaxRead+1, evs[len(evs)-1].Seq)
	}

	// Paging forward by the last seq returned visits every event once, in order.
	var all []int64
	var after int64
	for {
		evs, err := st.ReadForward(bg, "big", 0, after, 300)
		require.NoError(t, err)
		if len(evs) == 0 {
			break
		}
		require.LessOrEqual(t, len(evs), 300)
		for _, ev := range evs {
			all = append(all, ev.Seq)
		}
		after = evs[len(evs)-1].Seq
	}
	require.Len(t, all, total)
	for i, s := range all {
		require.EqualValues(t, i+1, s)
	}
}

func testHead(t *testing.T, e *env) {
	st := e.handle(t)
	h, err := st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.Zero(t, h, "an empty stream's head is 0")
	appendKinds(t, st, "s", 0, "a", "b", "c")
	h, err = st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, h)

	var seen []int64
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		seen = seen[:0]
		h, err := tx.Head("s", 0)
		if err != nil {
			return err
		}
		n, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "d"})
		if err != nil {
			return err
		}
		h2, err := tx.Head("s", 0)
		seen = append(seen, h, n, h2)
		return err
	}))
	require.Equal(t, []int64{3, 4, 4}, seen, "the head before, the append's seq, the head after: the transaction sees its own append")
	h, err = st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 4, h)
}

func testOptimisticAppend(t *testing.T, e *env) {
	st := e.handle(t)
	appendAt := func(stream string, expect int64, kinds ...string) (int64, error) {
		evs := make([]store.NewEvent, len(kinds))
		for i, k := range kinds {
			evs[i] = store.NewEvent{Kind: k}
		}
		var n int64
		err := st.Update(bg, func(tx store.Tx) error {
			var err error
			n, err = tx.Append(stream, 0, expect, evs...)
			return err
		})
		return n, err
	}
	n, err := appendAt("s", 0, "first")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	_, err = appendAt("s", 0, "stale")
	require.ErrorIs(t, err, store.ErrConflict, "expected head 0, actual 1")
	_, err = appendAt("s", 5, "ahead")
	require.ErrorIs(t, err, store.ErrConflict, "expected head 5, actual 1")

	n, err = appendAt("s", 1, "second", "third")
	require.NoError(t, err)
	require.EqualValues(t, 3, n)

	// A conflict in the middle of a transaction undoes the appends before it.
	err = st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("other", 0, 0, store.NewEvent{Kind: "lost"}); err != nil {
			return err
		}
		_, err := tx.Append("s", 0, 2, store.NewEvent{Kind: "lost"})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)

	require.Equal(t, []string{"1 first", "2 second", "3 third"}, streamLines(t, st, "s", 0))
	h, err := st.Head(bg, "other", 0)
	require.NoError(t, err)
	require.Zero(t, h, "the append before the conflict was rolled back")

	// Appending nothing with a matching expectation succeeds and returns the head.
	n, err = appendAt("s", 3)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	_, err = appendAt("s", 2)
	require.ErrorIs(t, err, store.ErrConflict, "an empty append checks its expectation too")
}

func testFailedUpdateLeavesNothing(t *testing.T, e *env) {
	st := e.handle(t)
	appendKinds(t, st, "kept", 0, "k")
	ch, cancel := st.Subscribe("s")
	defer cancel()
	boom := errors.New("boom")
	err := st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"}, store.NewEvent{Kind: "b"}); err != nil {
			return err
		}
		if _, err := tx.Append("kept", 0, -1, store.NewEvent{Kind: "lost"}); err != nil {
			return err
		}
		if err := tx.PutMeta("k", []byte("v")); err != nil {
			return err
		}
		fresh, err := tx.Remember("scope", "key", 10)
		if err != nil || !fresh {
			return fmt.Errorf("remember: fresh=%v err=%v", fresh, err)
		}
		return boom
	})
	require.ErrorIs(t, err, boom, "fn's own error comes back")

	require.Equal(t, []string{}, streamLines(t, st, "s", 0), "no event was kept")
	require.Equal(t, []string{"1 k"}, streamLines(t, st, "kept", 0), "no event was kept")
	require.Equal(t, "<none>", metaOf(t, st, "k"), "no metadata was kept")
	require.False(t, received(ch), "a rolled-back append wakes nobody")
	var fresh bool
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		var err error
		fresh, err = tx.Remember("scope", "key", 10)
		return err
	}))
	require.True(t, fresh, "the remembered key was rolled back too")

	// The stream is usable afterwards and numbering starts at 1.
	require.EqualValues(t, 1, appendKinds(t, st, "s", 0, "c"))
}

func testCancelledContextWritesNothing(t *testing.T, e *env) {
	st := e.handle(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	ran := false
	err := st.Update(ctx, func(tx store.Tx) error {
		ran = true
		if err := tx.PutMeta("k", []byte("v")); err != nil {
			return err
		}
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"})
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ran, "fn does not run for a cancelled caller")
	require.Equal(t, []string{}, streamLines(t, st, "s", 0))
	require.Equal(t, "<none>", metaOf(t, st, "k"))
}

func testDataRoundTrips(t *testing.T, e *env) {
	st := e.handle(t)
	payload := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, -1,
			store.NewEvent{Kind: "bin", Data: payload},
			store.NewEvent{Kind: "kind with spaces/é"},
			store.NewEvent{Kind: "empty", Data: []byte{}},
			store.NewEvent{Kind: "big", Data: big})
		return err
	}))
	evs, err := st.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 bin", "2 kind with spaces/é", "3 empty", "4 big"}, lines(evs))
	require.Equal(t, payload, evs[0].Data, "binary data, zero bytes included, comes back unchanged")
	require.Empty(t, evs[1].Data, "no data reads as empty")
	require.Empty(t, evs[2].Data, "empty data reads as empty")
	require.Equal(t, big, evs[3].Data, "a megabyte comes back unchanged")

	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("bin", payload); err != nil {
			return err
		}
		return tx.PutMeta("empty", []byte{})
	}))
	v, ok, err := st.Meta(bg, "bin")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, payload, v)
	v, ok, err = st.Meta(bg, "empty")
	require.NoError(t, err)
	require.True(t, ok, "an empty value is a value")
	require.Empty(t, v)
}

func testCloseAndReopen(t *testing.T, e *env) {
	st := e.handle(t)
	appendKinds(t, st, "s", 0, "a", "b", "c")
	appendKinds(t, st, "s", 2, "z")
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("exec/1", []byte("one")); err != nil {
			return err
		}
		_, err := tx.Remember("dd", "k", 5)
		return err
	}))
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")
	if k, ok := st.(store.Killer); ok {
		within(t, k.Released(), "Released after Close")
	}

	re := e.handle(t)
	require.Equal(t, []string{"1 a", "2 b", "3 c"}, streamLines(t, re, "s", 0))
	require.Equal(t, []string{"1 z"}, streamLines(t, re, "s", 2))
	kvs, err := re.MetaPrefix(bg, "")
	require.NoError(t, err)
	require.Equal(t, []string{"exec/1=one"}, kvLines(kvs))
	var fresh []bool
	require.NoError(t, re.Update(bg, func(tx store.Tx) error {
		fresh = fresh[:0]
		for _, k := range []string{"k", "k2"} {
			f, err := tx.Remember("dd", k, 5)
			if err != nil {
				return err
			}
			fresh = append(fresh, f)
		}
		return nil
	}))
	require.Equal(t, []bool{false, true}, fresh, "remembered keys survive a reopen")
	require.EqualValues(t, 4, appendKinds(t, re, "s", 0, "d"), "numbering continues")
}

// requireAllClosed checks that every call of st answers store.ErrClosed.
func requireAllClosed(t *testing.T, st store.Store) {
	t.Helper()
	ran := false
	err := st.Update(bg, func(tx store.Tx) error {
		ran = true
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "late"})
		return err
	})
	require.ErrorIs(t, err, store.ErrClosed, "Update")
	require.False(t, ran, "fn does not run on a closed store")
	_, err = st.ReadForward(bg, "s", 0, 0, 0)
	require.ErrorIs(t, err, store.ErrClosed, "ReadForward")
	_, err = st.ReadBackward(bg, "s", 0, 10, 0)
	require.ErrorIs(t, err, store.ErrClosed, "ReadBackward")
	_, err = st.Head(bg, "s", 0)
	require.ErrorIs(t, err, store.ErrClosed, "Head")
	_, _, err = st.Meta(bg, "m")
	require.ErrorIs(t, err, store.ErrClosed, "Meta")
	_, err = st.MetaPrefix(bg, "")
	require.ErrorIs(t, err, store.ErrClosed, "MetaPrefix")
	ch, cancel := st.Subscribe("s")
	require.NotNil(t, ch, "Subscribe on a closed store still gives a channel")
	require.False(t, received(ch))
	cancel()
}

func testCallsAfterCloseAreErrClosed(t *testing.T, e *env) {
	st := e.handle(t)
	appendKinds(t, st, "s", 0, "a")
	require.NoError(t, st.Close())
	requireAllClosed(t, st)
	require.NoError(t, st.Close(), "closing again is harmless")
}

func testConcurrentUpdatesAreGapless(t *testing.T, e *env) {
	st := e.handle(t)
	concurrentAppends(t, []store.Store{st}, 8, 40)
}

// concurrentAppends runs writers goroutines, each appending each events to stream "s" one commit
// at a time through stores[w%len(stores)] (half of them blind, half optimistic with retries on
// ErrConflict), then checks the stream: every event once, no gap, each writer's in its order.
func concurrentAppends(t *testing.T, stores []store.Store, writers, each int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		st := stores[w%len(stores)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				data := []byte(fmt.Sprintf("w%d-%d", w, i))
				if w%2 == 0 {
					if err := st.Update(bg, func(tx store.Tx) error {
						_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "x", Data: data})
						return err
					}); err != nil {
						errs <- fmt.Errorf("writer %d, blind append %d: %w", w, i, err)
						return
					}
					continue
				}
				// Optimistic appends: read the head outside, expect it inside, retry on conflict.
				for {
					h, err := st.Head(bg, "s", 0)
					if err != nil {
						errs <- err
						return
					}
					err = st.Update(bg, func(tx store.Tx) error {
						_, err := tx.Append("s", 0, h, store.NewEvent{Kind: "x", Data: data})
						return err
					})
					if err == nil {
						break
					}
					if !errors.Is(err, store.ErrConflict) {
						errs <- fmt.Errorf("writer %d, append %d expecting %d: %w", w, i, h, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	all := readAll(t, stores[0], "s", 0)
	require.Len(t, all, writers*each)
	next := map[int]int{}
	for i, ev := range all {
		require.EqualValues(t, i+1, ev.Seq, "no gap, no duplicate")
		var w, n int
		_, err := fmt.Sscanf(string(ev.Data), "w%d-%d", &w, &n)
		require.NoError(t, err)
		require.Equal(t, next[w], n, "writer %d's appends land in its order, each once", w)
		next[w]++
	}
	for w := range writers {
		require.Equal(t, each, next[w], "writer %d", w)
	}
	for _, st := range stores {
		h, err := st.Head(bg, "s", 0)
		require.NoError(t, err)
		require.EqualValues(t, writers*each, h)
	}
}

func testReadsSeeWholeTransactions(t *testing.T, e *env) {
	st := e.handle(t)
	wholeTransactions(t, st, []store.Store{st})
}

// wholeTransactions commits 120 transactions of 3 events each through writer while four readers
// read the whole stream through readers: every read sees whole transactions, never fewer events
// than the read before it, and the head is never behind the events read before it.
func wholeTransactions(t *testing.T, writer store.Store, readers []store.Store) {
	t.Helper()
	const batches, batch = 120, 3
	done := make(chan struct{})
	writeErr := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range batches {
			evs := make([]store.NewEvent, batch)
			for j := range evs {
				evs[j] = store.NewEvent{Kind: "x", Data: []byte(fmt.Sprint(i))}
			}
			if err := writer.Update(bg, func(tx store.Tx) error {
				_, err := tx.Append("s", 0, -1, evs...)
				return err
			}); err != nil {
				writeErr <- err
				return
			}
		}
	}()

	var wg sync.WaitGroup
	readErrs := make(chan error, 4)
	for r := range 4 {
		st := readers[r%len(readers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := readWholeTransactions(st, done, batch, batches); err != nil {
				readErrs <- err
			}
		}()
	}
	wg.Wait()
	close(readErrs)
	select {
	case err := <-writeErr:
		require.NoError(t, err)
	default:
	}
	for err := range readErrs {
		require.NoError(t, err)
	}
}

// readWholeTransactions is one reader of wholeTransactions: it reads the stream until after done
// is closed, and returns what it finds wrong (a transaction seen in part, a read going back, a
// head behind the events) or a read's error.
func readWholeTransactions(st store.Store, done <-chan struct{}, batch, batches int) error {
	var last int
	finished := false
	for !finished {
		select {
		case <-done:
			finished = true // one more read after the writer is done
		default:
		}
		evs, err := st.ReadForward(bg, "s", 0, 0, 0)
		if err != nil {
			return err
		}
		if len(evs)%batch != 0 {
			return fmt.Errorf("read %d events: a transaction was seen in part", len(evs))
		}
		if len(evs) < last {
			return fmt.Errorf("read %d events after having read %d", len(evs), last)
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) || string(ev.Data) != fmt.Sprint(i/batch) {
				return fmt.Errorf("event %d is seq %d data %q", i, ev.Seq, ev.Data)
			}
		}
		last = len(evs)
		// Head is read after the events, so it can only be ahead of them.
		h, err := st.Head(bg, "s", 0)
		if err != nil {
			return err
		}
		if h < int64(last) {
			return fmt.Errorf("head %d behind a read of %d events", h, last)
		}
	}
	if last != batches*batch {
		return fmt.Errorf("the final read saw %d events", last)
	}
	return nil
}
