package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Concurrent Updates may share one commit (group commit): these tests queue Updates behind a
// write held open, so that a backend that batches has a queue to batch, and check that each
// Update is still whole and alone: its own outcome, its own notifications, its own durable
// write, whatever the others sharing its commit do.
func init() {
	storeCases = append(storeCases,
		testCase{"QueuedUpdatesAreToldTheirOwnOutcome", testQueuedUpdatesAreToldTheirOwnOutcome},
		testCase{"APanickingUpdateLeavesNothing", testAPanickingUpdateLeavesNothing},
		testCase{"CrashAfterWriteAmongQueuedUpdates", testCrashAfterWriteAmongQueuedUpdates},
		testCase{"OptimisticAppendOnAFreshHandle", testOptimisticAppendOnAFreshHandle},
		testCase{"FencingAmongQueuedUpdates", testFencingAmongQueuedUpdates},
		testCase{"CloseAmongQueuedUpdates", testCloseAmongQueuedUpdates},
	)
}

// queueSettle is how long queued Updates are given to reach the backend's queue before the held
// write is released (they are correct whether they arrive in time or not).
const queueSettle = 30 * time.Millisecond

// holdWriter starts an Update through st that writes nothing and waits, inside its transaction,
// until release is called; it returns once the Update is inside. wait waits for the Update's
// end and returns its error.
func holdWriter(t *testing.T, st store.Store) (release func(), wait func() error) {
	t.Helper()
	inside, free := make(chan struct{}), make(chan struct{})
	var once, insideOnce sync.Once
	release = func() { once.Do(func() { close(free) }) }
	t.Cleanup(release) // a failing test lets the write end before its handle is closed
	done := make(chan error, 1)
	go func() {
		done <- st.Update(bg, func(tx store.Tx) error {
			insideOnce.Do(func() { close(inside) })
			<-free
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("the held write ended before it was released: %v", err)
	case <-time.After(waitBound):
		t.Fatal("the held write never began")
	}
	return release, func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(waitBound):
			t.Fatal("the held write never ended")
			return nil
		}
	}
}

// queued runs n Updates at once through st, each update(i), behind a held write, and returns
// each one's error. Every Update must return within the bound.
func queued(t *testing.T, st store.Store, n int, update func(i int) error) []error {
	t.Helper()
	return queuedBehind(t, st, n, update, false)
}

// queuedBehind is queued; when heldMayClose, the held write (it writes nothing) may also answer
// ErrClosed: among Updates that crash the store, a backend that runs writes at once rather than
// one after another (PostgreSQL) may let the crash come before the held write commits.
func queuedBehind(t *testing.T, st store.Store, n int, update func(i int) error, heldMayClose bool) []error {
	t.Helper()
	release, wait := holdWriter(t, st)
	errs := make([]error, n)
	var wg sync.WaitGroup
	var started sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			started.Done()
			errs[i] = update(i)
		})
	}
	started.Wait()
	time.Sleep(queueSettle)
	release()
	if err := wait(); !heldMayClose || !errors.Is(err, store.ErrClosed) {
		require.NoError(t, err, "the held write")
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "the queued Updates returned")
	return errs
}

// ownFailure is the error a queued Update fails with on purpose, naming it.
type ownFailure struct{ i int }

func (f ownFailure) Error() string { return fmt.Sprintf("update %d fails on purpose", f.i) }

// Queued Updates that succeed, fail with an error of their own, or fail on a conflict, in every
// mix: each is told its own outcome, keeps all of its work or none of it (events, heads,
// metadata, remembered keys), wakes the subscribers of its streams only if it committed, and
// counts as one durable write only if it committed something.
func testQueuedUpdatesAreToldTheirOwnOutcome(t *testing.T, e *env) {
	st := e.handle(t)
	const n, rounds = 24, 4
	wc, counts := st.(store.WriteCrasher)
	subs := make([]<-chan struct{}, n)
	for i := range n {
		ch, cancel := st.Subscribe(fmt.Sprintf("own/%d", i))
		defer cancel()
		subs[i] = ch
	}
	for round := range int64(rounds) {
		var before int64
		if counts {
			before = wc.Writes()
		}
		errs := queued(t, st, n, func(i int) error {
			return ownOutcomeUpdate(st, i, round)
		})
		for i, err := range errs {
			switch i % 3 {
			case 0:
				require.NoError(t, err, "round %d, update %d", round, i)
			case 1:
				var f ownFailure
				require.ErrorAs(t, err, &f, "round %d, update %d", round, i)
				require.Equal(t, i, f.i, "round %d: update %d is told its own error", round, i)
			case 2:
				require.ErrorIs(t, err, store.ErrConflict, "round %d, update %d", round, i)
			}
		}
		for i := range n {
			require.Equal(t, i%3 == 0, received(subs[i]), "round %d: update %d's subscriber woken", round, i)
		}
		if counts {
			require.EqualValues(t, n/3, wc.Writes()-before, "round %d: one durable write per Update that committed", round)
		}
	}
	checkOwnOutcomes(t, st, n, rounds)

	// What committed is what a new handle finds.
	require.NoError(t, st.Close())
	letGo(t, st)
	re := e.handle(t)
	for i := range n {
		h, err := re.Head(bg, fmt.Sprintf("own/%d", i), 0)
		require.NoError(t, err)
		if i%3 == 0 {
			require.EqualValues(t, rounds, h, "update %d's events after a reopen", i)
		} else {
			require.Zero(t, h, "update %d's events after a reopen", i)
		}
	}
}

