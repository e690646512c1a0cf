package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// fillMeta is fillLazy with metadata keys on either side of "exec/a", far from it too.
func fillMeta(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 20)
	st, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
		for _, k := range []string{"exec/0", "exec/b", "m/1", "m/2", "z/1"} {
			if err := tx.PutMeta(k, []byte(`{"state":"open"}`)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, st.Close())
	return path
}

// Open does not read the metadata table whole (it grows with the executions): a damaged row
// is refused at its first read, by key, by prefix or inside a transaction, before the check in
// the background reaches it; the check then refuses the store.
func TestADamagedMetadataRowIsRefusedAtItsFirstRead(t *testing.T) {
	ctx := context.Background()
	path := fillMeta(t)
	rawExec(t, path, `UPDATE meta SET val = CAST('{"state":"shut"}' AS BLOB) WHERE key = 'exec/a'`)
	_, release := holdCheck(t)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err, "Open reads no metadata row")
	defer st.Close()
	_, _, err = st.Meta(ctx, "exec/a")
	requireTable(t, err, "meta")
	_, err = st.MetaPrefix(ctx, "exec/")
	requireTable(t, err, "meta")
	err = st.Update(ctx, func(tx store.Tx) error { _, _, err := tx.Meta("exec/a"); return err })
	requireTable(t, err, "meta")
	v, ok, err := st.Meta(ctx, "z/1")
	require.NoError(t, err, "an undamaged key away from the damage is served while the check runs")
	require.True(t, ok)
	require.JSONEq(t, `{"state":"open"}`, string(v))
	release()
	<-st.CheckDone()
	require.False(t, st.CheckPassed())
	_, _, err = st.Meta(ctx, "z/1")
	requireTable(t, err, "meta")
}

// A row whose key changed is gone from where its key is looked up: the lookup, and a read of its
// prefix, meet it beside the key and refuse rather than answer that the key is absent.
func TestAMetadataRowWhoseKeyChangedIsRefusedWhereItWasLookedUp(t *testing.T) {
	ctx := context.Background()
	for _, moved := range []string{"exec/a2", "exec/9"} {
		t.Run(moved, func(t *testing.T) {
			path := fillMeta(t)
			rawExec(t, path, `UPDATE meta SET key = '`+moved+`' WHERE key = 'exec/a'`)
			holdCheck(t)
			st, err := Open(ctx, path, lazyOptions)
			require.NoError(t, err)
			defer st.Close()
			_, ok, err := st.Meta(ctx, "exec/a")
			requireTable(t, err, "meta")
			require.False(t, ok)
			_, err = st.MetaPrefix(ctx, "exec/")
			requireTable(t, err, "meta")
			_, err = st.MetaPrefix(ctx, "exec/a")
			requireTable(t, err, "meta")
		})
	}
}

// With the check in the background passed, the reads go on as before (no neighbour is read).
func TestMetadataReadsAfterTheCheckPassed(t *testing.T) {
	ctx := context.Background()
	path := fillMeta(t)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	defer st.Close()
	<-st.CheckDone()
	require.True(t, st.CheckPassed())
	kvs, err := st.MetaPrefix(ctx, "exec/")
	require.NoError(t, err)
	require.Len(t, kvs, 3)
	st.chk.mu.Lock()
	defer st.chk.mu.Unlock()
	require.Empty(t, st.chk.metas, "nothing is remembered once the check passed")
}
