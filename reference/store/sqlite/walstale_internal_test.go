package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// rawWAL opens a database at path in write-ahead mode on one connection, with automatic
// checkpoints off so that everything written stays in the log, and a page cache of a few pages.
func rawWAL(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_pragma=cache_size(8)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`CREATE TABLE t(x BLOB)`)
	require.NoError(t, err)
	return db
}

func rawRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM t`).Scan(&n))
	return n
}

// walFrames is the number of whole frames in the log at path.
func walFrames(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	return (len(b) - 32) / 4120
}

// TestALogWithFramesOfAnUnfinishedTransactionOpens: frames a transaction wrote and never
// committed stay in the log, with its salts, until the log starts over. A later, shorter
// transaction writes over their head and commits, so the first of the frames left no longer
// checks and more of the same log follow it. A process killed in the middle of a commit leaves
// the same: its frames written so far, no commit frame; the next process commits over them. So
// does a transaction that spilled its cache into the log and was rolled back. SQLite reads the
// log up to the new commit and drops what follows, which was never committed: no damage.
func TestALogWithFramesOfAnUnfinishedTransactionOpens(t *testing.T) {
	t.Run("a commit cut short by a kill", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "loom.db")
		db := rawWAL(t, src)
		_, err := db.Exec(`INSERT INTO t VALUES (randomblob(3000))`)
		require.NoError(t, err)
		before := walFrames(t, src)
		_, err = db.Exec(`INSERT INTO t SELECT randomblob(3000) FROM (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8)`)
		require.NoError(t, err)
		big := walFrames(t, src)
		require.GreaterOrEqual(t, big-before, 6, "the big commit wrote several frames")
		// The files as a kill after all but the commit frame of the big commit leaves them.
		dst := filepath.Join(t.TempDir(), "loom.db")
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst, b, 0o600))
		wal, err := os.ReadFile(src + "-wal")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(dst+"-wal", wal[:32+(big-1)*4120], 0o600))
		require.NoError(t, checkWAL(dst, false), "a log cut between two frames")

		next := rawWALAt(t, dst)
		require.Equal(t, 1, rawRows(t, next), "the cut commit is not read")
		_, err = next.Exec(`INSERT INTO t VALUES (x'01')`)
		require.NoError(t, err)
		require.Equal(t, big-1, walFrames(t, dst), "the new commit wrote over the head of the cut one")
		require.NoError(t, checkWAL(dst, false))
	})
	t.Run("a spilled transaction rolled back", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "loom.db")
		db := rawWAL(t, path)
		_, err := db.Exec(`INSERT INTO t VALUES (randomblob(3000))`)
		require.NoError(t, err)
		before := walFrames(t, path)
		tx, err := db.Begin()
		require.NoError(t, err)
		for range 40 {
			_, err = tx.Exec(`INSERT INTO t VALUES (randomblob(3000))`)
			require.NoError(t, err)
		}
		require.NoError(t, tx.Rollback())
		spilled := walFrames(t, path)
		require.Greater(t, spilled-before, 20, "the transaction spilled its cache into the log")
		_, err = db.Exec(`INSERT INTO t VALUES (x'01')`)
		require.NoError(t, err)
		require.Equal(t, spilled, walFrames(t, path), "the commit wrote over the head of the spilled frames")
		require.Equal(t, 2, rawRows(t, db))
		require.NoError(t, checkWAL(path, false))
	})
}

// rawWALAt opens an existing database in write-ahead mode on one connection.
func rawWALAt(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=wal_autocheckpoint(0)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestALogWithACommittedTransactionAfterABadFrameIsRefused: the frames after the one that does
// not check hold a whole committed transaction of the same log, which SQLite would drop.
func TestALogWithACommittedTransactionAfterABadFrameIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	db := rawWAL(t, path)
	for range 4 {
		_, err := db.Exec(`INSERT INTO t VALUES (randomblob(3000))`)
		require.NoError(t, err)
	}
	wal, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	frames := (len(wal) - 32) / 4120
	require.GreaterOrEqual(t, frames, 6)
	for _, f := range []int{1, frames / 2, frames - 2} {
		damaged := append([]byte(nil), wal...)
		damaged[32+(f-1)*4120+24+100] ^= 0x01 // a byte of the frame's page
		require.NoError(t, os.WriteFile(path+"-wal", damaged, 0o600))
		var ce *store.CorruptError
		require.ErrorAs(t, checkWAL(path, false), &ce, "frame %d of %d", f, frames)
		require.Equal(t, "wal", ce.Table)
		require.NoError(t, checkWAL(path, true), "after a crash of the machine")
	}
}
