package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

type tableRec struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// openTables opens a kernel with one flow (echo) over a new SQLite store (or over wrap(st) when wrap is
// set, a fenced view for instance).
func openTables(t *testing.T, wrap func(store.Store) store.Store) (*kernel.Kernel, store.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	var view store.Store = st
	if wrap != nil {
		view = wrap(st)
	}
	echo := func(_ *kernel.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil }
	k, err := kernel.Open(ctx, view, kernel.Options{Flows: map[string]kernel.Flow{"echo": echo}})
	require.NoError(t, err)
	t.Cleanup(func() {
		k.Close()
		st.Close()
	})
	return k, st
}

func putRecs(t *testing.T, k *kernel.Kernel, tbl kernel.Table[tableRec], recs map[string]tableRec) {
	t.Helper()
	require.NoError(t, k.Update(context.Background(), func(tx *kernel.Tx) error {
		for key, r := range recs {
			if err := tbl.Put(tx, key, r); err != nil {
				return err
			}
		}
		return nil
	}))
}

func rowKeys[T any](rows []kernel.Row[T]) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Key)
	}
	return out
}

// TestTablePutGetDeleteScan: what is put is read back whole, a delete removes the record (Get
// finds nothing, Scan lists nothing), and Scan lists by key order within the prefix, after the
// given key, at most the limit.
func TestTablePutGetDeleteScan(t *testing.T) {
	ctx := context.Background()
	k, _ := openTables(t, nil)
	tbl := kernel.NewTable[tableRec]("things", 1)
	require.NoError(t, tbl.Open(ctx, k))
	putRecs(t, k, tbl, map[string]tableRec{"b/2": {"two", 2}, "a/1": {"one", 1}, "b/1": {"b-one", 11}, "b/3": {"three", 3}, "c": {"c", 0}})

	v, ok, err := tbl.Get(ctx, k, "b/1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tableRec{"b-one", 11}, v)
	_, ok, err = tbl.Get(ctx, k, "b")
	require.NoError(t, err)
	require.False(t, ok, "a prefix of a key is not the key")

	rows, err := tbl.Scan(ctx, k, "b/", "", 0)
	require.NoError(t, err)
	require.Equal(t, []kernel.Row[tableRec]{{"b/1", tableRec{"b-one", 11}}, {"b/2", tableRec{"two", 2}}, {"b/3", tableRec{"three", 3}}}, rows)
	rows, err = tbl.Scan(ctx, k, "b/", "b/1", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"b/2"}, rowKeys(rows), "after the key, at most the limit")
	rows, err = tbl.Scan(ctx, k, "", "b/3", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"c"}, rowKeys(rows))

	var inside []string
	require.NoError(t, k.Update(ctx, func(tx *kernel.Tx) error {
		inside = inside[:0]
		if err := tbl.Delete(tx, "b/2"); err != nil {
			return err
		}
		if err := tbl.Delete(tx, "missing"); err != nil {
			return err
		}
		for _, key := range []string{"b/1", "b/2"} {
			_, ok, err := tbl.Get(ctx, tx, key)
			if err != nil {
				return err
			}
			inside = append(inside, fmt.Sprintf("%s %v", key, ok))
		}
		return nil
	}))
	require.Equal(t, []string{"b/1 true", "b/2 false"}, inside, "the transaction reads its own writes")
	_, ok, err = tbl.Get(ctx, k, "b/2")
	require.NoError(t, err)
	require.False(t, ok)
	all, err := tbl.All(ctx, k, "")
	require.NoError(t, err)
	require.Equal(t, []string{"a/1", "b/1", "b/3", "c"}, rowKeys(all))

	require.ErrorIs(t, k.Update(ctx, func(tx *kernel.Tx) error { return tbl.Put(tx, "", tableRec{}) }), kernel.ErrRecordKey)
	_, _, err = tbl.Get(ctx, k, "")
	require.ErrorIs(t, err, kernel.ErrRecordKey)
}

// TestTableUpdateIsWhole: an Update whose fn fails keeps none of its writes.
func TestTableUpdateIsWhole(t *testing.T) {
	ctx := context.Background()
	k, _ := openTables(t, nil)
	tbl := kernel.NewTable[tableRec]("things", 1)
	require.NoError(t, tbl.Open(ctx, k))
	putRecs(t, k, tbl, map[string]tableRec{"keep": {"kept", 1}})
	boom := errors.New("boom")
	require.ErrorIs(t, k.Update(ctx, func(tx *kernel.Tx) error {
		if err := tbl.Put(tx, "new", tableRec{"new", 2}); err != nil {
			return err
		}
		if err := tbl.Delete(tx, "keep"); err != nil {
			return err
		}
		return boom
	}), boom)
	all, err := tbl.All(ctx, k, "")
	require.NoError(t, err)
	require.Equal(t, []kernel.Row[tableRec]{{"keep", tableRec{"kept", 1}}}, all)
}

