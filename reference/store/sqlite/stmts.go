package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The statements of the hot paths, prepared once per connection: SQLite parses and plans each
// when it is prepared, and every later call only binds its arguments and steps it.

// writeStmts are the writer connection's statements, prepared when the store opens.
type writeStmts struct {
	begin, commit, rollback        *sql.Stmt
	savepoint, release, rollbackTo *sql.Stmt
	head, has                      *sql.Stmt
	// insert[n] inserts n events (1..insertRows).
	insert                               [insertRows + 1]*sql.Stmt
	putMeta, meta, delMeta               *sql.Stmt
	remembered, rememberTop, rememberNew *sql.Stmt
	renumber                             *sql.Stmt
	forget, lease, putLease              *sql.Stmt
}

// readStmts are the readers' statements: database/sql prepares each on a reader connection the
// first time it runs there, and keeps it for that connection's life.
type readStmts struct {
	forward, backward, head, meta, metaFrom, metaRange, lease *sql.Stmt
	grantsFrom, grantsRange                                   *sql.Stmt
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

// prepareAll prepares each query into its *sql.Stmt; on an error it closes those it prepared.
func prepareAll(ctx context.Context, p preparer, stmts map[**sql.Stmt]string) error {
	var done []*sql.Stmt
	for dst, q := range stmts {
		st, err := p.PrepareContext(ctx, q)
		if err != nil {
			for _, d := range done {
				d.Close()
			}
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		*dst = st
		done = append(done, st)
	}
	return nil
}

func (w *writeStmts) prepare(ctx context.Context, p preparer) error {
	return prepareAll(ctx, p, w.queries())
}

// queries are the writer's statements and their SQL: the one list both prepare and close use, so
// that no statement stays open on the connection when it closes (SQLite would then keep its
// write-ahead log instead of folding it into the database).
func (w *writeStmts) queries() map[**sql.Stmt]string {
	q := map[**sql.Stmt]string{
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
	var stmts []*sql.Stmt
	for st := range w.queries() {
		stmts = append(stmts, *st)
	}
	return closeAll(stmts...)
}

func (r *readStmts) prepare(ctx context.Context, p preparer) error {
	return prepareAll(ctx, p, map[**sql.Stmt]string{
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

func closeAll(stmts ...*sql.Stmt) error {
	var errs []error
	for _, st := range stmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
