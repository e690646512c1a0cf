package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// rows is the number of rows of scope in the remembered table, and their numbers' range.
func rows(t *testing.T, st *SQLite, scope string) (n, lo, hi int64) {
	t.Helper()
	require.NoError(t, st.r.QueryRowContext(context.Background(),
		`SELECT count(*), COALESCE(MIN(n), 0), COALESCE(MAX(n), 0) FROM remembered WHERE scope = ?`, scope).Scan(&n, &lo, &hi))
	return n, lo, hi
}

func remember(t *testing.T, st *SQLite, scope, key string, keep int) bool {
	t.Helper()
	var fresh bool
	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
		var err error
		fresh, err = tx.Remember(scope, key, keep)
		return err
	}))
	return fresh
}

// Forgotten keys are swept every forgetEvery keys, not one by one: the table never holds more than
// keep + forgetEvery rows of a scope, and a key past the window that is still in the table is new
// again (it comes back as the newest), exactly as if it had been deleted.
func TestForgottenKeysAreSweptInBatches(t *testing.T) {
	st := openTestStore(t)
	const keep = 10
	for i := 1; i <= 3*forgetEvery+5; i++ {
		require.True(t, remember(t, st, "s", fmt.Sprint("k", i), keep), "key %d", i)
		n, lo, hi := rows(t, st, "s")
		require.EqualValues(t, i, hi)
		require.LessOrEqual(t, n, int64(keep+forgetEvery), "after key %d", i)
		if i%forgetEvery == 0 {
			require.EqualValues(t, keep, n, "key %d sweeps the scope down to keep", i)
			require.EqualValues(t, i-keep+1, lo)
		}
	}
	last := 3*forgetEvery + 5
	// k(last-keep) left the window and was not swept yet: it is new, and takes the next number.
	stale := fmt.Sprint("k", last-keep)
	n, lo, _ := rows(t, st, "s")
	require.Greater(t, n, int64(keep))
	require.LessOrEqual(t, lo, int64(last-keep))
	require.True(t, remember(t, st, "s", stale, keep))
	require.False(t, remember(t, st, "s", stale, keep), "now it is the newest")
	// The keys still in the window are remembered.
	for i := last - keep + 2; i <= last; i++ {
		require.False(t, remember(t, st, "s", fmt.Sprint("k", i), keep), "key %d", i)
	}
}

// The newest number the writer keeps follows only what committed: a remembered key whose Update
// fails leaves the number where it was, and a reopened store reads it from the table.
func TestTheNewestNumberFollowsWhatCommitted(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()
	require.True(t, remember(t, st, "s", "a", 5))
	boom := errors.New("boom")
	err := st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Remember("s", "b", 5); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.True(t, remember(t, st, "s", "c", 5))
	_, _, hi := rows(t, st, "s")
	require.EqualValues(t, 2, hi, "b's number was not used")
	require.True(t, remember(t, st, "s", "b", 5))
	path := st.path
	require.NoError(t, st.Close())
	re, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	defer re.Close()
	require.True(t, remember(t, re, "s", "d", 5))
	_, _, hi = rows(t, re, "s")
	require.EqualValues(t, 4, hi)
	require.False(t, remember(t, re, "s", "a", 5))
}

// The smallest windows: keep 1 remembers only the newest key (the one before it is new again,
// and the sweep still bounds the table), and keep 0 or less remembers every key for good (the
// sweep never runs).
func TestTheSmallestWindows(t *testing.T) {
	st := openTestStore(t)
	for i := 1; i <= forgetEvery+3; i++ {
		require.True(t, remember(t, st, "one", fmt.Sprint("k", i), 1), "key %d", i)
		require.False(t, remember(t, st, "one", fmt.Sprint("k", i), 1), "key %d is the newest", i)
		n, _, _ := rows(t, st, "one")
		require.LessOrEqual(t, n, int64(1+forgetEvery), "after key %d", i)
	}
	require.True(t, remember(t, st, "one", "k1", 1), "forgotten, and no longer in the table")
	require.True(t, remember(t, st, "one", fmt.Sprint("k", forgetEvery+2), 1), "forgotten, still in the table")

	for _, keep := range []int{0, -1} {
		scope := fmt.Sprint("all", keep)
		for i := 1; i <= forgetEvery+3; i++ {
			require.True(t, remember(t, st, scope, fmt.Sprint("k", i), keep), "key %d", i)
		}
		for i := 1; i <= forgetEvery+3; i++ {
			require.False(t, remember(t, st, scope, fmt.Sprint("k", i), keep), "keep %d: key %d is remembered for good", keep, i)
		}
		n, _, _ := rows(t, st, scope)
		require.EqualValues(t, forgetEvery+3, n)
	}
}

