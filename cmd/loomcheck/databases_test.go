package main

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// A database a scenario is done with is emptied and given to the next scenario; Close drops
// every database the run made.
func TestScenarioDatabasesAreEmptiedAndReused(t *testing.T) {
	pgtest.Require(t)
	ctx := context.Background()
	d := newServerDatabases(pgtest.AdminURL)
	prefix := fmt.Sprintf("loomcheck_dbtest_%d_", os.Getpid())

	u1, err := d.Create(ctx, prefix+"1")
	require.NoError(t, err)
	c, err := pgx.Connect(ctx, u1)
	require.NoError(t, err)
	_, err = c.Exec(ctx, `CREATE TABLE left_behind (k int)`)
	require.NoError(t, err)
	u2, err := d.Create(ctx, prefix+"2")
	require.NoError(t, err)
	require.NotEqual(t, u1, u2, "two scenarios at once have two databases")

	require.NoError(t, d.Drop(ctx, prefix+"1"))
	u3, err := d.Create(ctx, prefix+"3")
	require.NoError(t, err)
	require.Equal(t, u1, u3, "the emptied database is given out again")
	c3, err := pgx.Connect(ctx, u3)
	require.NoError(t, err)
	var n int
	require.NoError(t, c3.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = 'left_behind'`).Scan(&n))
	require.Zero(t, n, "what the last scenario left is gone")
	require.NoError(t, c3.Close(ctx))

	require.NoError(t, d.Drop(ctx, prefix+"2"))
	require.NoError(t, d.Drop(ctx, prefix+"3"))
	require.NoError(t, d.Close(ctx))
	admin, err := pgx.Connect(ctx, pgtest.AdminURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE $1`, prefix+"%").Scan(&n))
	require.Zero(t, n, "Close dropped every database the run made")
}
