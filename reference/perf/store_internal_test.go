package perf

import (
	"context"
	"database/sql"
	"math"
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
		require.Positive(t, side.middle)
		require.Greater(t, side.all, 2*side.middle, "three turns, two of them full")
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

func TestMiddleMean(t *testing.T) {
	require.Equal(t, 2.5, middleMean([]float64{9, 1, 2, 3}), "the quarter at each end left out")
	require.Equal(t, 5.0, middleMean([]float64{100, 4, 5, 6, 0, 5, 5, 5}))
	require.Equal(t, 2.0, middleMean([]float64{1, 3}), "fewer than 4: all of them")
	require.Equal(t, 7.0, middleMean([]float64{7}))
	require.True(t, math.IsNaN(middleMean(nil)))
	vs := []float64{3, 1, 2}
	middleMean(vs)
	require.Equal(t, []float64{3, 1, 2}, vs, "not changed")
}
