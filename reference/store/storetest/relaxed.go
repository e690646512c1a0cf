package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Relaxed commits (store.Relaxed): what the suite can check of them is everything but the crash
// of a machine. A relaxed commit is visible and wakes subscribers as any commit, survives a
// crash of the process (Kill, then a new handle), is fenced, and shares a commit with others
// whole and apart, relaxed or not. The loss epoch does not move on a crash of the process.
func init() {
	storeCases = append(storeCases,
		testCase{"RelaxedCommitIsACommit", testRelaxedCommitIsACommit},
		testCase{"RelaxedCommitSurvivesAKill", testRelaxedCommitSurvivesAKill},
		testCase{"RelaxedCommitIsFenced", testRelaxedCommitIsFenced},
		testCase{"RelaxedAndSyncedQueuedUpdates", testRelaxedAndSyncedQueuedUpdates},
	)
}

// relaxedOf is st as a store.Relaxed; the test is skipped when the backend offers none.
func relaxedOf(t *testing.T, st store.Store) store.Relaxed {
	t.Helper()
	r, ok := st.(store.Relaxed)
	if !ok {
		t.Skip("the backend offers no store.Relaxed")
	}
	return r
}

// relaxedWrite appends an event of kind tag to "r/<tag>", stores tag under the key "r/<tag>" and
// remembers tag in the scope "r", relaxed or not.
func relaxedWrite(st store.Store, relaxed bool, tag string) error {
	fn := func(tx store.Tx) error {
		if _, err := tx.Append("r/"+tag, 0, -1, store.NewEvent{Kind: tag}); err != nil {
			return err
		}
		if err := tx.PutMeta("r/"+tag, []byte(tag)); err != nil {
			return err
		}
		fresh, err := tx.Remember("r", tag, 100)
		if err == nil && !fresh {
			err = fmt.Errorf("the key %s was remembered before", tag)
		}
		return err
	}
	if relaxed {
		return store.UpdateRelaxed(st, bg, fn)
	}
	return st.Update(bg, fn)
}

// requireWritten checks that relaxedWrite(tag) is whole in st (or, with !kept, that nothing of it
// is).
func requireWritten(t *testing.T, st store.Store, tag string, kept bool) {
	t.Helper()
	want, wantMeta := []string{"1 " + tag}, tag
	if !kept {
		want, wantMeta = []string{}, "<none>"
	}
	require.Equal(t, want, streamLines(t, st, "r/"+tag, 0), "the events of %s", tag)
	require.Equal(t, wantMeta, metaOf(t, st, "r/"+tag), "the metadata of %s", tag)
	var fresh bool
	err := st.Update(bg, func(tx store.Tx) error {
		var err error
		if fresh, err = tx.Remember("r", tag, 100); err != nil {
			return err
		}
		return errUndo // only the answer counts: the probe keeps nothing
	})
	require.ErrorIs(t, err, errUndo, "remember %s", tag)
	require.Equal(t, !kept, fresh, "%s was remembered", tag)
}

// errUndo makes an Update keep nothing; requireWritten's probe ends with it.
var errUndo = errors.New("storetest: undo the probe")

func testRelaxedCommitIsACommit(t *testing.T, e *env) {
	st := e.handle(t)
	relaxedOf(t, st)
	ch, cancel := st.Subscribe("r/a")
	defer cancel()
	require.NoError(t, relaxedWrite(st, true, "a"))
	require.True(t, received(ch), "a relaxed commit wakes the subscribers of its streams before it returns")
	requireWritten(t, st, "a", true)
	// A relaxed commit that fails keeps nothing, as an Update.
	err := store.UpdateRelaxed(st, bg, func(tx store.Tx) error {
		if _, err := tx.Append("r/b", 0, -1, store.NewEvent{Kind: "b"}); err != nil {
			return err
		}
		return ownFailure{1}
	})
	require.ErrorIs(t, err, ownFailure{1})
	require.Empty(t, streamLines(t, st, "r/b", 0), "a failed relaxed commit keeps nothing")
	require.False(t, received(ch), "nor wakes anyone")
}

func testRelaxedCommitSurvivesAKill(t *testing.T, e *env) {
	st := e.handle(t)
	r := relaxedOf(t, st)
	k := killer(t, st)
	epoch := r.LossEpoch()
	require.NoError(t, relaxedWrite(st, false, "synced"))
	require.NoError(t, relaxedWrite(st, true, "relaxed"))
	k.Kill()
	within(t, k.Released(), "Released after Kill")

	re := e.handle(t)
	requireWritten(t, re, "synced", true)
	requireWritten(t, re, "relaxed", true)
	require.Equal(t, epoch, relaxedOf(t, re).LossEpoch(), "a crash of the process loses nothing relaxed: the loss epoch stays")
	require.NoError(t, relaxedWrite(re, true, "after"))
	require.NoError(t, re.Close())

	re = e.handle(t)
	requireWritten(t, re, "after", true)
	require.Equal(t, epoch, relaxedOf(t, re).LossEpoch(), "nor does a clean close")
}

func testRelaxedCommitIsFenced(t *testing.T, e *env) {
	st := e.handle(t)
	relaxedOf(t, st)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "", time.Minute)
	view1 := ls.Fence(l1)
	_, ok := view1.(store.Relaxed)
	require.True(t, ok, "a fenced view of a store with relaxed commits offers them")
	require.NoError(t, relaxedWrite(view1, true, "one"))
	requireWritten(t, st, "one", true)

	acquire(t, ls, "engine", "node-1", "", time.Minute) // the holder restarted: view1 is fenced
	ch, cancel := st.Subscribe("r/two")
	defer cancel()
	require.ErrorIs(t, relaxedWrite(view1, true, "two"), store.ErrFenced, "a relaxed commit through a superseded view")
	require.False(t, received(ch), "a fenced relaxed commit wakes nobody")
	requireWritten(t, st, "two", false)
}

// Relaxed and synced Updates queued together, some failing on purpose: each is told its own
// outcome and keeps all of its work or none, whichever commit it shared.
func testRelaxedAndSyncedQueuedUpdates(t *testing.T, e *env) {
	st := e.handle(t)
	relaxedOf(t, st)
	const n = 24
	tag := func(i int) string { return fmt.Sprintf("q%d", i) }
	errs := queued(t, st, n, func(i int) error {
		relaxed := i%2 == 0 || i%5 == 0
		if i%3 == 2 {
			fn := func(tx store.Tx) error {
				if _, err := tx.Append("r/"+tag(i), 0, -1, store.NewEvent{Kind: tag(i)}); err != nil {
					return err
				}
				return ownFailure{i}
			}
			if relaxed {
				return store.UpdateRelaxed(st, bg, fn)
			}
			return st.Update(bg, fn)
		}
		return relaxedWrite(st, relaxed, tag(i))
	})
	for i, err := range errs {
		if i%3 == 2 {
			require.ErrorIs(t, err, ownFailure{i}, "update %d", i)
			requireWritten(t, st, tag(i), false)
			continue
		}
		require.NoError(t, err, "update %d", i)
		requireWritten(t, st, tag(i), true)
	}
}
