package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
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
	r, err := OpenRaw(ctx, path, syncNormal)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	start := time.Now()
	for i := range n {
		if err := r.Insert(ctx, data); err != nil {
			return 0, fmt.Errorf("%w (insert %d)", err, i+1)
		}
	}
	return time.Since(start), nil
}

// Raw is the baseline RawInserts measures, one commit at a time: a new SQLite database with the
// store's pragmas and a table of the events table's shape, written by single-row autocommit
// INSERTs through one prepared statement on one connection. Other baselines (a bare server that
// makes a turn's durable writes) use it to do the same commits as the engine without the engine.
// It is safe for concurrent use; the INSERTs are serialised, as one connection's are.
//
//	r, err := sqlite.OpenRaw(ctx, filepath.Join(dir, "raw.db"), false)
//	defer r.Close()
//	err = r.Insert(ctx, payload) // one durable commit
type Raw struct {
	mu   sync.Mutex
	db   *sql.DB
	conn *sql.Conn
	stmt *sql.Stmt
	n    int64
}

// rawDSN names the database at path with the pragmas Open uses: WAL, synchronous FULL (NORMAL with
// syncNormal), a busy timeout.
func rawDSN(path string, syncNormal bool) string {
	syncMode := "FULL"
	if syncNormal {
		syncMode = "NORMAL"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Add("_pragma", "busy_timeout(10000)")
	return "file:" + path + "?" + q.Encode()
}

// OpenRaw creates the database at path (which must not exist) with the pragmas Open uses (WAL,
// synchronous FULL, or NORMAL with syncNormal) and its events table.
//
// Errors: path exists or cannot be read; the database cannot be created.
func OpenRaw(ctx context.Context, path string, syncNormal bool) (*Raw, error) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: raw inserts: %s exists or cannot be read (%v)", path, err)
	}
	db, err := sql.Open("sqlite", rawDSN(path, syncNormal))
	if err != nil {
		return nil, fmt.Errorf("store: raw inserts: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: raw inserts: %w", err)
	}
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
		conn.Close()
		db.Close()
		return nil, fmt.Errorf("store: raw inserts: %w", err)
	}
	stmt, err := conn.PrepareContext(ctx, `INSERT INTO events (stream, gen, seq, kind, data, time, sum) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		conn.Close()
		db.Close()
		return nil, fmt.Errorf("store: raw inserts: %w", err)
	}
	return &Raw{db: db, conn: conn, stmt: stmt}, nil
}

// Insert commits one row holding data, in a transaction of its own. ctx is looked at before the
// INSERT, which is then not interrupted: as the store does with an Update, so that the baseline
// pays no more for a context than the store (an INSERT given a context that can end has the
// driver watch it, at a cost of its own on every statement).
//
// Errors: ctx ended before the INSERT; the INSERT fails (a closed Raw included).
func (r *Raw) Insert(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if _, err := r.stmt.Exec("x/raw", 0, r.n, "decision", data, time.Now().UnixMilli(), r.n); err != nil {
		return fmt.Errorf("store: raw inserts: %w", err)
	}
	return nil
}

// Close closes the statement, the connection and the database.
func (r *Raw) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.stmt.Close(), r.conn.Close(), r.db.Close())
}
