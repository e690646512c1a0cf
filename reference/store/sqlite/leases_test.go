package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// userVersion reads PRAGMA user_version of the database at path, outside the store.
func userVersion(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var v int64
	require.NoError(t, db.QueryRow(`PRAGMA user_version`).Scan(&v))
	return v
}

// tables lists the tables of the database at path, outside the store.
func tables(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out
}

// knownVersion is the schema version of a store this binary creates.
func knownVersion(t *testing.T) int64 {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := sqlite.Open(bg, path, sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	v := userVersion(t, path)
	require.Positive(t, v)
	return v
}

func TestAStoreOfANewerSchemaIsRefused(t *testing.T) {
	know := knownVersion(t)
	t.Run("a store of the next version", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "loom.db")
		fill(t, path)
		raw(t, path, `PRAGMA user_version = `+itoa(know+1))
		_, err := sqlite.Open(bg, path, sqlite.Options{})
		require.ErrorIs(t, err, store.ErrSchemaNewer)
		var se *store.SchemaError
		require.ErrorAs(t, err, &se)
		require.Equal(t, store.SchemaError{Where: path, Have: know + 1, Know: know}, *se)
		require.Equal(t, know+1, userVersion(t, path), "the refused store keeps its version")
	})
	t.Run("a newer store's tables are left as they are", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "loom.db")
		raw(t, path, `CREATE TABLE future (x INTEGER)`, `PRAGMA user_version = `+itoa(know+7))
		_, err := sqlite.Open(bg, path, sqlite.Options{})
		var se *store.SchemaError
		require.ErrorAs(t, err, &se)
		require.Equal(t, store.SchemaError{Where: path, Have: know + 7, Know: know}, *se)
		require.Equal(t, []string{"future"}, tables(t, path), "Open added nothing to a store it refused")
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestAStoreWrittenBeforeLeasesIsMigrated(t *testing.T) {
	know := knownVersion(t)
	path := filepath.Join(t.TempDir(), "loom.db")
	fill(t, path)
	raw(t, path, `DROP TABLE leases`, `PRAGMA user_version = 2`)
	st := openAt(t, path)
	require.Equal(t, know, userVersion(t, path))
	evs, err := st.ReadForward(bg, "a", 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"1 k1", "2 k2", "3 k3"}, lines(evs))
	_, ok, err := st.Holder(bg, "engine")
	require.NoError(t, err)
	require.False(t, ok, "the new leases table starts empty")
	l, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	require.NoError(t, st.Fence(l).Update(bg, func(tx store.Tx) error { return tx.PutMeta("k", []byte("v")) }))
	require.NoError(t, st.Close())
	// The lease rows are summed and checked at Open like every other row.
	raw(t, path, `UPDATE leases SET holder = 'node-2'`)
	_, err = sqlite.Open(bg, path, sqlite.Options{})
	requireCorrupt(t, err, "leases")
}

func TestADamagedLeaseIsRefused(t *testing.T) {
	for _, set := range []string{`holder = 'node-2'`, `note = 'x'`, `token = token + 1`, `expires = expires + 1`, `name = 'other'`, `sum = sum + 1`, `sum = NULL`} {
		t.Run(set, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "loom.db")
			st := openAt(t, path)
			l, err := st.Acquire(bg, "engine", "node-1", "addr", time.Minute)
			require.NoError(t, err)
			raw(t, path, `UPDATE leases SET `+set)
			if set != `name = 'other'` {
				// Under the open store, every use of the grant finds the damage.
				_, _, err = st.Holder(bg, "engine")
				ce := requireCorrupt(t, err, "leases")
				require.Equal(t, "engine", ce.Key)
				_, err = st.Acquire(bg, "engine", "node-2", "", time.Minute)
				requireCorrupt(t, err, "leases")
				_, err = st.Renew(bg, l, time.Minute)
				requireCorrupt(t, err, "leases")
				requireCorrupt(t, st.Release(bg, l), "leases")
				requireCorrupt(t, st.Fence(l).Update(bg, func(tx store.Tx) error { return nil }), "leases")
			}
			require.NoError(t, st.Close())
			_, err = sqlite.Open(bg, path, sqlite.Options{})
			requireCorrupt(t, err, "leases")
		})
	}
}

// Closing a fenced view closes the view alone: its calls answer ErrClosed, the store goes on.
func TestClosingAFencedViewClosesTheViewOnly(t *testing.T) {
	st, _ := openTemp(t)
	l, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	view := st.Fence(l)
	require.NoError(t, view.Close())
	require.NoError(t, view.Close(), "closing twice is harmless")
	ran := false
	require.ErrorIs(t, view.Update(bg, func(tx store.Tx) error { ran = true; return nil }), store.ErrClosed)
	require.False(t, ran)
	_, err = view.ReadForward(bg, "s", 0, 0, 0)
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = view.ReadBackward(bg, "s", 0, 9, 0)
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = view.Head(bg, "s", 0)
	require.ErrorIs(t, err, store.ErrClosed)
	_, _, err = view.Meta(bg, "k")
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = view.MetaPrefix(bg, "")
	require.ErrorIs(t, err, store.ErrClosed)
	ch, cancel := view.Subscribe("s")
	appendKinds(t, st, "s", 0, "a")
	select {
	case <-ch:
		t.Fatal("a subscription through a closed view fired")
	default:
	}
	cancel()
	require.NoError(t, st.Fence(l).Update(bg, func(tx store.Tx) error { return tx.PutMeta("k", []byte("v")) }), "a new view of the grant writes")
	v, ok, err := st.Meta(bg, "k")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "v", string(v))
}

// Grants, renewals and releases that change the lease are durable writes the crash hook counts;
// a refusal is not.
func TestLeaseWritesAreDurableWrites(t *testing.T) {
	st, path := openTemp(t)
	l, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	_, err = st.Acquire(bg, "engine", "node-2", "", time.Minute)
	require.ErrorIs(t, err, store.ErrLeaseHeld)
	l, err = st.Renew(bg, l, time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 2, st.Writes())
	crashed := st.CrashAfterWrite(1)
	require.ErrorIs(t, st.Release(bg, l), store.ErrCrashed)
	<-crashed
	st.Kill()
	<-st.Released()
	re := openAt(t, path)
	h, ok, err := re.Holder(bg, "engine")
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, h.Expires.After(time.Now()), "the release committed before the crash")
}
