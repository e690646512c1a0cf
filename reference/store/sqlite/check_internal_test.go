package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// lazyOptions check every database in the background.
var lazyOptions = Options{CheckInBackgroundOver: 1}

// fillLazy writes streams s-000 to s-(n-1) of five events each, a remembered key in scope
// "dedupe/a" and a metadata key, and closes the store cleanly.
func fillLazy(t *testing.T, path string, n int) {
	t.Helper()
	st, err := Open(context.Background(), path, Options{})
	require.NoError(t, err)
	require.NoError(t, st.Update(context.Background(), func(tx store.Tx) error {
		for i := range n {
			for j := range 5 {
				if _, err := tx.Append(fmt.Sprintf("s-%03d", i), 0, -1, store.NewEvent{Kind: fmt.Sprintf("k%d", j+1), Data: []byte(`"data"`)}); err != nil {
					return err
				}
			}
		}
		if _, err := tx.Remember("dedupe/a", "alice|m-1", 10); err != nil {
			return err
		}
		if _, err := tx.Remember("dedupe/b", "bob|m-1", 10); err != nil {
			return err
		}
		return tx.PutMeta("exec/a", []byte(`{"state":"open"}`))
	}))
	require.NoError(t, st.Close())
}

// rawExec runs statements on the database file outside the store, dropping the append-only
// trigger first: what a careless hand does.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	for _, q := range append([]string{`DROP TRIGGER IF EXISTS events_append_only_u`}, stmts...) {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
}

// holdCheck makes the next checks in the background wait until release is called (or their
// store stops); started is closed once one is waiting.
func holdCheck(t *testing.T) (started <-chan struct{}, release func()) {
	t.Helper()
	st, rel := make(chan struct{}), make(chan struct{})
	var once bool
	checkStarting = func(ctx context.Context) {
		if !once {
			once = true
			close(st)
		}
		select {
		case <-rel:
		case <-ctx.Done():
		}
	}
	var released bool
	release = func() {
		if !released {
			released = true
			close(rel)
		}
	}
	t.Cleanup(func() { release(); checkStarting = nil })
	return st, release
}

func requireTable(t *testing.T, err error, table string) *store.CorruptError {
	t.Helper()
	require.ErrorIs(t, err, store.ErrCorrupt)
	var ce *store.CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, table, ce.Table, "%v", err)
	return ce
}

func TestALargeStoreOpensBeforeItIsCheckedWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	started, release := holdCheck(t)
	st, err := Open(context.Background(), path, lazyOptions)
	require.NoError(t, err)
	defer st.Close()
	<-started
	require.False(t, st.CheckPassed(), "the check runs in the background")
	evs, err := st.ReadForward(context.Background(), "s-007", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 5)
	release()
	<-st.CheckDone()
	require.True(t, st.CheckPassed())
	evs, err = st.ReadBackward(context.Background(), "s-049", 0, 100, 10)
	require.NoError(t, err)
	require.Len(t, evs, 5)
}

// Damage made while the store was closed, in a stream Open did not read: the stream's first read
// refuses it, however early, and the check in the background then refuses the whole store and
// records the damage, so that the next Open refuses it before serving anything.
func TestDamageInAStreamNotReadAtOpenIsRefusedAtItsFirstRead(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	rawExec(t, path, `UPDATE events SET data = CAST('"datb"' AS BLOB) WHERE stream = 's-020' AND seq = 3`)
	_, release := holdCheck(t)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err, "Open reads no event")
	_, err = st.ReadForward(ctx, "s-020", 0, 3, 10)
	ce := requireTable(t, err, "events")
	require.Equal(t, [3]any{"s-020", int64(0), int64(3)}, [3]any{ce.Stream, ce.Gen, ce.Seq})
	_, err = st.ReadBackward(ctx, "s-020", 0, 100, 1)
	requireTable(t, err, "events")
	_, err = st.Head(ctx, "s-020", 0)
	requireTable(t, err, "events")
	err = st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append("s-020", 0, -1, store.NewEvent{Kind: "k6"})
		return err
	})
	requireTable(t, err, "events")
	evs, err := st.ReadForward(ctx, "s-021", 0, 0, 10)
	require.NoError(t, err, "an undamaged stream is served while the check runs")
	require.Len(t, evs, 5)
	_, err = os.Stat(damagedPath(path))
	require.NoError(t, err, "the damage found is recorded")

	release()
	<-st.CheckDone()
	require.False(t, st.CheckPassed())
	_, err = st.ReadForward(ctx, "s-021", 0, 0, 10)
	requireTable(t, err, "events")
	err = st.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("v")) })
	requireTable(t, err, "events")
	require.NoError(t, st.Close())

	checkStarting = nil
	_, err = Open(ctx, path, lazyOptions)
	ce = requireTable(t, err, "events")
	require.Equal(t, "s-020", ce.Stream, "the next Open checks the whole store")
}

