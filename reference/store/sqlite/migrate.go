package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomcheck/loomcheck/reference/store"
)

// migrate brings a store of an older schema to schemaVersion, in one transaction.
//
// Version 0 (written before checksums): the sum columns are added and every row is summed as it
// stands (the append-only trigger is lifted for that one update and put back). Damage that
// happened before the migration is therefore taken as the record; everything written or read
// after it is checked.
//
// Version 2 (before leases): the leases table, which the schema Open runs creates, is all that is
// new; it starts empty.
//
// A store of a newer version is refused with *store.SchemaError before anything is changed (see
// checkVersion).
func (s *SQLite) migrate(ctx context.Context) error {
	v, err := s.checkVersion(ctx)
	if err != nil {
		return err
	}
	if v == schemaVersion {
		return nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.path, err)
	}
	defer tx.Rollback()
	if v < 2 {
		if err := s.sumEveryRow(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.path, err)
	}
	return tx.Commit()
}

// checkVersion returns the store's schema version (PRAGMA user_version), refusing one newer than
// this binary's with *store.SchemaError.
func (s *SQLite) checkVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		if isCorruption(err) {
			return 0, &store.CorruptError{Path: s.path, Table: "database", Reason: err.Error()}
		}
		return 0, fmt.Errorf("store: schema version of %s: %w", s.path, err)
	}
	if v > schemaVersion {
		return v, &store.SchemaError{Where: s.path, Have: v, Know: schemaVersion}
	}
	return v, nil
}

