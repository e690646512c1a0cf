package postgres_test

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// The layout Reset recognizes is the one the store's migrations make on an empty database: a new
// migration that changes it fails here until the layout follows.
func TestResetKnowsTheStoresLayout(t *testing.T) {
	url := pgtest.TempDatabase(t)
	open(t, url, postgres.Options{})
	got, err := postgres.LayoutOf(bg, raw(t, url))
	require.NoError(t, err)
	require.Equal(t, postgres.StoreLayout, got, "the layout of a freshly migrated store:\n%s", got)
}

// A reset database holds no event, meta row, remembered key or lease of the store that was on
// it, keeps its schema (same tables, triggers on, version kept), ends the sessions still on it,
// and a new store on it starts as on a new database: tokens from 1, streams empty, and the
// append-only trigger still refusing a delete.
func TestResetDeletesTheStoresDataAndKeepsItsSchema(t *testing.T) {
	url := pgtest.TempDatabase(t)
	name := path.Base(url)
	st := open(t, url, postgres.Options{})
	appendKinds(t, st, "s", 0, "a", "b")
	c := raw(t, url)
	_, err := c.Exec(bg, `INSERT INTO public.meta (key, val) VALUES ('k', 'v')`)
	require.NoError(t, err)
	_, err = c.Exec(bg, `INSERT INTO public.remembered (scope, key, n) VALUES ('s', 'k', 1)`)
	require.NoError(t, err)
	_, err = c.Exec(bg, `INSERT INTO public.leases (name, holder, note, token, expires) VALUES ('l', 'h', '', 7, now())`)
	require.NoError(t, err)
	var relations int
	require.NoError(t, c.QueryRow(bg, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&relations))

	e, err := postgres.NewEmptier(pgtest.AdminURL, name)
	require.NoError(t, err)
	defer e.Close(bg)
	require.NoError(t, e.Reset(bg))

	_, err = c.Exec(bg, `SELECT 1`)
	require.Error(t, err, "the sessions that were on it were ended")
	c2 := raw(t, url)
	for _, table := range []string{"events", "meta", "remembered", "leases"} {
		var n int
		require.NoError(t, c2.QueryRow(bg, `SELECT count(*) FROM public.`+table).Scan(&n))
		require.Zero(t, n, table)
	}
	var after int
	require.NoError(t, c2.QueryRow(bg, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&after))
	require.Equal(t, relations, after, "no table made or dropped")
	got, err := postgres.LayoutOf(bg, c2)
	require.NoError(t, err)
	require.Equal(t, postgres.StoreLayout, got, "triggers on again, version kept")
	_, err = c2.Exec(bg, `DELETE FROM public.events`)
	require.Error(t, err, "events are append-only again")

	st2 := open(t, url, postgres.Options{})
	require.Empty(t, streamLines(t, st2, "s", 0), "a new store on it starts empty")
}

// A database holding anything beside the store's schema is emptied as Empty does: what someone
// else made there goes too.
func TestResetEmptiesADatabaseThatHoldsMore(t *testing.T) {
	for name, extra := range map[string]string{
		"another table":   `CREATE TABLE public.p (k int)`,
		"another schema":  `CREATE SCHEMA other`,
		"a trigger off":   `ALTER TABLE public.events DISABLE TRIGGER events_append_only`,
		"a large object":  `SELECT lo_create(0)`,
		"a changed check": `ALTER TABLE public.events DROP CONSTRAINT events_seq_check`,
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			url := pgtest.TempDatabase(t)
			open(t, url, postgres.Options{})
			_, err := raw(t, url).Exec(bg, extra)
			require.NoError(t, err)
			e, err := postgres.NewEmptier(pgtest.AdminURL, path.Base(url))
			require.NoError(t, err)
			defer e.Close(bg)
			require.NoError(t, e.Reset(bg))
			var relations int
			require.NoError(t, raw(t, url).QueryRow(bg, `SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace`).Scan(&relations))
			require.Zero(t, relations, "emptied as a new database")
		})
	}
}