// A flipped byte in a row's key leaves the row among its old neighbours, out of the table's
// order: the stream's first read meets it (it ends the stream early, or the read starts past it)
// and refuses the stream rather than serving it shorter.
func TestAFlippedKeyByteIsRefusedAtTheStreamsFirstRead(t *testing.T) {
	for at := range 5 {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "loom.db")
			fillLazy(t, path, 50)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			name := []byte("s-030")
			var offs []int
			for i := 0; ; {
				j := bytes.Index(b[i:], name)
				if j < 0 {
					break
				}
				// Only the rows themselves, in leaf pages (0x0a): a key copied into an interior
				// page steers the lookups (see the limit in check.go).
				if page := (i + j) / 4096 * 4096; page > 0 && b[page] == 0x0a {
					offs = append(offs, i+j)
				}
				i += j + 1
			}
			require.Len(t, offs, 5, "one key per event of the stream")
			b[offs[at]+4] ^= 0x08 // "s-030" becomes "s-038"
			require.NoError(t, os.WriteFile(path, b, 0o600))
			holdCheck(t)
			st, err := Open(ctx, path, lazyOptions)
			if err != nil {
				// The row out of order may also misdirect Open's lookup of the newest event it
				// recorded (a stream beside s-030 in the same page): the store is then refused
				// at Open, which serves nothing either.
				require.ErrorIs(t, err, store.ErrCorrupt)
				return
			}
			defer st.Close()
			evs, err := st.ReadForward(ctx, "s-030", 0, 0, 10)
			require.ErrorIs(t, err, store.ErrCorrupt, "served %d events", len(evs))
		})
	}
}

func TestADamagedRememberedScopeIsRefusedBeforeItsFirstLookup(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	rawExec(t, path, `UPDATE remembered SET key = 'alice|m-2' WHERE key = 'alice|m-1'`)
	holdCheck(t)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	defer st.Close()
	err = st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Remember("dedupe/a", "alice|m-1", 10)
		return err
	})
	requireTable(t, err, "remembered")
	var fresh bool
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		var err error
		fresh, err = tx.Remember("dedupe/b", "bob|m-1", 10)
		return err
	}))
	require.False(t, fresh, "an undamaged scope answers as before")
}

// The check in the background writes nothing: a crash while it runs leaves a store that opens
// and checks whole again.
func TestACrashDuringTheCheckIsHarmless(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	started, _ := holdCheck(t)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	<-started
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append("s-001", 0, 5, store.NewEvent{Kind: "k6"})
		return err
	}))
	st.Kill()
	<-st.Released()
	<-st.CheckDone()
	require.False(t, st.CheckPassed())
	checkStarting = nil

	st, err = Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	defer st.Close()
	<-st.CheckDone()
	require.True(t, st.CheckPassed())
	evs, err := st.ReadForward(ctx, "s-001", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 6)
	_, err = os.Stat(damagedPath(path))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// The newest file names an event of the newest commit: a database that lost it (its write-ahead