// ownOutcomeUpdate is update i of round in testQueuedUpdatesAreToldTheirOwnOutcome: one update in
// three commits, one fails with an error of its own, one conflicts with its own append.
func ownOutcomeUpdate(st store.Store, i int, round int64) error {
	return st.Update(bg, func(tx store.Tx) error {
		stream := fmt.Sprintf("own/%d", i)
		// The successful ones append round after round; the others never keep an event,
		// so their head stays 0 whatever they appended before failing.
		expect := round
		if i%3 != 0 {
			expect = 0
		}
		if _, err := tx.Append(stream, 0, expect, store.NewEvent{Kind: fmt.Sprint(round)}); err != nil {
			return err
		}
		if err := tx.PutMeta(fmt.Sprintf("own/%d/%d", i, round), []byte("v")); err != nil {
			return err
		}
		if fresh, err := tx.Remember("own", fmt.Sprintf("%d/%d", i, round), 0); err != nil || !fresh {
			return fmt.Errorf("remember: fresh=%v err=%v", fresh, err)
		}
		switch i % 3 {
		case 1:
			return ownFailure{i}
		case 2:
			// The transaction's own append moved the head: expecting the old one again
			// conflicts.
			_, err := tx.Append(stream, 0, expect, store.NewEvent{Kind: "again"})
			return err
		}
		return nil
	})
}

// checkOwnOutcomes checks what st holds after the n updates of every round of
// testQueuedUpdatesAreToldTheirOwnOutcome: the events, metadata and remembered keys of those that
// committed, nothing of the others.
func checkOwnOutcomes(t *testing.T, st store.Store, n, rounds int) {
	for i := range n {
		stream := fmt.Sprintf("own/%d", i)
		var want []string
		if i%3 == 0 {
			for round := range rounds {
				want = append(want, fmt.Sprintf("%d %d", round+1, round))
			}
		} else {
			want = []string{}
		}
		require.Equal(t, want, streamLines(t, st, stream, 0), "update %d's events", i)
		for round := range rounds {
			want := "<none>"
			if i%3 == 0 {
				want = "v"
			}
			require.Equal(t, want, metaOf(t, st, fmt.Sprintf("own/%d/%d", i, round)), "update %d's metadata of round %d", i, round)
		}
	}
	var fresh []string
	look := errors.New("look only")
	require.ErrorIs(t, st.Update(bg, func(tx store.Tx) error {
		fresh = fresh[:0]
		for i := range n {
			f, err := tx.Remember("own", fmt.Sprintf("%d/0", i), 0)
			if err != nil {
				return err
			}
			if f {
				fresh = append(fresh, fmt.Sprint(i))
			}
		}
		return look
	}), look)
	var want []string
	for i := range n {
		if i%3 != 0 {
			want = append(want, fmt.Sprint(i))
		}
	}
	require.Equal(t, want, fresh, "only the keys of the Updates that committed are remembered")
}

// Close while Updates are queued: each either committed before the store closed (and a new
// handle finds it) or answers ErrClosed and kept nothing.
func testCloseAmongQueuedUpdates(t *testing.T, e *env) {
	st := e.handle(t)
	const n = 16
	release, wait := holdWriter(t, st)
	errs := make([]error, n)
	var wg, started sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			started.Done()
			errs[i] = st.Update(bg, func(tx store.Tx) error {
				_, err := tx.Append(fmt.Sprintf("c/%d", i), 0, 0, store.NewEvent{Kind: "x"})
				return err
			})
		})
	}
	started.Wait()
	closed := make(chan error, 1)
	go func() {
		time.Sleep(queueSettle / 2)
		closed <- st.Close()
	}()
	time.Sleep(queueSettle)
	release()
	require.NoError(t, wait(), "the held write")
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "the queued Updates returned")
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(waitBound):
		t.Fatal("Close never returned")
	}
	letGo(t, st)
	re := e.handle(t)
	for i, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, store.ErrClosed, "update %d", i)
		}
		h, herr := re.Head(bg, fmt.Sprintf("c/%d", i), 0)
		require.NoError(t, herr)
		require.Equal(t, err == nil, h == 1, "update %d (%v): its event after a reopen", i, err)
	}
}

