package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// CreateDatabase creates the empty database name on the server adminURL connects to (adminURL as
// Open takes it: the empty string means the PG* environment variables) and returns the
// connection string of the new database: adminURL with its database replaced, so Open(ctx, url,
// ...) reaches it with the same server, role and settings. The role must be allowed to create
// databases. The kit gives every conformance scenario a database of its own this way.
//
// name must be 1 to 63 bytes of lowercase letters, digits and underscores; anything else is
// refused before the server is contacted. Errors: the refusal of a bad name; the server's, when
// the database exists already or the role may not create one.
//
//	url, err := postgres.CreateDatabase(ctx, "", "scenario_42")
//	if err != nil { return err }
//	defer postgres.DropDatabase(context.Background(), "", "scenario_42")
//	st, err := postgres.Open(ctx, url, postgres.Options{})
func CreateDatabase(ctx context.Context, adminURL, name string) (string, error) {
	if err := validName("database", name); err != nil {
		return "", err
	}
	url, err := withDatabase(adminURL, name)
	if err != nil {
		return "", err
	}
	if err := adminExec(ctx, adminURL, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return "", fmt.Errorf("store: create database %s: %w", name, err)
	}
	return url, nil
}

// DropDatabase drops the database name (DROP DATABASE ... WITH (FORCE): the sessions still on
// it, stores left open included, are ended first). A database that does not exist is not an
// error. name is checked as CreateDatabase checks it.
//
//	err := postgres.DropDatabase(ctx, "", "scenario_42")
func DropDatabase(ctx context.Context, adminURL, name string) error {
	if err := validName("database", name); err != nil {
		return err
	}
	// A session the role may not end (a server process of its own that is just starting on the
	// database, say) makes the drop fail; it goes in a moment, so the drop is tried again.
	var err error
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		if err = adminExec(ctx, adminURL, "DROP DATABASE IF EXISTS "+quoteIdent(name)+" WITH (FORCE)"); err == nil {
			return nil
		}
		if wait > 3*time.Second {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("store: drop database %s: %w", name, errors.Join(err, ctx.Err()))
		case <-time.After(wait):
		}
	}
	return fmt.Errorf("store: drop database %s: %w", name, err)
}

// DatabaseURL is the connection string of the database name on the server adminURL connects to,
// as CreateDatabase returns it. name is checked as CreateDatabase checks it.
func DatabaseURL(adminURL, name string) (string, error) {
	if err := validName("database", name); err != nil {
		return "", err
	}
	return withDatabase(adminURL, name)
}

// EmptyDatabase makes the database name as empty as CreateDatabase made it, so that it can be
// given out again (a new database costs the server a copy of its template): the other sessions
// on it are ended, every schema in it but the server's own is dropped with what it holds,
// public is made again owned by the database's owner, and every large object is removed. An
// error leaves the database in an unknown state: drop it then. It connects for the one emptying;
// an Emptier keeps its connection for the next.
//
//	if err := postgres.EmptyDatabase(ctx, "", "scenario_42"); err != nil {
//		err = postgres.DropDatabase(ctx, "", "scenario_42")
//	}
func EmptyDatabase(ctx context.Context, adminURL, name string) error {
	e, err := NewEmptier(adminURL, name)
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	return e.Empty(ctx)
}

// Emptier empties one database as EmptyDatabase does, as often as asked, over one connection it
// keeps between emptyings: a connection costs the server a process of its own, started and ended,
// which for a database emptied after every scenario is more than the emptying. The kept
// connection is idle on the database meanwhile; Close ends it (before the database is dropped).
// An Emptier is for one goroutine at a time.
//
//	e, err := postgres.NewEmptier("", "scenario_42")
//	if err != nil { return err }
//	defer e.Close(ctx)
//	for ... { /* a scenario on the database */; if err := e.Empty(ctx); err != nil { ... } }
type Emptier struct {
	url, name string
	conn      *pgx.Conn
}

// NewEmptier is the emptier of the database name on the server adminURL connects to; name is
// checked as CreateDatabase checks it. It connects at the first Empty.
func NewEmptier(adminURL, name string) (*Emptier, error) {
	url, err := DatabaseURL(adminURL, name)
	if err != nil {
		return nil, err
	}
	return &Emptier{url: url, name: name}, nil
}

// Empty empties the database as EmptyDatabase does. A kept connection that fails (ended by
// someone else meanwhile, say) is replaced and the emptying made once more: each of its steps
// may be made again.
func (e *Emptier) Empty(ctx context.Context) error {
	kept := e.conn != nil
	err := e.empty(ctx)
	if err != nil && kept && ctx.Err() == nil {
		e.Close(ctx)
		err = e.empty(ctx)
	}
	if err != nil {
		return fmt.Errorf("store: empty database %s: %w", e.name, err)
	}
	return nil
}

func (e *Emptier) empty(ctx context.Context) error {
	if e.conn == nil {
		conn, err := pgx.Connect(ctx, e.url)
		if err != nil {
			return err
		}
		e.conn = conn
	}
	conn := e.conn
	if _, err := conn.Exec(ctx, terminateOthers); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace
		WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
		AND nspname NOT LIKE 'pg\_temp\_%' AND nspname NOT LIKE 'pg\_toast\_temp\_%'`)
	if err != nil {
		return err
	}
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, sc := range schemas {
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+quoteIdent(sc)+" CASCADE"); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, `CREATE SCHEMA public AUTHORIZATION pg_database_owner`); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `SELECT lo_unlink(oid) FROM pg_largeobject_metadata`)
	return err
}

// Close ends the kept connection, if any.
func (e *Emptier) Close(ctx context.Context) {
	if e.conn != nil {
		_ = e.conn.Close(context.WithoutCancel(ctx))
		e.conn = nil
	}
}

func adminExec(ctx context.Context, adminURL, sql string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase is the connection string conn with its database replaced by name: the path of a
// postgres:// URL, a dbname setting appended to a keyword/value string (the last setting wins),
// and for the empty string "postgres:///name", which takes everything else from the environment.
func withDatabase(conn, name string) (string, error) {
	if conn == "" {
		return "postgres:///" + name, nil
	}
	scheme := ""
	for _, p := range []string{"postgres://", "postgresql://"} {
		if strings.HasPrefix(conn, p) {
			scheme = p
		}
	}
	if scheme == "" {
		return conn + " dbname=" + name, nil
	}
	rest := conn[len(scheme):]
	// Credentials end at the first '@' before any '/', as libpq reads them.
	auth := ""
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		auth, rest = rest[:i+1], rest[i+1:]
	}
	hosts, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hosts, tail = rest[:i], rest[i:]
	}
	query := ""
	if i := strings.IndexByte(tail, '?'); i >= 0 {
		query = tail[i:]
	}
	if query != "" {
		for _, kv := range strings.Split(query[1:], "&") {
			if k, _, _ := strings.Cut(kv, "="); k == "dbname" {
				return "", fmt.Errorf("store: the connection string names its database with dbname=; name it in the path")
			}
		}
	}
	return scheme + auth + hosts + "/" + name + query, nil
}
