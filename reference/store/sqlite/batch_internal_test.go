package sqlite

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

// hold starts an Update whose fn runs first (after an optional write of its own) and waits until
// release is called, so that Updates queue behind it; done returns its error.
func hold(t *testing.T, st *SQLite, write func(store.Tx) error) (release func(), done func() error) {
	t.Helper()
	inside, free, out := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var once sync.Once
	release = func() { once.Do(func() { close(free) }) }
	t.Cleanup(release)
	go func() {
		out <- st.Update(context.Background(), func(tx store.Tx) error {
			var err error
			if write != nil {
				err = write(tx)
			}
			close(inside)
			<-free
			return err
		})
	}()
	<-inside
	return release, func() error { return <-out }
}

// behind runs update(i) for i < n at once, queued behind a held Update, and returns their errors
// once all have returned.
func behind(t *testing.T, st *SQLite, release func(), n int, update func(i int) error) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = update(i) })
	}
	require.Eventually(t, func() bool { return queuedLen(st) == n }, 10*time.Second, time.Millisecond,
		"%d Updates queued behind the held one", n)
	release()
	wg.Wait()
	return errs
}

// Updates queued while a transaction is open share the next commit; Updates one after another
// each commit alone (a lone Update does not wait for company).
func TestQueuedUpdatesShareACommit(t *testing.T) {
	st := openTestStore(t)
	for i := range 5 {
		require.NoError(t, appendTo(st, "alone", int64(i), nil))
	}
	require.EqualValues(t, 5, st.commits.Load(), "one commit per Update when each waits for the one before")

	release, done := hold(t, st, nil)
	before := st.commits.Load()
	errs := behind(t, st, release, 32, func(i int) error { return appendTo(st, fmt.Sprintf("q/%d", i), 0, nil) })
	require.NoError(t, done())
	for i, err := range errs {
		require.NoError(t, err, "update %d", i)
	}
	require.LessOrEqual(t, st.commits.Load()-before, int64(2), "33 Updates queued together share a commit or two")
}

// A batch takes at most batchMaxUpdates Updates, and stops taking more once its events reach
// batchMaxBytes.
func TestABatchIsBounded(t *testing.T) {
	st := openTestStore(t)
	release, done := hold(t, st, nil)
	before := st.commits.Load()
	n := 2*batchMaxUpdates + 10
	errs := behind(t, st, release, n, func(i int) error { return appendTo(st, fmt.Sprintf("q/%d", i), 0, nil) })
	require.NoError(t, done())
	for i, err := range errs {
		require.NoError(t, err, "update %d", i)
	}
	require.GreaterOrEqual(t, st.commits.Load()-before, int64(3), "%d Updates in batches of at most %d", n+1, batchMaxUpdates)

	big := make([]byte, batchMaxBytes/4)
	release, done = hold(t, st, nil)
	before = st.commits.Load()
	errs = behind(t, st, release, 12, func(i int) error { return appendTo(st, fmt.Sprintf("big/%d", i), 0, big) })
	require.NoError(t, done())
	for i, err := range errs {
		require.NoError(t, err, "update %d", i)
	}
	// Each batch stops taking Updates once it holds batchMaxBytes: at most four of these, plus
	// the held one.
	require.GreaterOrEqual(t, st.commits.Load()-before, int64(3), "12 Updates of a quarter of the bound each")
}

// A transaction SQLite rolls back on its own (here a ROLLBACK run under the store, as an I/O
// error or a full disk would): nothing more runs in it (a statement would run outside any
// transaction and commit at once), every Update that had succeeded in it is told it failed, and
// the heads it had moved are forgotten.
func TestATransactionLostUnderABatchFailsItsMembers(t *testing.T) {
	st := openTestStore(t)
	release, done := hold(t, st, func(tx store.Tx) error {
		_, err := tx.Append("held", 0, 0, store.NewEvent{Kind: "lost"})
		return err
	})
	var appendAfter error
	errs := behind(t, st, release, 6, func(i int) error {
		if i == 0 {
			return st.Update(context.Background(), func(x store.Tx) error {
				if _, err := x.(*tx).s.wc.ExecContext(context.Background(), `ROLLBACK`); err != nil {
					return err
				}
				_, appendAfter = x.Append("after", 0, 0, store.NewEvent{Kind: "autocommitted?"})
				return nil
			})
		}
		return appendTo(st, fmt.Sprintf("q/%d", i), 0, nil)
	})
	require.ErrorIs(t, done(), errTxLost, "the held Update had succeeded in the lost transaction")
	require.ErrorIs(t, errs[0], errTxLost)
	require.ErrorIs(t, appendAfter, errTxLost, "nothing runs in a lost transaction")
	for i := 1; i < len(errs); i++ {
		if errs[i] != nil {
			require.ErrorIs(t, errs[i], errTxLost, "update %d", i)
		}
		h, err := st.Head(context.Background(), fmt.Sprintf("q/%d", i), 0)
		require.NoError(t, err)
		require.Equal(t, errs[i] == nil, h == 1, "update %d (%v): its event", i, errs[i])
	}
	for _, s := range []string{"held", "after"} {
		h, err := st.Head(context.Background(), s, 0)
		require.NoError(t, err)
		require.Zero(t, h, "stream %s", s)
		require.NoError(t, appendTo(st, s, 0, nil), "stream %s: the head the lost transaction moved is forgotten", s)
	}
	require.NoError(t, st.Close())
	re, err := Open(context.Background(), st.path, Options{})
	require.NoError(t, err, "the head file counts only what committed")
	require.NoError(t, re.Close())
}