// A panic in fn unwinds its caller and keeps nothing of fn's work; the Updates queued with it
// commit as if it had not been there, and the store goes on.
func testAPanickingUpdateLeavesNothing(t *testing.T, e *env) {
	st := e.handle(t)
	type boom struct{ i int }
	try := func(fn func(store.Tx) error) (recovered any, err error) {
		defer func() { recovered = recover() }()
		return nil, st.Update(bg, fn)
	}
	rec, lone := try(func(tx store.Tx) error {
		if _, err := tx.Append("p/lone", 0, 0, store.NewEvent{Kind: "lost"}); err != nil {
			return err
		}
		panic(boom{-1})
	})
	require.Equal(t, boom{-1}, rec, "the panic reaches the caller (error %v)", lone)
	require.Equal(t, []string{}, streamLines(t, st, "p/lone", 0))

	const n = 12
	panics := make([]any, n)
	errs := queued(t, st, n, func(i int) error {
		rec, err := try(func(tx store.Tx) error {
			if _, err := tx.Append(fmt.Sprintf("p/%d", i), 0, 0, store.NewEvent{Kind: "x"}); err != nil {
				return err
			}
			if err := tx.PutMeta(fmt.Sprintf("p/%d", i), []byte("v")); err != nil {
				return err
			}
			if i%4 == 1 {
				panic(boom{i})
			}
			return nil
		})
		panics[i] = rec
		return err
	})
	for i := range n {
		stream := fmt.Sprintf("p/%d", i)
		if i%4 == 1 {
			require.Equal(t, boom{i}, panics[i], "update %d's panic reaches its caller", i)
			require.Equal(t, []string{}, streamLines(t, st, stream, 0), "update %d", i)
			require.Equal(t, "<none>", metaOf(t, st, stream), "update %d", i)
			continue
		}
		require.Nil(t, panics[i], "update %d", i)
		require.NoError(t, errs[i], "update %d", i)
		require.Equal(t, []string{"1 x"}, streamLines(t, st, stream, 0), "update %d", i)
		require.Equal(t, "v", metaOf(t, st, stream), "update %d", i)
	}
	require.EqualValues(t, 1, appendKinds(t, st, "p/1", 0, "after"), "the panicking Update's head was not kept")
	require.EqualValues(t, 1, appendKinds(t, st, "p/lone", 0, "after"))
}

// The crash hook armed for a write that falls among queued Updates: the writes before it and the
// armed one commit (the armed one answers ErrCrashed), every Update after it answers ErrClosed
// and keeps nothing.
func testCrashAfterWriteAmongQueuedUpdates(t *testing.T, e *env) {
	st := e.handle(t)
	c := crasher(t, st)
	killer(t, st)
	appendKinds(t, st, "before", 0, "a")
	const n, at = 10, 4
	crashed := c.CrashAfterWrite(at)
	errs := queuedBehind(t, st, n, func(i int) error {
		return st.Update(bg, func(tx store.Tx) error {
			_, err := tx.Append(fmt.Sprintf("q/%d", i), 0, 0, store.NewEvent{Kind: "x"})
			return err
		})
	}, true)
	within(t, crashed, "the crash channel closes")
	var ok, crashedAt, closed []int
	for i, err := range errs {
		switch {
		case err == nil:
			ok = append(ok, i)
		case errors.Is(err, store.ErrCrashed):
			crashedAt = append(crashedAt, i)
		case errors.Is(err, store.ErrClosed):
			closed = append(closed, i)
		default:
			t.Fatalf("update %d: %v", i, err)
		}
	}
	require.Len(t, ok, at-1, "the writes before the armed one succeed")
	require.Len(t, crashedAt, 1, "the armed write answers ErrCrashed")
	require.Len(t, closed, n-at, "every write after the armed one answers ErrClosed")
	requireAllClosed(t, st)
	letGo(t, st)

	again := e.handle(t)
	require.Equal(t, []string{"1 a"}, streamLines(t, again, "before", 0))
	for _, i := range append(ok, crashedAt...) {
		require.Equal(t, []string{"1 x"}, streamLines(t, again, fmt.Sprintf("q/%d", i), 0), "update %d committed", i)
	}
	for _, i := range closed {
		require.Equal(t, []string{}, streamLines(t, again, fmt.Sprintf("q/%d", i), 0), "update %d, after the crash, kept nothing", i)
	}
}

