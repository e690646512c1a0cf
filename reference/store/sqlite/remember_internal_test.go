package sqlite

import (
	"context"
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