// log cut short, an older copy in its place) is refused at Open without counting its events.
func TestLostCommitsAreFoundWithoutCounting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 50)
	old, err := os.ReadFile(path)
	require.NoError(t, err)
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append("s-900", 0, 0, store.NewEvent{Kind: "k1"})
		return err
	}))
	require.NoError(t, st.Close())
	n, ok := parseHead(mustRead(t, headPath(path)))
	require.True(t, ok)
	nn, ev, ok := parseNewest(mustRead(t, newestPath(path)))
	require.True(t, ok)
	require.Equal(t, n, nn, "the newest file goes with the head file's count")
	require.Equal(t, newestEvent{k: headKey{"s-900", 0}, seq: 1, ok: true}, ev)
	require.NoError(t, os.WriteFile(path, old, 0o600)) // the older copy
	_, err = Open(ctx, path, lazyOptions)
	ce := requireTable(t, err, "events")
	require.Equal(t, "s-900", ce.Stream)
}

// Commits that append to one stream leave the newest file as the first of them wrote it; Open
// finds the newest commit's event from it without counting, after a crash as after a clean
// close, and a commit lost behind it is found by counting.
func TestOneStreamsCommitsLeaveTheNewestFileStanding(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 3)
	appendS900 := func(st *SQLite, commits int) {
		for range commits {
			require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
				_, err := tx.Append("s-900", 0, -1, store.NewEvent{Kind: "k1"})
				return err
			}))
		}
	}
	st, err := Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	<-st.CheckDone()
	appendS900(st, 3)
	require.NoError(t, st.Close())
	old := mustRead(t, path)

	st, err = Open(ctx, path, lazyOptions)
	require.NoError(t, err)
	require.Equal(t, newestEvent{k: headKey{"s-900", 0}, seq: 3, ok: true}, st.newest, "found through the newest file")
	appendS900(st, 1)
	st.Kill()
	<-st.Released()
	n, ok := parseHead(mustRead(t, headPath(path)))
	require.True(t, ok)
	nn, ev, ok := parseNewest(mustRead(t, newestPath(path)))
	require.True(t, ok)
	require.Equal(t, int64(3*5+4), n)
	require.Equal(t, n-3, nn, "written by the first commit to s-900, and left")
	require.Equal(t, newestEvent{k: headKey{"s-900", 0}, seq: 1, ok: true}, ev)

	st, err = Open(ctx, path, lazyOptions)
	require.NoError(t, err, "after a crash")
	require.Equal(t, newestEvent{k: headKey{"s-900", 0}, seq: 4, ok: true}, st.newest)
	<-st.CheckDone()
	require.True(t, st.CheckPassed())
	require.NoError(t, st.Close())

	require.NoError(t, os.WriteFile(path, old, 0o600)) // the copy from before the fourth commit
	_, err = Open(ctx, path, lazyOptions)
	ce := requireTable(t, err, "events")
	require.Contains(t, ce.Reason, "commits were lost")
}

// Without a newest file for the head file's count (lost, damaged, or left by a crash between the
// two writes), Open counts the events to compare, then writes one.
func TestWithoutTheNewestFileOpenCounts(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	fillLazy(t, path, 3)
	for _, damage := range []func(){
		func() { require.NoError(t, os.Remove(newestPath(path))) },
		func() {
			b := mustRead(t, newestPath(path))
			b[40] ^= 1
			require.NoError(t, os.WriteFile(newestPath(path), b, 0o600))
		},
		func() {
			require.NoError(t, os.WriteFile(newestPath(path), newestRecord(14, newestEvent{k: headKey{"gone", 0}, seq: 1, ok: true}), 0o600))
		},
	} {
		damage()
		st, err := Open(ctx, path, lazyOptions)
		require.NoError(t, err)
		require.NoError(t, st.Close())
		nn, ev, ok := parseNewest(mustRead(t, newestPath(path)))
		require.True(t, ok)
		require.Equal(t, int64(15), nn, "the count, counted")
		require.False(t, ev.ok, "no commit since: no event of the newest commit is known to name")
	}
	require.NoError(t, os.Remove(newestPath(path)))
	require.NoError(t, os.WriteFile(headPath(path), headRecord(16), 0o600))
	_, err := Open(ctx, path, lazyOptions)
	requireTable(t, err, "events")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}
