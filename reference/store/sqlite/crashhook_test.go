package sqlite_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// The crash hook counts only transactions that changed something, lets the armed write commit,
// and lets nothing after it reach the store.
func TestCrashAfterWrite(t *testing.T) {
	st, path := openTemp(t)
	require.Equal(t, int64(0), st.Writes())
	appendKinds(t, st, "s", 0, "a")
	// A transaction that changes nothing is not a durable write.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Head("s", 0); return err }))
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Append("s", 0, -1); return err }))
	require.Equal(t, int64(1), st.Writes())
	// A key remembered again changes nothing either; metadata and a new key do.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Remember("r", "k", 8); return err }))
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { _, err := tx.Remember("r", "k", 8); return err }))
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return tx.PutMeta("m", []byte("v")) }))
	require.Equal(t, int64(3), st.Writes())

	crashed := st.CrashAfterWrite(2)
	appendKinds(t, st, "s", 0, "b")
	select {
	case <-crashed:
		t.Fatal("the crash fired one write early")
	default:
	}
	err := st.Update(bg, func(tx store.Tx) error { _, err := tx.Append("s", 0, 2, store.NewEvent{Kind: "c"}); return err })
	require.ErrorIs(t, err, store.ErrCrashed, "the armed write reports the crash")
	require.ErrorIs(t, err, store.ErrClosed)
	<-crashed
	require.Equal(t, int64(5), st.Writes())
	err = st.Update(bg, func(tx store.Tx) error { _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "d"}); return err })
	require.True(t, errors.Is(err, store.ErrClosed) && !errors.Is(err, store.ErrCrashed), "a write after the crash: %v", err)
	_, err = st.Head(bg, "s", 0)
	require.ErrorIs(t, err, store.ErrClosed, "reads after the crash")
	st.Kill() // what the abandoning driver does: harmless after the crash

	// The armed write is durable; the one after it is not.
	again := openAt(t, path)
	evs, err := again.ReadForward(bg, "s", 0, 0, 10)
	require.NoError(t, err)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	require.Equal(t, []string{"a", "b", "c"}, kinds)
	require.Equal(t, int64(0), again.Writes(), "a new store counts from zero")
}

// Unarmed, the hook never fires; a store killed before its crash point never closes the channel.
func TestCrashAfterWriteKilledFirst(t *testing.T) {
	st, _ := openTemp(t)
	crashed := st.CrashAfterWrite(5)
	appendKinds(t, st, "s", 0, "a")
	st.Kill()
	select {
	case <-crashed:
		t.Fatal("a killed store reported reaching its crash point")
	default:
	}
}
