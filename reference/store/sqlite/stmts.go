package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// The statements of the hot paths, each prepared once per connection: SQLite parses and plans a
// statement when it is prepared, and every later call only binds its arguments and steps it. A
// statement is prepared the first time it runs, not when the store opens, so that an Open (a
// restart) pays for the statements it runs and not for every one the store has: most of them
// (the wider inserts, the leases, the remembered keys) a restart never needs.

// writeStmts are the writer connection's statements.
type writeStmts struct {
	begin, commit, rollback        *lazyStmt
	savepoint, release, rollbackTo *lazyStmt
	head, has                      *lazyStmt
	// insert[n] inserts n events (1..insertRows).
	insert                               [insertRows + 1]*lazyStmt
	putMeta, meta, delMeta               *lazyStmt
	remembered, rememberTop, rememberNew *lazyStmt
	renumber                             *lazyStmt
	forget, lease, putLease              *lazyStmt
}

// readStmts are the readers' statements: database/sql prepares each on a reader connection the
// first time it runs there, and keeps it for that connection's life.
type readStmts struct {
	forward, backward, head, meta, metaFrom, metaRange, lease *lazyStmt
	grantsFrom, grantsRange                                   *lazyStmt
}

const (
	sqlHead    = `SELECT COALESCE(MAX(seq), 0) FROM events WHERE stream = ? AND gen = ?`
	sqlMeta    = `SELECT val, sum FROM meta WHERE key = ?`
	leaseQuery = `SELECT holder, note, token, expires, sum FROM leases WHERE name = ?`
	grantsCols = `SELECT name, holder, note, token, expires, sum FROM leases `
)

// preparer is what statements are prepared on: the writer's connection, or the reader pool.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// lazyStmt is one statement of the writer's connection or of the reader pool, prepared on p the
// first time it runs. Safe for concurrent use.
type lazyStmt struct {
	p      preparer
	q      string
	mu     sync.Mutex
	st     *sql.Stmt
	closed bool
}

// errStmtClosed answers a statement run after the store closed it.
var errStmtClosed = errors.New("store: statement closed")

// get is the statement, prepared now if it was not yet.
func (l *lazyStmt) get(ctx context.Context) (*sql.Stmt, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errStmtClosed
	}
	if l.st == nil {
		st, err := l.p.PrepareContext(ctx, l.q)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err() // the caller's cancellation, as a query answers it
		}
		if err != nil {
			return nil, fmt.Errorf("prepare %q: %w", l.q, err)
		}
		l.st = st
	}
	return l.st, nil
}

// Exec runs the statement.
func (l *lazyStmt) Exec(args ...any) (sql.Result, error) {
	st, err := l.get(context.Background())
	if err != nil {
		return nil, err
	}
	return st.Exec(args...)
}