// sumEveryRow is the migration from version 0: it adds the sum columns and sums every row of
// events, meta and remembered as it stands.
func (s *SQLite) sumEveryRow(ctx context.Context, tx *sql.Tx) error {
	for _, table := range []string{"events", "meta", "remembered"} {
		has, err := hasColumn(ctx, tx, table, "sum")
		if err != nil {
			return fmt.Errorf("store: migrate %s: %w", s.path, err)
		}
		if !has {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN sum INTEGER`); err != nil {
				return fmt.Errorf("store: migrate %s: %w", s.path, err)
			}
		}
	}
	steps := []struct {
		sel, upd string
		sum      func(r *sql.Rows) ([]any, error)
	}{
		{`SELECT stream, gen, seq, kind, data, time FROM events WHERE sum IS NULL`,
			`UPDATE events SET sum = ? WHERE stream = ? AND gen = ? AND seq = ?`,
			func(r *sql.Rows) ([]any, error) {
				var e store.Event
				if err := r.Scan(&e.Stream, &e.Gen, &e.Seq, &e.Kind, &e.Data, &e.Time); err != nil {
					return nil, err
				}
				return []any{eventSum(e.Stream, e.Gen, e.Seq, e.Kind, e.Data, e.Time), e.Stream, e.Gen, e.Seq}, nil
			}},
		{`SELECT key, val FROM meta WHERE sum IS NULL`, `UPDATE meta SET sum = ? WHERE key = ?`,
			func(r *sql.Rows) ([]any, error) {
				var k string
				var v []byte
				if err := r.Scan(&k, &v); err != nil {
					return nil, err
				}
				return []any{metaSum(k, v), k}, nil
			}},
		{`SELECT scope, key, n FROM remembered WHERE sum IS NULL`, `UPDATE remembered SET sum = ? WHERE scope = ? AND key = ?`,
			func(r *sql.Rows) ([]any, error) {
				var sc, k string
				var n int64
				if err := r.Scan(&sc, &k, &n); err != nil {
					return nil, err
				}
				return []any{rememberedSum(sc, k, n), sc, k}, nil
			}},
	}
	if _, err := tx.ExecContext(ctx, `DROP TRIGGER IF EXISTS events_append_only_u`); err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.path, err)
	}
	for _, st := range steps {
		rows, err := tx.QueryContext(ctx, st.sel)
		if err != nil {
			return s.damageErr(err)
		}
		var updates [][]any
		for rows.Next() {
			args, err := st.sum(rows)
			if err != nil {
				rows.Close()
				return s.damageErr(err)
			}
			updates = append(updates, args)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return s.damageErr(err)
		}
		rows.Close()
		for _, args := range updates {
			if _, err := tx.ExecContext(ctx, st.upd, args...); err != nil {
				return fmt.Errorf("store: migrate %s: %w", s.path, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, appendOnlyUpdate); err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.path, err)
	}
	return nil
}

func hasColumn(ctx context.Context, tx *sql.Tx, table, col string) (bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return false, err
		}
		if n == col {
			return true, nil
		}
	}
	return false, rows.Err()
}

const identityPrefix = "loom store "

// ensureIdentity reconciles the identity recorded in the database with the identity file beside
// it. A database without one gets a new identity (a new store, or one written before
// identities); the file is then written from the database. A file naming a store the database
// does not hold (the database was replaced by a new one, or lost everything it held) is
// store.ErrMissing unless allowEmpty, and so is a head file counting events beside a database that
// holds no store while the identity file is gone too; a file that disagrees with the database's own
// identity is damage.
//
// fresh reports a store new to this path (a new identity, or another store's in place of the one
// the file named): whatever head file an earlier store left does not count, and one of the count
// the database holds is written, before the identity is recorded, so that every recorded identity
// has its head file beside it. A database whose identity stands (the file names it, or the file is
// gone) keeps its head file, which openHead checks.
func (s *SQLite) ensureIdentity(ctx context.Context, idFile string, hasIDFile, allowEmpty bool) (fresh bool, err error) {
	var id string
	var sum int64
	err = s.w.QueryRowContext(ctx, `SELECT id, sum FROM identity WHERE one = 1`).Scan(&id, &sum)
	switch {
	case err == sql.ErrNoRows:
		if hasIDFile && !allowEmpty {
			return false, fmt.Errorf("%w: %s was created as a store (%s) and its database holds none", store.ErrMissing, s.path, identityPath(s.path))
		}
		if n, ok := leftHead(s.path); ok && n > 0 && !allowEmpty {
			return false, fmt.Errorf("%w: %s holds no store and its head file %s counts %d events", store.ErrMissing, s.path, headPath(s.path), n)
		}
		if err := s.freshHead(ctx); err != nil {
			return false, err
		}
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
		if _, err := s.w.ExecContext(ctx, `INSERT INTO identity (one, id, sum) VALUES (1, ?, ?)`, id, sumOf([]byte("identity"), []byte(id))); err != nil {
			return false, fmt.Errorf("store: identity of %s: %w", s.path, err)
		}
		fresh = true
	case err != nil:
		return false, s.damageErr(err)
	case sum != sumOf([]byte("identity"), []byte(id)):
		return false, &store.CorruptError{Path: s.path, Table: "identity", Reason: "checksum does not match"}
	case hasIDFile && !wellFormedIdentity(idFile):
		return false, &store.CorruptError{Path: s.path, Table: "identity", Reason: fmt.Sprintf("the identity file %s is not one", identityPath(s.path))}
	case hasIDFile && idFile != identityPrefix+id && !allowEmpty:
		return false, fmt.Errorf("%w: %s was created as another store (%s) than the database holds", store.ErrMissing, s.path, identityPath(s.path))
	case hasIDFile && idFile == identityPrefix+id:
		return false, nil
	case hasIDFile:
		// Another store than the file named, allowed: new to this path.
		if err := s.freshHead(ctx); err != nil {
			return false, err
		}
		fresh = true
	}
	if err := writeFileSync(identityPath(s.path), []byte(identityPrefix+id+"\n")); err != nil {
		return false, fmt.Errorf("store: identity of %s: %w", s.path, err)
	}
	return fresh, nil
}

// freshHead replaces whatever head file is at the path with one of the count the database holds.
func (s *SQLite) freshHead(ctx context.Context) error {
	var n int64
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		return s.damageErr(err)
	}
	if err := os.Remove(newestPath(s.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: head of %s: %w", s.path, err) // it named an event of the store before
	}
	if err := writeFileSync(headPath(s.path), headRecord(n)); err != nil {
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	}
	return nil
}

func wellFormedIdentity(s string) bool {
	id, ok := strings.CutPrefix(s, identityPrefix)
	if !ok || len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// Backup writes a consistent copy of the store, as of one instant, to dest (which must not
// exist), while writes go on: it reads a snapshot that includes every commit still in the
// write-ahead log (SQLite's VACUUM INTO) and makes the copy durable. The copy is a database file a
// Restore installs; it holds the identity, every event, the metadata and the remembered keys.
//
// Errors: store.ErrClosed; a dest that exists; the copy cannot be written.
//
//	if err := st.Backup(ctx, "/backups/loom-2026-12-01.db"); err != nil { return err }
func (s *SQLite) Backup(ctx context.Context, dest string) error {
	if err := s.alive(); err != nil {
		return err
	}
	return BackupFile(ctx, s.path, dest)
}

// BackupFile is Backup of the store at path from outside the process that has it open (or of a
// store no process has open): it reads through a read-only connection of its own, which sees
// every committed write, including those still in the write-ahead log, and changes nothing.
//
// Errors: no database at path; a dest that exists; the copy cannot be written.
//
//	err := sqlite.BackupFile(ctx, "/var/lib/loom/loom.db", "/backups/loom.db")
func BackupFile(ctx context.Context, path, dest string) error {
	if ok, err := exists(path); err != nil || !ok {
		if err == nil {
			err = os.ErrNotExist
		}
		return fmt.Errorf("store: backup of %s: %w", path, err)
	}
	if ok, err := exists(dest); err != nil || ok {
		if err == nil {
			err = os.ErrExist
		}
		return fmt.Errorf("store: backup to %s: %w", dest, err)
	}
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dest); err != nil {
		if isCorruption(err) {
			return &store.CorruptError{Path: path, Table: "database", Reason: err.Error()}
		}
		return fmt.Errorf("store: backup to %s: %w", dest, err)
	}
	f, err := os.Open(dest)
	if err != nil {
		return fmt.Errorf("store: backup to %s: %w", dest, err)
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return fmt.Errorf("store: backup to %s: %w", dest, err)
	}
	return syncDir(filepath.Dir(dest))
}

// Restore installs the backup file at path, where no store may be (neither a database nor an
// identity file), and checks it as an unclean Open would: every row's checksum, every stream's
// sequence and SQLite's integrity check. A backup that does not pass is removed again.
//
// Errors: a store already at path (os.ErrExist, wrapped); *store.CorruptError for a damaged backup;
// file errors.
//
//	if err := sqlite.Restore(ctx, "/backups/loom.db", filepath.Join(dir, "loom.db")); err != nil { return err }
func Restore(ctx context.Context, backup, path string) error {
	for _, p := range []string{path, identityPath(path), headPath(path), path + "-wal"} {
		if ok, err := exists(p); err != nil || ok {
			if err == nil {
				err = os.ErrExist
			}
			return fmt.Errorf("store: restore into %s: %w", p, err)
		}
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	if !strings.HasPrefix(string(b), "SQLite format 3\x00") {
		return &store.CorruptError{Path: backup, Table: "database", Reason: "not a database file"}
	}
	_ = os.Remove(cleanPath(path))
	if err := writeFileSync(path, b); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	st, err := Open(ctx, path, Options{restoring: true})
	if err != nil {
		for _, p := range []string{path, path + "-wal", path + "-shm", identityPath(path), cleanPath(path), headPath(path)} {
			_ = os.Remove(p)
		}
		return err
	}
	return st.Close()
}
