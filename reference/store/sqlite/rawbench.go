package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"
)

// RawInserts is a measuring baseline, not part of the store: the commit rate of SQLite itself
// on this machine, which a store commit is compared with (reference/perf). It creates a new
// database at path (which must not exist) with the pragmas Open uses (WAL, synchronous FULL, or
// NORMAL with syncNormal) and a table of the events table's shape, then makes n single-row
// INSERTs of data, each its own autocommit transaction, through one prepared statement on one
// connection, and returns the time the n INSERTs took (the setup excluded). It adds none of the
// store's work: no head read, no checksum, no head file, no notification.
//
// Errors: path exists; the database cannot be created; an INSERT fails (ctx ending included).
//
//	d, err := sqlite.RawInserts(ctx, filepath.Join(dir, "raw.db"), false, payload, 500)
//	rate := 500 / d.Seconds() // commits per second, synchronous FULL
func RawInserts(ctx context.Context, path string, syncNormal bool, data []byte, n int) (time.Duration, error) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("store: raw inserts: %s exists or cannot be read (%v)", path, err)
	}
	syncMode := "FULL"
	if syncNormal {
		syncMode = "NORMAL"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return 0, fmt.Errorf("store: raw inserts: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: raw inserts: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE events (
	stream TEXT NOT NULL,
	gen    INTEGER NOT NULL,
	seq    INTEGER NOT NULL,
	kind   TEXT NOT NULL,
	data   BLOB,
	time   INTEGER NOT NULL,
	sum    INTEGER,
	PRIMARY KEY (stream, gen, seq)
) WITHOUT ROWID`); err != nil {
		return 0, fmt.Errorf("store: raw inserts: %w", err)
	}
	stmt, err := conn.PrepareContext(ctx, `INSERT INTO events (stream, gen, seq, kind, data, time, sum) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, fmt.Errorf("store: raw inserts: %w", err)
	}
	defer stmt.Close()
	start := time.Now()
	for i := range n {
		if _, err := stmt.ExecContext(ctx, "x/raw", 0, i+1, "decision", data, time.Now().UnixMilli(), i); err != nil {
			return 0, fmt.Errorf("store: raw inserts: insert %d: %w", i+1, err)
		}
	}
	return time.Since(start), nil
}
