package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// The loss epoch goes up when the server's start differs from the one the loss row was counted
// at (the row is moved to an earlier start, as a server that started again leaves it): at Open,
// and at the next connection of a store already open; once per start, not per connection. A
// relaxed commit sets synchronous_commit off for its own transaction alone, leaving no connection
// set so after it.
func TestTheLossEpochCountsServerStarts(t *testing.T) {
	ctx := context.Background()
	url := tempDatabase(t)
	s, err := Open(ctx, url, Options{})
	require.NoError(t, err)
	defer s.Close()
	require.EqualValues(t, 0, s.LossEpoch(), "a new store")
	earlier := func() {
		_, err := s.pool.Exec(ctx, `UPDATE loss SET started = started - interval '1 hour'`)
		require.NoError(t, err)
	}

	earlier()
	s2, err := Open(ctx, url, Options{})
	require.NoError(t, err)
	require.EqualValues(t, 1, s2.LossEpoch(), "an open after another server start")
	require.NoError(t, s2.Close())
	s2, err = Open(ctx, url, Options{})
	require.NoError(t, err)
	require.EqualValues(t, 1, s2.LossEpoch(), "the same start again: no loss")
	require.NoError(t, s2.Close())

	earlier()
	s.pool.Reset() // every connection goes: the next is new, as after a server restart
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("v")) }))
	require.EqualValues(t, 2, s.LossEpoch(), "a running store's new connection saw the server started again")
	s.pool.Reset()
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("w")) }))
	require.EqualValues(t, 2, s.LossEpoch(), "once per start")

	// A new connection to a server that has not started since only reads the row: it neither
	// locks nor writes it (its xmax, set by a lock or an update, stays).
	var xmax, xmaxAfter string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT xmax::text FROM loss`).Scan(&xmax))
	s.pool.Reset()
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("w")) }))
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT xmax::text FROM loss`).Scan(&xmaxAfter))
	require.Equal(t, xmax, xmaxAfter, "the loss row after new connections of the same server start")
	require.EqualValues(t, 2, s.LossEpoch())

	var before, inside, after string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT reset_val FROM pg_settings WHERE name = 'synchronous_commit'`).Scan(&before))
	require.NoError(t, s.UpdateRelaxed(ctx, func(x store.Tx) error {
		// The transaction, and its setting, start with its first statement.
		if _, _, err := x.Meta("k"); err != nil {
			return err
		}
		return x.(*tx).c.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&inside)
	}))
	require.NoError(t, s.pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&after))
	require.Equal(t, "off", inside)
	require.Equal(t, before, after, "SET LOCAL ends with the transaction (the server's setting is %s)", before)

	// Whichever connection a relaxed commit took, none keeps its setting: with the database set
	// to wait for the flush, every idle connection of the pool after a relaxed commit (its own,
	// given back, among them) still waits.
	var db string
	require.NoError(t, s.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	_, err = s.pool.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET synchronous_commit TO on`)
	require.NoError(t, err)
	s.pool.Reset() // the connections from now on take the database's setting
	require.NoError(t, s.UpdateRelaxed(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("x")) }))
	idle := s.pool.AcquireAllIdle(ctx)
	require.NotEmpty(t, idle)
	for _, c := range idle {
		var now string
		err := c.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&now)
		c.Release()
		require.NoError(t, err)
		require.Equal(t, "on", now, "a connection after a relaxed commit")
	}
}
