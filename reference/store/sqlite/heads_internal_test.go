package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// appendTo appends one event to (stream, 0) expecting head expect, in one Update.
func appendTo(st *SQLite, stream string, expect int64, data []byte) error {
	return st.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(stream, 0, expect, store.NewEvent{Kind: "x", Data: data})
		return err
	})
}

// openTestStore opens a store (synchronous NORMAL) in a test's directory, closed when the test
// ends.
func openTestStore(t *testing.T) *SQLite {
	t.Helper()
	st, err := Open(context.Background(), filepath.Join(t.TempDir(), "loom.db"), Options{SyncNormal: true})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// The writer's heads are bounded: two generations of headsKept.
func TestTheHeadsKeptAreBounded(t *testing.T) {
	st := openTestStore(t)
	const n = 3*headsKept + 7
	for i := 0; i < n; i += 500 {
		require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
			for j := i; j < min(i+500, n); j++ {
				if _, err := tx.Append(fmt.Sprintf("s/%d", j), 0, 0, store.NewEvent{Kind: "x"}); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	st.wmu.Lock()
	kept := st.heads.len()
	st.wmu.Unlock()
	require.LessOrEqual(t, kept, 2*headsKept)
	// Every stream, whether its head is kept or not, is judged right.
	for _, j := range []int{0, 1, n / 2, n - 1} {
		err := appendTo(st, fmt.Sprintf("s/%d", j), 0, nil)
		require.ErrorIs(t, err, store.ErrConflict, "stream %d", j)
		require.NoError(t, appendTo(st, fmt.Sprintf("s/%d", j), 1, nil), "stream %d", j)
	}
}