// TestTablesNeverShareAKey: tables whose names and keys hold the encoding's separators ('/',
// ':', digits) each read back only their own records.
func TestTablesNeverShareAKey(t *testing.T) {
	ctx := context.Background()
	k, _ := openTables(t, nil)
	names := []string{"a", "a/", "a/b", "1:a", "a:", "2:a/", "tbl", "10:aaaaaaaaa", "1", "x/1:a/"}
	keys := []string{"b", "/b", "b/", "a/b", ":a/b", "1:a/b", "0", "/", "a"}
	tables := map[string]kernel.Table[tableRec]{}
	for _, n := range names {
		tbl := kernel.NewTable[tableRec](n, 1)
		require.NoError(t, tbl.Open(ctx, k))
		tables[n] = tbl
		recs := map[string]tableRec{}
		for i, key := range keys {
			recs[key] = tableRec{Name: n, Count: i}
		}
		putRecs(t, k, tbl, recs)
	}
	for _, n := range names {
		for i, key := range keys {
			v, ok, err := tables[n].Get(ctx, k, key)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, tableRec{Name: n, Count: i}, v, "table %q key %q", n, key)
		}
		all, err := tables[n].All(ctx, k, "")
		require.NoError(t, err)
		require.Len(t, all, len(keys), "table %q lists its own records only", n)
		for _, r := range all {
			require.Equal(t, n, r.Value.Name, "table %q key %q", n, r.Key)
		}
	}
}

// TestTableVersionNewerIsRefused: a table whose stored version is newer than the code's is
// refused with a typed error; an older one is raised to the code's version.
func TestTableVersionNewerIsRefused(t *testing.T) {
	ctx := context.Background()
	k, _ := openTables(t, nil)
	err := kernel.NewTable[tableRec]("things", 2).Open(ctx, k)
	require.NoError(t, err)
	err = kernel.NewTable[tableRec]("things", 1).Open(ctx, k)
	var ve *kernel.TableVersionError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, kernel.TableVersionError{Table: "things", Have: 2, Know: 1}, *ve)
	require.ErrorIs(t, err, kernel.ErrTableNewer)
	err = kernel.NewTable[tableRec]("things", 3).Open(ctx, k)
	require.NoError(t, err)
	err = kernel.NewTable[tableRec]("things", 2).Open(ctx, k)
	require.ErrorAs(t, err, &ve)
	require.Equal(t, kernel.TableVersionError{Table: "things", Have: 3, Know: 2}, *ve)
	err = kernel.NewTable[tableRec]("other", 1).Open(ctx, k)
	require.NoError(t, err, "each table has its own version")

	for _, bad := range []struct {
		name    string
		version int64
	}{{"", 1}, {"a\x00b", 1}, {"ok", 0}} {
		err := kernel.NewTable[tableRec](bad.name, bad.version).Open(ctx, k)
		require.ErrorIs(t, err, kernel.ErrTableName, "%q %d", bad.name, bad.version)
	}
}

// TestTableRecordThatDoesNotDecodeIsCorrupt: a stored record that is not a T is a RecordError,
// which matches loomtype.ErrCorrupt, from Get and from Scan.
func TestTableRecordThatDoesNotDecodeIsCorrupt(t *testing.T) {
	ctx := context.Background()
	k, _ := openTables(t, nil)
	tbl := kernel.NewTable[tableRec]("things", 1)
	require.NoError(t, tbl.Open(ctx, k))
	other := kernel.NewTable[string]("things", 1)
	require.NoError(t, k.Update(ctx, func(tx *kernel.Tx) error { return other.Put(tx, "k", "a string") }))
	_, _, err := tbl.Get(ctx, k, "k")
	var re *kernel.RecordError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "things", re.Table)
	require.Equal(t, "k", re.Key)
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
	_, err = tbl.Scan(ctx, k, "", "", 0)
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
}

