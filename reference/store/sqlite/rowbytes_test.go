package sqlite_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// RowBytes counts what each row adds, column by column, while the store is open: an event its
// stream, kind and data and 32 bytes of integers; a metadata entry its key and value and 8; a
// remembered key its scope and key and 16.
func TestRowBytesCountsEachRowOnce(t *testing.T) {
	st, path := openTemp(t)
	before, err := sqlite.RowBytes(bg, path)
	require.NoError(t, err)
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("x/a", 0, 0, store.NewEvent{Kind: "k", Data: []byte("hello")}); err != nil {
			return err
		}
		if err := tx.PutMeta("m/1", []byte("val")); err != nil {
			return err
		}
		_, err := tx.Remember("scope", "key1", 10)
		return err
	}))
	after, err := sqlite.RowBytes(bg, path)
	require.NoError(t, err)
	event := len("x/a") + len("k") + len("hello") + 32
	meta := len("m/1") + len("val") + 8
	remembered := len("scope") + len("key1") + 16
	require.Equal(t, int64(event+meta+remembered), after-before)
}
