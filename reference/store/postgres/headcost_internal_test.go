package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// buffersOf is how many buffers (shared, hit or read) one run of q with args touches, as the
// server's EXPLAIN ANALYZE counts them over the whole plan. The statement runs in a transaction
// rolled back after it.
func buffersOf(t *testing.T, s *Postgres, q string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	var out []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q, args...).Scan(&out))
	var plan []struct {
		Plan struct {
			Hit  int `json:"Shared Hit Blocks"`
			Read int `json:"Shared Read Blocks"`
		}
	}
	require.NoError(t, json.Unmarshal(out, &plan))
	require.Len(t, plan, 1)
	return plan[0].Plan.Hit + plan[0].Plan.Read
}

// Reading a stream's head, which every append does, and numbering a remembered key cost the same
// few pages for a long stream or scope as for a short one, in a new store whose tables the server
// has no statistics of yet.
func TestHeadReadsDoNotGrowWithTheStream(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, tempDatabase(t), Options{})
	require.NoError(t, err)
	defer s.Close()
	const long = 8 * store.MaxRead
	evs := make([]store.NewEvent, store.MaxRead)
	for i := range evs {
		evs[i] = store.NewEvent{Kind: "k", Data: []byte("an event of a few dozen bytes, as a record is")}
	}
	for range long / store.MaxRead {
		require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
			_, err := tx.Append("x/long", 0, -1, evs...)
			return err
		}))
	}
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Append("x/short", 0, -1, evs[0]); err != nil {
			return err
		}
		for i := range long {
			if _, err := tx.Remember("r/long", fmt.Sprint(i), 0); err != nil {
				return err
			}
		}
		_, err := tx.Remember("r/short", "0", 0)
		return err
	}))
	for _, c := range []struct {
		what        string
		q           string
		long, short []any
	}{
		{"head", s.q.head, []any{bs("x/long"), int64(0)}, []any{bs("x/short"), int64(0)}},
		// An append whose expected head does not hold: the head is read, nothing is written.
		{"append", s.q.appendEvents,
			[]any{bs("x/long"), int64(0), int64(1), [][]byte{bs("k")}, [][]byte{{}}, int64(0)},
			[]any{bs("x/short"), int64(0), int64(long), [][]byte{bs("k")}, [][]byte{{}}, int64(0)}},
		{"remember", s.q.remember, []any{bs("r/long"), bs("new"), int64(0)}, []any{bs("r/short"), bs("new"), int64(0)}},
	} {
		l, sh := buffersOf(t, s, c.q, c.long...), buffersOf(t, s, c.q, c.short...)
		t.Logf("%s: %d buffers for %d entries, %d for 1", c.what, l, long, sh)
		// One more level of the index at most; a walk of the entries would read one page per
		// event it checks.
		require.LessOrEqual(t, l, sh+2, "%s of %d entries against 1", c.what, long)
	}
}