// TestTableWriteUnderAStaleLeaseIsFenced: once a newer grant of the kernel's lease exists, a
// table write is refused with store.ErrFenced, as a journal write is, and keeps nothing.
func TestTableWriteUnderAStaleLeaseIsFenced(t *testing.T) {
	ctx := context.Background()
	var ls store.Leases
	var old store.Lease
	k, st := openTables(t, func(st store.Store) store.Store {
		ls = st.(store.Leases)
		l, err := ls.Acquire(ctx, "engine", "node-1", "", time.Minute)
		require.NoError(t, err)
		old = l
		return ls.Fence(l)
	})
	tbl := kernel.NewTable[tableRec]("things", 1)
	require.NoError(t, tbl.Open(ctx, k))
	putRecs(t, k, tbl, map[string]tableRec{"a": {"a", 1}})

	newer, err := ls.Acquire(ctx, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	require.Greater(t, newer.Token, old.Token)

	err = k.Update(ctx, func(tx *kernel.Tx) error { return tbl.Put(tx, "b", tableRec{"b", 2}) })
	require.ErrorIs(t, err, store.ErrFenced)
	err = k.Update(ctx, func(tx *kernel.Tx) error { return tbl.Delete(tx, "a") })
	require.ErrorIs(t, err, store.ErrFenced)
	_, err = k.Start(ctx, kernel.StartRequest{ID: "x1", Flow: "echo", Input: json.RawMessage(`null`), Principal: alice})
	require.ErrorIs(t, err, store.ErrFenced, "a journal write is refused the same way")

	kvs, err := st.MetaPrefix(ctx, "")
	require.NoError(t, err)
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	require.Equal(t, []string{"tbl/6:things/a", "tblv/things"}, keys, "nothing of the fenced writes is kept")
}

// TestPrepareRunsBeforeRecoveryAndItsErrorFailsOpen: Options.Prepare is given the kernel with
// Open's context before anything is recovered, can write its tables, and its error is Open's.
func TestPrepareRunsBeforeRecoveryAndItsErrorFailsOpen(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	var seen []string
	k, err := kernel.Open(ctx, st, kernel.Options{Prepare: func(ctx context.Context, k *kernel.Kernel) error {
		tbl := kernel.NewTable[string]("prepared", 1)
		if err := tbl.Open(ctx, k); err != nil {
			return err
		}
		seen = append(seen, "prepare")
		return k.Update(ctx, func(tx *kernel.Tx) error { return tbl.Put(tx, "k", "v") })
	}})
	require.NoError(t, err)
	tbl := kernel.NewTable[string]("prepared", 1)
	v, ok, err := tbl.Get(ctx, k, "k")
	require.NoError(t, err)
	require.Equal(t, []any{"v", true}, []any{v, ok})
	require.Equal(t, []string{"prepare"}, seen)
	k.Close()

	boom := errors.New("boom")
	_, err = kernel.Open(ctx, st, kernel.Options{Prepare: func(context.Context, *kernel.Kernel) error { return boom }})
	require.ErrorIs(t, err, boom)
}

// TestAdoptMetaMovesOldKeysIntoATable: what fn keeps lands in the table and the old keys are gone,
// in one transaction, and what fn does not adopt stays; a failing fn adopts nothing; the kernel's
// own keys cannot be adopted.
func TestAdoptMetaMovesOldKeysIntoATable(t *testing.T) {
	ctx := context.Background()
	k, st := openTables(t, nil)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		for _, key := range []string{"old/a", "old/b", "older"} {
			if err := tx.PutMeta(key, []byte(`"v:`+key+`"`)); err != nil {
				return err
			}
		}
		return nil
	}))
	tbl := kernel.NewTable[string]("adopted", 1)
	require.NoError(t, tbl.Open(ctx, k))
	boom := errors.New("boom")
	_, err := k.AdoptMeta(ctx, "old/", func(tx *kernel.Tx, key string, val []byte) (bool, error) {
		if err := tbl.Put(tx, key, string(val)); err != nil {
			return false, err
		}
		return false, boom
	})
	require.ErrorIs(t, err, boom)
	kvs, err := st.MetaPrefix(ctx, "old")
	require.NoError(t, err)
	require.Len(t, kvs, 3, "a failing fn adopts nothing")

	n, err := k.AdoptMeta(ctx, "old/", func(tx *kernel.Tx, key string, val []byte) (bool, error) {
		if key == "old/b" {
			return false, nil // left where it is
		}
		return true, tbl.Put(tx, key, string(val))
	})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	all, err := tbl.All(ctx, k, "")
	require.NoError(t, err)
	require.Equal(t, []kernel.Row[string]{{"old/a", `"v:old/a"`}}, all)
	kvs, err = st.MetaPrefix(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, []store.KV{{Key: "old/b", Val: []byte(`"v:old/b"`)}, {Key: "older", Val: []byte(`"v:older"`)}}, kvs,
		"what is not adopted stays, and only the prefix is offered")

	for _, p := range []string{"", "tbl/", "tblv/x", "exec/", "e", "tb"} {
		_, err := k.AdoptMeta(ctx, p, func(*kernel.Tx, string, []byte) (bool, error) { return true, nil })
		require.ErrorIs(t, err, kernel.ErrAdoptPrefix, "%q", p)
	}
}
