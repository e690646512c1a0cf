package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// tempDatabase is pgtest.TempDatabase for the package's internal tests (which pgtest, importing
// the package, cannot serve).
func tempDatabase(t *testing.T) string {
	t.Helper()
	if os.Getenv("PGHOST") == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("PGHOST is unset: CI must provide a PostgreSQL server")
		}
		t.Skip("PGHOST is unset: no PostgreSQL server to test against")
	}
	name := fmt.Sprintf("loomtest_internal_%d_%d", os.Getpid(), time.Now().UnixNano())
	url, err := CreateDatabase(context.Background(), "", name)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, DropDatabase(context.Background(), "", name)) })
	return url
}

func TestWithDatabase(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "postgres:///s1"},
		{"postgres://u:p@h:5432/admin", "postgres://u:p@h:5432/s1"},
		{"postgres://u:p@h:5432/admin?sslmode=disable&application_name=x", "postgres://u:p@h:5432/s1?sslmode=disable&application_name=x"},
		{"postgresql://h", "postgresql://h/s1"},
		{"postgres://h?sslmode=require", "postgres://h/s1?sslmode=require"},
		{"postgres://u:p%2Fq@h1:5432,h2:5433/db", "postgres://u:p%2Fq@h1:5432,h2:5433/s1"},
		{"postgres://u@/admin?host=/tmp", "postgres://u@/s1?host=/tmp"},
		{"host=h user=u dbname=admin", "host=h user=u dbname=admin dbname=s1"},
	} {
		got, err := withDatabase(c.in, "s1")
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
		if c.in != "" {
			cfg, err := pgx.ParseConfig(got)
			require.NoError(t, err, got)
			require.Equal(t, "s1", cfg.Database, got)
		}
	}
	_, err := withDatabase("postgres://h/admin?dbname=admin", "s1")
	require.Error(t, err)
}

func TestPayloads(t *testing.T) {
	require.Equal(t, "x/exec-1", payloadOf("x/exec-1"))
	require.Equal(t, "sg/id\x1fname", payloadOf("sg/id\x1fname"))
	for _, s := range []string{"nul\x00", "\xff", "é", string(make([]byte, maxPlainPayload+1))} {
		p := payloadOf(s)
		require.Len(t, p, len("#sha256:")+64)
		require.NotEqual(t, p, payloadOf(s+"x"))
	}
	require.LessOrEqual(t, len(channelOf("a_schema_name_of_the_greatest_length_postgres_allows_63_bytes_")), 63)
	require.NotEqual(t, channelOf("a"), channelOf("b"))
	require.NotEqual(t, lockKey("write", "a"), lockKey("write", "b"))
	require.NotEqual(t, lockKey("write", "a"), lockKey("migrate", "a"))
}

// Each migration step is applied once, in order, and recorded; a list that knows fewer steps
// than the database has is refused.
func TestMigrateAppliesEachStepOnce(t *testing.T) {
	url := tempDatabase(t)
	s, err := Open(context.Background(), url, Options{Schema: "m"})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	// A step that fails if it runs twice.
	next := append(append([]migration{}, migrations...), migration{
		Version: SchemaVersion() + 1, What: "a test step",
		SQL: `CREATE TABLE {s}.extra (x int); INSERT INTO {s}.extra VALUES (1)`,
	})
	require.NoError(t, s.migrate(ctx, next))
	require.NoError(t, s.migrate(ctx, next), "nothing to do the second time")
	var n int
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT count(*) FROM m.extra`).Scan(&n))
	require.Equal(t, 1, n)
	var what string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT what FROM m.schema_version WHERE version = $1`, SchemaVersion()+1).Scan(&what))
	require.Equal(t, "a test step", what)

	err = s.migrate(ctx, migrations)
	var se *store.SchemaError
	require.ErrorAs(t, err, &se)
	require.Equal(t, SchemaVersion()+1, se.Have)

	// A failing step keeps nothing of the steps before it in the same run.
	s2, err := Open(ctx, url, Options{Schema: "m2"})
	require.NoError(t, err)
	defer s2.Close()
	bad := append(append([]migration{}, migrations...),
		migration{Version: SchemaVersion() + 1, What: "fine", SQL: `CREATE TABLE {s}.fine (x int)`},
		migration{Version: SchemaVersion() + 2, What: "broken", SQL: `CREATE TABLE {s}.broken (x nosuchtype)`})
	require.ErrorContains(t, s2.migrate(ctx, bad), "broken")
	var have int64
	require.NoError(t, s2.pool.QueryRow(ctx, `SELECT max(version) FROM m2.schema_version`).Scan(&have))
	require.Equal(t, SchemaVersion(), have)
	var fine *string
	require.NoError(t, s2.pool.QueryRow(ctx, `SELECT to_regclass('m2.fine')::text`).Scan(&fine))
	require.Nil(t, fine, "the step before the broken one was rolled back with it")
}

// The pool's sessions carry the server-side bound of a stalled write transaction.
func TestSessionsBoundIdleTransactions(t *testing.T) {
	url := tempDatabase(t)
	s, err := Open(context.Background(), url, Options{WriteTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	var v string
	require.NoError(t, s.pool.QueryRow(context.Background(), `SHOW idle_in_transaction_session_timeout`).Scan(&v))
	require.Equal(t, "1500ms", v)
}