// Appends with an expected head on a handle that has not seen the stream yet (it was written
// through an earlier handle): an expectation behind the head, ahead of it, or right, empty or not,
// is judged exactly as on the handle that wrote it; after a conflict the same handle judges the
// next append right.
func testOptimisticAppendOnAFreshHandle(t *testing.T, e *env) {
	cases := []struct {
		expect int64
		kinds  []string
		want   int64 // the head returned; -1: ErrConflict
	}{
		{0, []string{"x"}, -1},
		{2, []string{"x"}, -1},
		{4, []string{"x"}, -1},
		{9, []string{"x", "y"}, -1},
		{2, nil, -1},
		{4, nil, -1},
		{3, nil, 3},
		{3, []string{"d"}, 4},
		{3, []string{"d", "e"}, 5},
	}
	st := e.handle(t)
	for i := range cases {
		appendKinds(t, st, fmt.Sprintf("s%d", i), 0, "a", "b", "c")
	}
	require.NoError(t, st.Close())
	letGo(t, st)
	for i, c := range cases {
		stream := fmt.Sprintf("s%d", i)
		h := e.handle(t)
		got, err := appendAt(h, stream, c.expect, c.kinds...)
		if c.want < 0 {
			require.ErrorIs(t, err, store.ErrConflict, "expect %d, %d events", c.expect, len(c.kinds))
			require.Equal(t, []string{"1 a", "2 b", "3 c"}, streamLines(t, h, stream, 0), "a refused append keeps nothing")
			got, err = appendAt(h, stream, 3, "next")
			require.NoError(t, err, "expect %d: the append expecting the actual head, after the conflict", c.expect)
			require.EqualValues(t, 4, got)
		} else {
			require.NoError(t, err, "expect %d, %d events", c.expect, len(c.kinds))
			require.Equal(t, c.want, got, "expect %d, %d events", c.expect, len(c.kinds))
			_, err = appendAt(h, stream, c.want-1, "stale")
			require.ErrorIs(t, err, store.ErrConflict, "expect %d: then an append expecting one less", c.expect)
		}
		require.NoError(t, h.Close())
		letGo(t, h)
	}
}

// appendAt appends kinds to (stream, 0) through st expecting head expect, in one Update.
func appendAt(st store.Store, stream string, expect int64, kinds ...string) (int64, error) {
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

// Fenced writes queued with a grant that supersedes their lease: each either commits whole,
// before the grant, or is refused whole with ErrFenced; once the grant has returned, every
// fenced write is refused.
func testFencingAmongQueuedUpdates(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "", time.Minute)
	view := ls.Fence(l1)
	const n = 16
	var granted store.Lease
	errs := queued(t, st, n+1, func(i int) error {
		if i == n/2 {
			var err error
			granted, err = ls.Acquire(bg, "engine", "node-1", "", time.Minute)
			return err
		}
		return view.Update(bg, func(tx store.Tx) error {
			if _, err := tx.Append("fenced", 0, -1, store.NewEvent{Kind: fmt.Sprint(i)}); err != nil {
				return err
			}
			return tx.PutMeta(fmt.Sprintf("fenced/%d", i), []byte("v"))
		})
	})
	require.NoError(t, errs[n/2], "the grant")
	require.Greater(t, granted.Token, l1.Token)
	kept := map[string]bool{}
	for _, ev := range readAll(t, st, "fenced", 0) {
		kept[ev.Kind] = true
	}
	for i, err := range errs {
		if i == n/2 {
			continue
		}
		if err != nil {
			require.ErrorIs(t, err, store.ErrFenced, "fenced write %d", i)
		}
		require.Equal(t, err == nil, kept[fmt.Sprint(i)], "fenced write %d (%v): its event kept", i, err)
		want := "<none>"
		if err == nil {
			want = "v"
		}
		require.Equal(t, want, metaOf(t, st, fmt.Sprintf("fenced/%d", i)), "fenced write %d (%v): its metadata", i, err)
	}
	err := view.Update(bg, func(tx store.Tx) error { return tx.PutMeta("late", []byte("v")) })
	require.ErrorIs(t, err, store.ErrFenced, "a fenced write after the grant returned")
	require.Equal(t, "<none>", metaOf(t, st, "late"))
}
