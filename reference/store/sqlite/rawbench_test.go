package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// TestRawCommitsEachInsert: the raw baseline commits every Insert as its own row (all of them
// readable by another connection once Close returns), refuses a path that exists, and refuses an
// Insert after Close.
func TestRawCommitsEachInsert(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raw.db")
	r, err := sqlite.OpenRaw(bg, path, false)
	require.NoError(t, err)
	for range 3 {
		require.NoError(t, r.Insert(bg, []byte("payload")))
	}
	require.NoError(t, r.Close())
	require.Error(t, r.Insert(bg, []byte("late")))
	_, err = sqlite.OpenRaw(bg, path, true)
	require.Error(t, err, "an existing path is refused")

	d, err := sqlite.RawInserts(bg, filepath.Join(t.TempDir(), "n.db"), true, []byte("x"), 5)
	require.NoError(t, err)
	require.Positive(t, d)

	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	var n, max int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*), MAX(seq) FROM events`).Scan(&n, &max))
	require.Equal(t, [2]int{3, 3}, [2]int{n, max})
	var mode string
	require.NoError(t, db.QueryRow(`PRAGMA journal_mode`).Scan(&mode))
	require.Equal(t, "wal", mode, "the store's journal mode")

	// An empty file is a path that exists too: refused, and left empty (SQLite would take it for
	// an empty database).
	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	_, err = sqlite.OpenRaw(bg, empty, false)
	require.Error(t, err)
	fi, err := os.Stat(empty)
	require.NoError(t, err)
	require.Zero(t, fi.Size())
}
