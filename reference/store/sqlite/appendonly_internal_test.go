package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/loomcheck/loomcheck/reference/store"

	"github.com/stretchr/testify/require"
)

// The store.Store interface has no way to change or remove an event, so the triggers that make the
// events table append-only are checked here, from inside the package, through the writer
// connection itself: even code that bypasses the interface cannot rewrite history.
func TestEventsTableRefusesUpdateAndDelete(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "loom.db"), Options{})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a", Data: []byte("1")}, store.NewEvent{Kind: "b", Data: []byte("2")})
		return err
	}))

	_, err = st.wc.ExecContext(ctx, `UPDATE events SET data = ? WHERE stream = 's' AND seq = 1`, []byte("forged"))
	require.Error(t, err, "UPDATE is refused")
	_, err = st.wc.ExecContext(ctx, `DELETE FROM events WHERE stream = 's' AND seq = 2`)
	require.Error(t, err, "DELETE is refused")
	_, err = st.wc.ExecContext(ctx, `DELETE FROM events`)
	require.Error(t, err, "a bulk DELETE is refused")

	// Inside a transaction of the store, the refusal aborts the transaction's statement and fn's
	// error rolls the rest back.
	err = st.Update(ctx, func(x store.Tx) error {
		if _, err := x.Append("s", 0, -1, store.NewEvent{Kind: "c"}); err != nil {
			return err
		}
		_, err := x.(*tx).s.wc.ExecContext(ctx, `UPDATE events SET kind = 'x'`)
		return err
	})
	require.Error(t, err)

	evs, err := st.ReadForward(ctx, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, "a", evs[0].Kind)
	require.Equal(t, "1", string(evs[0].Data), "the event was not rewritten")
	require.Equal(t, "b", evs[1].Kind)
	require.Equal(t, "2", string(evs[1].Data), "the event was not removed")
}
