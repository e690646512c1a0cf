package postgres_test

import (
	"path"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// An emptied database holds nothing a store or anyone else put there (schemas, their tables,
// large objects), ends the sessions still on it, and takes a new store as a new database does.
func TestEmptyDatabaseLeavesWhatCreateDatabaseMakes(t *testing.T) {
	url := pgtest.TempDatabase(t)
	name := path.Base(url)
	st := open(t, url, postgres.Options{})
	appendKinds(t, st, "s", 0, "a", "b")
	c := raw(t, url)
	for _, q := range []string{
		`CREATE SCHEMA other`,
		`CREATE TABLE other.t (k int)`,
		`CREATE TABLE public.p (k int)`,
		`SELECT lo_create(0)`,
	} {
		_, err := c.Exec(bg, q)
		require.NoError(t, err, q)
	}

	require.NoError(t, postgres.EmptyDatabase(bg, pgtest.AdminURL, name))

	c2 := raw(t, url)
	var schemas []string
	rows, err := c2.Query(bg, `SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		schemas = append(schemas, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"public"}, schemas)
	var tables, objects int
	require.NoError(t, c2.QueryRow(bg, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&tables))
	require.NoError(t, c2.QueryRow(bg, `SELECT count(*) FROM pg_largeobject_metadata`).Scan(&objects))
	require.Zero(t, tables, "public is empty")
	require.Zero(t, objects, "no large object is left")
	_, err = c.Exec(bg, `SELECT 1`)
	require.Error(t, err, "the sessions that were on it were ended")

	st2 := open(t, url, postgres.Options{})
	require.Empty(t, streamLines(t, st2, "s", 0), "a new store on it starts empty")
}

// An Emptier empties its database over one connection, kept from one emptying to the next (the
// same server process each time), and replaces it when someone ended it meanwhile.
func TestAnEmptierKeepsItsConnection(t *testing.T) {
	url := pgtest.TempDatabase(t)
	name := path.Base(url)
	e, err := postgres.NewEmptier(pgtest.AdminURL, name)
	require.NoError(t, err)
	defer e.Close(bg)
	// backends are the server processes on the database other than c's own.
	backends := func(c *pgx.Conn) []int32 {
		rows, err := c.Query(bg, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() ORDER BY pid`, name)
		require.NoError(t, err)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		require.NoError(t, err)
		return pids
	}
	admin := raw(t, pgtest.AdminURL)
	tables := func() int {
		var n int
		require.NoError(t, raw(t, url).QueryRow(bg, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&n))
		return n
	}
	var kept int32
	for i, end := range []bool{false, false, true} {
		_, err := raw(t, url).Exec(bg, `CREATE TABLE public.p (k int)`)
		require.NoError(t, err)
		if end {
			_, err := admin.Exec(bg, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name)
			require.NoError(t, err)
		}
		require.NoError(t, e.Empty(bg))
		// A backend told to end leaves pg_stat_activity when its process has exited, a moment
		// after pg_terminate_backend returns.
		var after []int32
		require.Eventually(t, func() bool { after = backends(admin); return len(after) == 1 }, time.Minute, 5*time.Millisecond,
			"only the emptier's connection is left on the database")
		require.Zero(t, tables(), "emptied")
		if i == 1 {
			require.Equal(t, kept, after[0], "the second emptying was made over the connection kept from the first")
		}
		kept = after[0]
	}
}
