package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Relaxed commits (store.Relaxed). A relaxed Update's transaction sets synchronous_commit off for
// itself: COMMIT returns once the server has the commit in memory, before its write-ahead log
// is flushed (which the server's WAL writer does within a few hundred milliseconds). A crash of
// the engine's process keeps it; a crash of the server (or of its machine) may lose it, and the
// relaxed commits after it, never a synchronous commit nor anything before one (the server
// flushes its log in order).
//
// The loss epoch is the table loss: its one row holds the count and the server's start time
// (pg_postmaster_start_time) it was last checked against. Whoever sees the server started anew
// since (an Open, or any connection the store makes later: a server that restarts under a
// running engine) raises the count, once per start, in a synchronous transaction, before that
// connection serves anything. That is conservative: a server shut down cleanly flushed
// everything, but a restart does not say how it stopped.

// relaxedSQL makes the transaction in progress commit without waiting for its log flush.
const relaxedSQL = `SET LOCAL synchronous_commit TO off`

// UpdateRelaxed implements store.Relaxed: Update, committing without waiting for the server's
// log flush.
//
//	err := st.UpdateRelaxed(ctx, func(tx store.Tx) error { _, err := tx.Append(s, 0, h, ev); return err })
func (s *Postgres) UpdateRelaxed(ctx context.Context, fn func(store.Tx) error) error {
	return s.updateMode(ctx, nil, true, fn)
}

// LossEpoch implements store.Relaxed: how many server starts this store has seen that may have
// lost relaxed commits.
//
//	epoch := st.LossEpoch()
func (s *Postgres) LossEpoch() int64 { return s.epoch.Load() }

// UpdateRelaxed is Postgres.UpdateRelaxed, fenced as Update is.
//
//	err := fenced.UpdateRelaxed(ctx, fn)
func (f *Fenced) UpdateRelaxed(ctx context.Context, fn func(store.Tx) error) error {
	if err := f.alive(); err != nil {
		return err
	}
	return f.s.updateMode(ctx, &f.lease, true, fn)
}

// LossEpoch is the store's.
func (f *Fenced) LossEpoch() int64 { return f.s.LossEpoch() }

// checkEpoch reads the loss epoch through c, raising it first when the server started since
// the row was written (or creating the row), and keeps it; the store keeps the highest it saw.
// A connection to a server that has not started since (every one but the first after a start)
// only reads the row: the connections of every node do not queue for it, each with a commit of
// its own.
func (s *Postgres) checkEpoch(ctx context.Context, c *pgx.Conn) error {
	var epoch int64
	var same bool
	err := c.QueryRow(ctx, sqlFor(s.opt.Schema, `SELECT epoch, started = pg_postmaster_start_time() FROM {s}.loss WHERE one = 1`)).Scan(&epoch, &same)
	switch {
	case err == nil && same:
		s.keepEpoch(epoch)
		return nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("store: %s: loss epoch: %w", s.where, err)
	}
	return s.raiseEpoch(ctx, c)
}

// raiseEpoch is checkEpoch's write: it raises the loss epoch when the server's start differs
// from the row's (once per start, whoever sees it first), or creates the row.
func (s *Postgres) raiseEpoch(ctx context.Context, c *pgx.Conn) error {
	tx, err := c.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return fmt.Errorf("store: %s: loss epoch: %w", s.where, err)
	}
	defer tx.Rollback(context.Background())
	var epoch int64
	err = tx.QueryRow(ctx, sqlFor(s.opt.Schema, `
INSERT INTO {s}.loss AS l (one, epoch, started) VALUES (1, 0, pg_postmaster_start_time())
ON CONFLICT (one) DO UPDATE SET epoch = l.epoch + 1, started = EXCLUDED.started
	WHERE l.started <> EXCLUDED.started
RETURNING epoch`)).Scan(&epoch)
	if err == pgx.ErrNoRows {
		// The row was there and the server has not started since: read it.
		err = tx.QueryRow(ctx, sqlFor(s.opt.Schema, `SELECT epoch FROM {s}.loss WHERE one = 1`)).Scan(&epoch)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return fmt.Errorf("store: %s: loss epoch: %w", s.where, err)
	}
	s.keepEpoch(epoch)
	return nil
}

// keepEpoch keeps epoch unless the store saw a higher one.
func (s *Postgres) keepEpoch(epoch int64) {
	for {
		have := s.epoch.Load()
		if epoch <= have || s.epoch.CompareAndSwap(have, epoch) {
			return
		}
	}
}

var _ store.Relaxed = (*Postgres)(nil)