// queuedLen is the number of Updates waiting in st's queue.
func queuedLen(st *SQLite) int {
	st.qmu.Lock()
	defer st.qmu.Unlock()
	return len(st.queue) - st.qhead
}

// A grant of a lease in the same batch as writes fenced by the lease it supersedes: the fenced
// writes queued before it commit, those queued after it see the new token and are refused,
// keeping nothing.
func TestFencingInsideABatch(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	l1, err := st.Acquire(ctx, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	view := st.Fence(l1)
	release, done := hold(t, st, nil)
	const before, after = 3, 3
	errs := make([]error, before+after)
	var granted store.Lease
	var grantErr error
	var wg sync.WaitGroup
	queue := func(f func()) {
		n := queuedLen(st)
		wg.Go(f)
		require.Eventually(t, func() bool { return queuedLen(st) == n+1 }, 10*time.Second, time.Millisecond)
	}
	fenced := func(i int) func() {
		return func() {
			errs[i] = view.Update(ctx, func(tx store.Tx) error {
				if _, err := tx.Append("fenced", 0, -1, store.NewEvent{Kind: fmt.Sprint(i)}); err != nil {
					return err
				}
				return tx.PutMeta(fmt.Sprintf("fenced/%d", i), []byte("v"))
			})
		}
	}
	for i := range before {
		queue(fenced(i))
	}
	queue(func() { granted, grantErr = st.Acquire(ctx, "engine", "node-1", "", time.Minute) })
	for i := before; i < before+after; i++ {
		queue(fenced(i))
	}
	commits := st.commits.Load()
	release()
	require.NoError(t, done())
	wg.Wait()
	require.LessOrEqual(t, st.commits.Load()-commits, int64(1), "the held Update and the queue share one commit")
	require.NoError(t, grantErr)
	require.Greater(t, granted.Token, l1.Token)
	for i, err := range errs {
		v, ok, merr := st.Meta(ctx, fmt.Sprintf("fenced/%d", i))
		require.NoError(t, merr)
		if i < before {
			require.NoError(t, err, "fenced write %d, queued before the grant", i)
			require.True(t, ok && string(v) == "v", "fenced write %d's metadata", i)
			continue
		}
		require.ErrorIs(t, err, store.ErrFenced, "fenced write %d, queued after the grant", i)
		require.False(t, ok, "fenced write %d kept nothing", i)
	}
	h, err := st.Head(ctx, "fenced", 0)
	require.NoError(t, err)
	require.EqualValues(t, before, h)
}

// Members of one batch appending to one stream, the middle one failing: its savepoint rolls
// back its event and the head it moved, and the member after it appends on the head the member
// before it left.
func TestAFailingMemberLeavesTheHeadBeforeIt(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	require.NoError(t, appendTo(st, "shared", 0, nil))
	release, done := hold(t, st, nil)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	boom := errors.New("boom")
	for i, expect := range []int64{1, 2, 2} {
		n := queuedLen(st)
		wg.Go(func() {
			errs[i] = st.Update(ctx, func(tx store.Tx) error {
				if _, err := tx.Append("shared", 0, expect, store.NewEvent{Kind: fmt.Sprint(i)}); err != nil {
					return err
				}
				if i == 1 {
					return boom
				}
				return nil
			})
		})
		require.Eventually(t, func() bool { return queuedLen(st) == n+1 }, 10*time.Second, time.Millisecond)
	}
	release()
	require.NoError(t, done())
	wg.Wait()
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], boom)
	require.NoError(t, errs[2], "the append after the failed one expects the head before it")
	evs, err := st.ReadForward(ctx, "shared", 0, 0, 0)
	require.NoError(t, err)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{"x", "0", "2"}, kinds)
	require.NoError(t, appendTo(st, "shared", 3, nil), "the head committed is the one kept")
}

// The queue lets go of the requests it has handed out: once at least 64 have been taken and they
// are at least half of the queue, the ones still waiting move to its front; a queue taken to its
// end starts over empty. Either way the order of the requests is kept.
func TestTheQueueLetsGoOfWhatItHandedOut(t *testing.T) {
	st := openTestStore(t)
	fill := func(n int) []*request {
		reqs := make([]*request, n)
		st.qmu.Lock()
		for i := range reqs {
			reqs[i] = &request{}
			st.queue = append(st.queue, reqs[i])
		}
		st.qmu.Unlock()
		return reqs
	}
	take := func(reqs []*request, from, to int) {
		for i := from; i < to; i++ {
			require.Same(t, reqs[i], st.pop(), "request %d", i)
		}
	}
	released := func() {
		rest := st.queue[len(st.queue):cap(st.queue)]
		for i, r := range rest {
			require.Nil(t, r, "the slot %d past the queue's end is let go", i)
		}
	}

	for _, c := range []struct {
		queued, movesAt int
	}{
		{100, 64},  // half of them are taken by the 50th, but the queue moves only at the 64th
		{200, 100}, // past 64 taken, the queue moves once the taken are half of it
	} {
		reqs := fill(c.queued)
		take(reqs, 0, c.movesAt-1)
		require.Equal(t, c.movesAt-1, st.qhead, "%d queued", c.queued)
		require.Len(t, st.queue, c.queued)
		take(reqs, c.movesAt-1, c.movesAt)
		require.Zero(t, st.qhead, "%d queued", c.queued)
		require.Len(t, st.queue, c.queued-c.movesAt)
		released()
		take(reqs, c.movesAt, c.queued)
		require.Nil(t, st.pop())
		require.Zero(t, st.qhead)
		require.Empty(t, st.queue)
	}
}
