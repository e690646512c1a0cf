package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// updateFailingWith runs one Update on a new store whose fn appends an event and then runs
// statement, which fails; it answers how many times fn ran, the head of the stream fn appended to
// afterwards, and the Update's error.
func updateFailingWith(t *testing.T, statement string) (runs int, head int64, err error) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, tempDatabase(t), Options{})
	require.NoError(t, err)
	defer s.Close()
	err = s.Update(ctx, func(stx store.Tx) error {
		runs++
		if _, err := stx.Append("s", 0, -1, store.NewEvent{Kind: "a"}); err != nil {
			return err
		}
		ptx := stx.(*tx)
		_, err := ptx.c.Exec(context.Background(), statement)
		return ptx.failed(err)
	})
	head, herr := s.Head(ctx, "s", 0)
	require.NoError(t, herr)
	return runs, head, err
}

// An Update whose every attempt the database aborts (here a statement that raises the deadlock
// code itself, so each attempt fails the same way) runs fn maxAttempts times, keeps nothing, and
// answers an error that matches ErrContended and still carries the database's error.
func TestAnUpdateAbortedOnEveryAttemptIsContended(t *testing.T) {
	runs, head, err := updateFailingWith(t, `DO $$ BEGIN RAISE EXCEPTION 'aborted on purpose' USING ERRCODE = '40P01'; END $$`)
	require.ErrorIs(t, err, ErrContended)
	require.False(t, errors.Is(err, store.ErrConflict), "contention is not a conflict of the store's contract")
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "40P01", pe.Code, "the database's own error")
	require.Equal(t, maxAttempts, runs, "fn runs once per attempt")
	require.Zero(t, head, "nothing of any attempt was kept")
}

// A statement that fails with an error other than contention (here a division by zero) is not
// tried again: fn runs once, nothing is kept, and the database's error comes back, not
// ErrContended.
func TestAnUpdateFailingOtherwiseRunsOnce(t *testing.T) {
	runs, head, err := updateFailingWith(t, `SELECT 1 / 0`)
	require.NotErrorIs(t, err, ErrContended)
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "22012", pe.Code, "the database's own error")
	require.Equal(t, 1, runs, "fn runs once")
	require.Zero(t, head, "nothing was kept")
}