// QueryContext runs the query.
func (l *lazyStmt) QueryContext(ctx context.Context, args ...any) (*sql.Rows, error) {
	st, err := l.get(ctx)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// QueryRow runs the query for one row.
func (l *lazyStmt) QueryRow(args ...any) rowScanner {
	return l.QueryRowContext(context.Background(), args...)
}

// QueryRowContext runs the query for one row.
func (l *lazyStmt) QueryRowContext(ctx context.Context, args ...any) rowScanner {
	st, err := l.get(ctx)
	if err != nil {
		return failedRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// close closes the statement if it was prepared.
func (l *lazyStmt) close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.st == nil {
		return nil
	}
	err := l.st.Close()
	l.st = nil
	return err
}

// rowScanner is one row of a query: *sql.Row, or failedRow.
type rowScanner interface{ Scan(dest ...any) error }

// failedRow is the row of a statement that could not be prepared: its Scan answers why.
type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }

// prepareAll makes each query a statement of p, prepared on its first use.
func prepareAll(p preparer, stmts map[**lazyStmt]string) {
	for dst, q := range stmts {
		*dst = &lazyStmt{p: p, q: q}
	}
}

func (w *writeStmts) prepare(p preparer) { prepareAll(p, w.queries()) }

// queries are the writer's statements and their SQL: the one list both prepare and close use, so
// that no statement stays open on the connection when it closes (SQLite would then keep its
// write-ahead log instead of folding it into the database).
func (w *writeStmts) queries() map[**lazyStmt]string {
	q := map[**lazyStmt]string{
		&w.begin:       `BEGIN IMMEDIATE`,
		&w.commit:      `COMMIT`,
		&w.rollback:    `ROLLBACK`,
		&w.savepoint:   `SAVEPOINT u`,
		&w.release:     `RELEASE u`,
		&w.rollbackTo:  `ROLLBACK TO u`,
		&w.head:        sqlHead,
		&w.has:         `SELECT EXISTS (SELECT 1 FROM events WHERE stream = ? AND gen = ? AND seq = ?)`,
		&w.putMeta:     `INSERT INTO meta (key, val, sum) VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET val = excluded.val, sum = excluded.sum`,
		&w.meta:        sqlMeta,
		&w.delMeta:     `DELETE FROM meta WHERE key = ?`,
		&w.remembered:  `SELECT n, sum FROM remembered WHERE scope = ? AND key = ?`,
		&w.rememberTop: `SELECT COALESCE(MAX(n), 0) FROM remembered WHERE scope = ?`,
		&w.rememberNew: `INSERT INTO remembered (scope, key, n, sum) VALUES (?, ?, ?, ?) ON CONFLICT (scope, key) DO NOTHING`,
		&w.renumber:    `UPDATE remembered SET n = ?, sum = ? WHERE scope = ? AND key = ?`,
		&w.forget:      `DELETE FROM remembered WHERE scope = ? AND n <= ?`,
		&w.lease:       leaseQuery,
		&w.putLease: `INSERT INTO leases (name, holder, note, token, expires, sum) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, note = excluded.note, token = excluded.token,
			expires = excluded.expires, sum = excluded.sum`,
	}
	for n := 1; n <= insertRows; n++ {
		q[&w.insert[n]] = `INSERT INTO events (stream, gen, seq, kind, data, time, sum) VALUES ` +
			strings.TrimSuffix(strings.Repeat(`(?, ?, ?, ?, ?, ?, ?), `, n), ", ")
	}
	return q
}

// insertRows is the most events one INSERT statement takes: an Append of more runs several.
const insertRows = 8

func (w *writeStmts) close() error {
	var stmts []*lazyStmt
	for st := range w.queries() {
		stmts = append(stmts, *st)
	}
	return closeAll(stmts...)
}

func (r *readStmts) prepare(p preparer) {
	prepareAll(p, map[**lazyStmt]string{
		&r.forward:   `SELECT seq, kind, data, time, sum FROM events WHERE stream = ? AND gen = ? AND seq > ? ORDER BY seq ASC LIMIT ?`,
		&r.backward:  `SELECT seq, kind, data, time, sum FROM events WHERE stream = ? AND gen = ? AND seq < ? ORDER BY seq DESC LIMIT ?`,
		&r.head:      sqlHead,
		&r.meta:      sqlMeta,
		&r.metaFrom:  `SELECT key, val, sum FROM meta WHERE key >= ? ORDER BY key`,
		&r.metaRange: `SELECT key, val, sum FROM meta WHERE key >= ? AND key < ? ORDER BY key`,
		&r.lease:     leaseQuery,
		// The grants of a prefix: from the prefix to the first name past every name it starts
		// (prefixEnd), or to the end when no such name exists.
		&r.grantsFrom:  grantsCols + `WHERE name >= ? ORDER BY name`,
		&r.grantsRange: grantsCols + `WHERE name >= ? AND name < ? ORDER BY name`,
	})
}

func (r *readStmts) close() error {
	return closeAll(r.forward, r.backward, r.head, r.meta, r.metaFrom, r.metaRange, r.lease, r.grantsFrom, r.grantsRange)
}

func closeAll(stmts ...*lazyStmt) error {
	var errs []error
	for _, st := range stmts {
		errs = append(errs, st.close())
	}
	return errors.Join(errs...)
}