// A Remember whose statement fails answers false with the error, and the Update that gives up on
// it leaves the set as it was. Each statement Remember may run is made to fail in turn, by a
// trigger or a renamed table.
func TestARememberThatFailsSaysSo(t *testing.T) {
	st := openTestStore(t)
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+st.path)
	require.NoError(t, err)
	defer db.Close()
	raw := func(q string) {
		t.Helper()
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	try := func(scope, key string, keep int) (bool, error) {
		var fresh bool
		err := st.Update(ctx, func(tx store.Tx) error {
			var err error
			fresh, err = tx.Remember(scope, key, keep)
			return err
		})
		return fresh, err
	}
	const keep = 2
	for i := 1; i <= 3; i++ {
		require.True(t, remember(t, st, "s", fmt.Sprint("k", i), keep))
	}

	// The insert of a new key.
	raw(`CREATE TRIGGER no_insert BEFORE INSERT ON remembered BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	fresh, err := try("s", "new", keep)
	require.Error(t, err)
	require.False(t, fresh)
	raw(`DROP TRIGGER no_insert`)

	// The renumbering of a key that left the window but was not swept yet (k1).
	raw(`CREATE TRIGGER no_update BEFORE UPDATE ON remembered BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	fresh, err = try("s", "k1", keep)
	require.Error(t, err)
	require.False(t, fresh)
	raw(`DROP TRIGGER no_update`)
	require.True(t, remember(t, st, "s", "k1", keep), "k1 is still forgotten")
	require.True(t, remember(t, st, "s", "new", keep), "new was never kept")

	// The sweep, which the key numbered forgetEvery runs.
	for i := 6; i < forgetEvery; i++ {
		require.True(t, remember(t, st, "s", fmt.Sprint("k", i), keep))
	}
	raw(`CREATE TRIGGER no_delete BEFORE DELETE ON remembered BEGIN SELECT RAISE(ABORT, 'refused'); END`)
	fresh, err = try("s", "last", keep)
	require.Error(t, err)
	require.False(t, fresh)
	raw(`DROP TRIGGER no_delete`)
	n, _, hi := rows(t, st, "s")
	require.EqualValues(t, forgetEvery-1, hi, "the failed Update kept nothing")
	require.EqualValues(t, forgetEvery-2, n, "k1 took a new number in its own row")
	require.True(t, remember(t, st, "s", "last", keep))
	n, _, _ = rows(t, st, "s")
	require.EqualValues(t, keep, n, "the sweep ran with it")

	// A transaction SQLite rolled back under the Update: nothing more runs in it.
	err = st.Update(ctx, func(x store.Tx) error {
		if _, err := x.(*tx).s.wc.ExecContext(ctx, `ROLLBACK`); err != nil {
			return err
		}
		fresh, err := x.Remember("s", "lost", keep)
		require.False(t, fresh)
		return err
	})
	require.ErrorIs(t, err, errTxLost)

	// The read of a scope's newest number, which a store that has just opened makes.
	require.NoError(t, st.Close())
	re, err := Open(ctx, st.path, Options{SyncNormal: true})
	require.NoError(t, err)
	defer re.Close()
	raw(`ALTER TABLE remembered RENAME TO remembered_away`)
	err = re.Update(ctx, func(tx store.Tx) error {
		fresh, err := tx.Remember("s", "lost", keep)
		require.False(t, fresh)
		return err
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, errTxLost)
	raw(`ALTER TABLE remembered_away RENAME TO remembered`)
	require.True(t, remember(t, re, "s", "lost", keep))
}
