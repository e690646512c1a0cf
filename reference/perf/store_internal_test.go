package perf

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// TestAppendAlternatingMakesEverySidesCommits: both sides of store-append make all n commits,
// the turn cut short at the end included, each in its own file, and each side's time is counted.
func TestAppendAlternatingMakesEverySidesCommits(t *testing.T) {
	ctx := context.Background()
	e := &env{ctx: ctx, dir: t.TempDir()}
	const n = 2*appendBatch + 3
	raw, st, err := appendAlternating(e, "t", true, n)
	require.NoError(t, err)
	for _, side := range []turnTimes{raw, st} {
		require.Positive(t, side.median)
		require.Greater(t, side.all, 2*side.median, "three turns, two of them full")
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.dir, "raw-t.db"))
	require.NoError(t, err)
	defer db.Close()
	var rows int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM events`).Scan(&rows))
	require.Equal(t, n, rows)

	s, err := sqlite.Open(ctx, filepath.Join(e.dir, "store-t.db"), sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	head, err := s.Head(ctx, "x/append/0", 0)
	require.NoError(t, err)
	require.EqualValues(t, n, head)
}
