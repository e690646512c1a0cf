package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// fromDB is what the database itself answers for the three reads the view serves, read with the
// readers' statements as the store does when the view does not know.
type fromDB struct {
	head int64
	evs  []store.Event
	meta []byte
	has  bool
}

// openCachedStore is openTestStore with every stream and key cached.
func openCachedStore(t *testing.T) *SQLite {
	t.Helper()
	st, err := Open(context.Background(), filepath.Join(t.TempDir(), "loom.db"), Options{SyncNormal: true,
		Cached: func(string) bool { return true }})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func readDB(t *testing.T, st *SQLite, stream string, after int64, key string) fromDB {
	t.Helper()
	ctx := context.Background()
	var got fromDB
	require.NoError(t, st.rs.head.QueryRowContext(ctx, stream, 0).Scan(&got.head))
	evs, err := st.query(ctx, st.rs.forward, stream, 0, after, store.MaxRead)
	require.NoError(t, err)
	got.evs = evs
	var sum any
	err = st.rs.meta.QueryRowContext(ctx, key).Scan(&got.meta, &sum)
	if err == nil {
		got.has = true
	}
	return got
}

// readStore is what the store answers for the same reads.
func readStore(t *testing.T, st *SQLite, stream string, after int64, key string) fromDB {
	t.Helper()
	ctx := context.Background()
	var got fromDB
	var err error
	got.head, err = st.Head(ctx, stream, 0)
	require.NoError(t, err)
	got.evs, err = st.ReadForward(ctx, stream, 0, after, 0)
	require.NoError(t, err)
	got.meta, got.has, err = st.Meta(ctx, key)
	require.NoError(t, err)
	return got
}

// The view answers exactly what the database holds after each commit: heads, the events after
// every cursor near the head, metadata written, rewritten and absent.
func TestTheViewAnswersWhatTheDatabaseHolds(t *testing.T) {
	st := openCachedStore(t)
	ctx := context.Background()
	for i := range 3 * tailEvents {
		require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
			evs := make([]store.NewEvent, 1+i%3)
			for j := range evs {
				evs[j] = store.NewEvent{Kind: fmt.Sprintf("k%d", j), Data: []byte(fmt.Sprintf(`{"i":%d,"j":%d}`, i, j))}
			}
			if i%4 == 1 {
				evs = append(evs, store.NewEvent{Kind: "empty", Data: []byte{}}, store.NewEvent{Kind: "none"})
			}
			if _, err := tx.Append("in/a", 0, -1, evs...); err != nil {
				return err
			}
			return tx.PutMeta("exec/a", []byte(fmt.Sprintf(`{"v":%d}`, i)))
		}))
		head, err := st.Head(ctx, "in/a", 0)
		require.NoError(t, err)
		for after := int64(0); after <= head+1; after++ {
			require.Equal(t, readDB(t, st, "in/a", after, "exec/a"), readStore(t, st, "in/a", after, "exec/a"), "commit %d, after %d", i, after)
		}
		require.Equal(t, readDB(t, st, "in/b", 0, "exec/b"), readStore(t, st, "in/b", 0, "exec/b"))
	}
	// The view did answer: the newest events, the head and the metadata are in it.
	head, ok := st.view.head(headKey{"in/a", 0})
	require.True(t, ok)
	evs, ok := st.view.forward(headKey{"in/a", 0}, head-1, 8)
	require.True(t, ok)
	require.Len(t, evs, 1)
	_, present, known, _ := st.view.metaOf("exec/a")
	require.True(t, known)
	require.True(t, present)
	// It keeps at most tailEvents of a stream: a read from further back goes to the database.
	_, ok = st.view.forward(headKey{"in/a", 0}, head-tailEvents-1, 100)
	require.False(t, ok)
}

// What an Update that failed wrote never reaches the view, whether it was alone in its
// transaction or one of a batch; what the Updates beside it wrote does.
func TestTheViewHoldsOnlyWhatCommitted(t *testing.T) {
	st := openCachedStore(t)
	ctx := context.Background()
	boom := errors.New("boom")
	require.NoError(t, appendTo(st, "s", 0, []byte("1")))
	err := st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, 1, store.NewEvent{Kind: "x", Data: []byte("2")}); err != nil {
			return err
		}
		if err := tx.PutMeta("m", []byte("no")); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, readDB(t, st, "s", 0, "m"), readStore(t, st, "s", 0, "m"))
	require.Equal(t, readDB(t, st, "s", 1, "m"), readStore(t, st, "s", 1, "m"))
	h, _ := st.view.head(headKey{"s", 0})
	require.EqualValues(t, 1, h)

	// A batch: the second of three Updates fails, the first and third commit with it.
	st.wmu.Lock() // hold the writer so that the three queue behind one another and share a commit
	errs := make(chan error, 3)
	for i, fail := range []bool{false, true, false} {
		go func() {
			errs <- st.Update(ctx, func(tx store.Tx) error {
				if _, err := tx.Append(fmt.Sprintf("b%d", i), 0, 0, store.NewEvent{Kind: "x", Data: []byte("d")}); err != nil {
					return err
				}
				if err := tx.PutMeta(fmt.Sprintf("m%d", i), []byte("v")); err != nil {
					return err
				}
				if fail {
					return boom
				}
				return nil
			})
		}()
	}
	waitQueued(t, st, 3)
	st.wmu.Unlock()
	var failed int
	for range 3 {
		if err := <-errs; err != nil {
			require.ErrorIs(t, err, boom)
			failed++
		}
	}
	require.Equal(t, 1, failed)
	for i := range 3 {
		s, m := fmt.Sprintf("b%d", i), fmt.Sprintf("m%d", i)
		require.Equal(t, readDB(t, st, s, 0, m), readStore(t, st, s, 0, m), "update %d", i)
		_, ok := st.view.head(headKey{s, 0})
		require.Equal(t, i != 1, ok, "update %d", i)
	}
}

// waitQueued waits until n Updates wait in the queue.
func waitQueued(t *testing.T, st *SQLite, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		st.qmu.Lock()
		defer st.qmu.Unlock()
		return len(st.queue)-st.qhead >= n
	}, 5e9, 1e6)
}

// A reader that finds the writer holding the view (a COMMIT in progress) reads the database,
// and what it read then is not kept: the commit may have changed it.
func TestAReaderDoesNotWaitForACommit(t *testing.T) {
	st := openCachedStore(t)
	ctx := context.Background()
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("old")) }))
	require.NoError(t, appendTo(st, "s", 0, []byte("1")))
	st.view.hold()
	v, ok, err := st.Meta(ctx, "k")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "old", string(v))
	h, err := st.Head(ctx, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, h)
	evs, err := st.ReadForward(ctx, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	st.view.commitHeld(nil, nil)

	// A value read while the epoch moved is not kept.
	st.view.mu.Lock()
	st.view.meta.reset()
	st.view.mu.Unlock()
	_, _, known, epoch := st.view.metaOf("k")
	require.False(t, known)
	st.view.hold()
	st.view.commitHeld([]*applied{{metas: []metaPut{{key: "k", val: []byte("new")}}}}, nil)
	st.view.fillMeta("k", []byte("old"), true, epoch)
	v, _, known, _ = st.view.metaOf("k")
	require.True(t, known)
	require.Equal(t, "new", string(v))
}

// The data a read returns is the caller's: changing it changes nothing the store answers next.
func TestReadsFromTheViewAreCopies(t *testing.T) {
	st := openCachedStore(t)
	ctx := context.Background()
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "x", Data: []byte("abc")}); err != nil {
			return err
		}
		return tx.PutMeta("k", []byte("val"))
	}))
	evs, err := st.ReadForward(ctx, "s", 0, 0, 0)
	require.NoError(t, err)
	copy(evs[0].Data, "zzz")
	v, _, err := st.Meta(ctx, "k")
	require.NoError(t, err)
	copy(v, "zzz")
	evs, err = st.ReadForward(ctx, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, "abc", string(evs[0].Data))
	v, _, err = st.Meta(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "val", string(v))
}

// The view is bounded: an event larger than tailEventBytes is not kept (its stream is read from
// the database), and the maps keep two generations of viewKeys entries at most.
func TestTheViewIsBounded(t *testing.T) {
	st := openCachedStore(t)
	ctx := context.Background()
	big := []byte(`"` + strings.Repeat("x", tailEventBytes) + `"`)
	require.NoError(t, appendTo(st, "s", 0, []byte("1")))
	require.NoError(t, appendTo(st, "s", 1, big))
	_, ok := st.view.forward(headKey{"s", 0}, 0, 10)
	require.False(t, ok)
	require.Equal(t, readDB(t, st, "s", 0, "k"), readStore(t, st, "s", 0, "k"))
	require.NoError(t, appendTo(st, "s", 2, []byte("3")))
	evs, ok := st.view.forward(headKey{"s", 0}, 2, 10)
	require.True(t, ok)
	require.Len(t, evs, 1)

	const n = 2*viewKeys + 100
	for i := 0; i < n; i += 1000 {
		require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
			for j := i; j < min(i+1000, n); j++ {
				if _, err := tx.Append(fmt.Sprintf("t/%d", j), 0, 0, store.NewEvent{Kind: "x", Data: []byte("1")}); err != nil {
					return err
				}
				if err := tx.PutMeta(fmt.Sprintf("m/%d", j), []byte("1")); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	st.view.mu.Lock()
	defer st.view.mu.Unlock()
	require.LessOrEqual(t, st.view.heads.len(), 2*viewKeys)
	require.LessOrEqual(t, st.view.tails.len(), 2*viewKeys)
	require.LessOrEqual(t, st.view.meta.len(), 2*viewKeys)
}

// Only what Options.Cached names is answered from memory: a stream or key it does not name is read
// from the database every time, so a row changed behind the store's back is noticed there.
func TestOnlyWhatIsCachedIsAnsweredFromMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := Open(context.Background(), path, Options{SyncNormal: true,
		Cached: func(name string) bool { return strings.HasPrefix(name, "hot/") }})
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		for _, s := range []string{"hot/s", "cold/s"} {
			if _, err := tx.Append(s, 0, 0, store.NewEvent{Kind: "x", Data: []byte(`"pump 7"`)}); err != nil {
				return err
			}
			if err := tx.PutMeta(s, []byte(`"pump 7"`)); err != nil {
				return err
			}
		}
		return nil
	}))
	_, ok := st.view.forward(headKey{"hot/s", 0}, 0, 10)
	require.True(t, ok)
	_, ok = st.view.forward(headKey{"cold/s", 0}, 0, 10)
	require.False(t, ok)
	_, _, known, _ := st.view.metaOf("hot/s")
	require.True(t, known)
	v, present, known, epoch := st.view.metaOf("cold/s")
	require.Nil(t, v)
	require.False(t, present)
	require.False(t, known)
	st.view.fillMeta("cold/s", []byte("x"), true, st.view.epoch)
	_, _, known, _ = st.view.metaOf("cold/s")
	require.False(t, known, "a read of a key not cached is not kept")
	_, kept := st.view.meta.peek("cold/s")
	require.False(t, kept, "nor taken into the view")
	require.Zero(t, epoch, "a key not cached is not looked up in the view")

	// Behind the store's back: the cold rows read as damaged, the hot ones as committed.
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for _, q := range []string{`DROP TRIGGER events_append_only_u`, `UPDATE events SET data = CAST('"pump 8"' AS BLOB)`,
		`UPDATE meta SET val = CAST('"pump 8"' AS BLOB)`} {
		_, err = db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	_, err = st.ReadForward(ctx, "cold/s", 0, 0, 0)
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, _, err = st.Meta(ctx, "cold/s")
	require.ErrorIs(t, err, store.ErrCorrupt)
	evs, err := st.ReadForward(ctx, "hot/s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, `"pump 7"`, string(evs[0].Data))
	v, _, err = st.Meta(ctx, "hot/s")
	require.NoError(t, err)
	require.Equal(t, `"pump 7"`, string(v))
}

// A store opened on what an earlier one wrote starts with an empty view: the first read of a
// cached key goes to the database and keeps exactly what it read (the value, or its absence),
// and the next read is answered from the view. metaOf's whole answer is checked each time.
func TestAReadOfTheDatabaseFillsTheView(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx := context.Background()
	st, err := Open(ctx, path, Options{SyncNormal: true})
	require.NoError(t, err)
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("exec/a", []byte(`{"v":1}`)) }))
	require.NoError(t, st.Close())

	st, err = Open(ctx, path, Options{SyncNormal: true, Cached: func(string) bool { return true }})
	require.NoError(t, err)
	defer st.Close()
	type answer struct {
		val            string
		present, known bool
		epoch          uint64
	}
	metaOf := func(key string) answer {
		v, present, known, epoch := st.view.metaOf(key)
		return answer{string(v), present, known, epoch}
	}
	epoch := st.view.epoch
	require.Equal(t, answer{epoch: epoch}, metaOf("exec/a"), "not in the view yet")
	require.Equal(t, answer{epoch: epoch}, metaOf("exec/b"))
	for range 2 {
		v, ok, err := st.Meta(ctx, "exec/a")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, `{"v":1}`, string(v))
		_, ok, err = st.Meta(ctx, "exec/b")
		require.NoError(t, err)
		require.False(t, ok)
	}
	require.Equal(t, answer{val: `{"v":1}`, present: true, known: true}, metaOf("exec/a"))
	require.Equal(t, answer{known: true}, metaOf("exec/b"))
}

// A read after the head of a stream this store appended to, cached or not, finds nothing new
// without asking the database (whose readers are closed here, so that a query would fail); a
// read from below the head still asks it.
func TestAReadAfterTheHeadAsksNothingOfTheDatabase(t *testing.T) {
	st, err := Open(context.Background(), filepath.Join(t.TempDir(), "loom.db"), Options{SyncNormal: true,
		Cached: func(name string) bool { return strings.HasPrefix(name, "hot/") }})
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	for range 2 {
		require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
			_, err := tx.Append("cold/s", 0, -1, store.NewEvent{Kind: "x", Data: []byte(`"pump 7"`)})
			return err
		}))
	}
	require.NoError(t, st.r.Close())
	for _, after := range []int64{2, 3} {
		evs, err := st.ReadForward(ctx, "cold/s", 0, after, 0)
		require.NoError(t, err, "after %d", after)
		require.Empty(t, evs)
	}
	_, err = st.ReadForward(ctx, "cold/s", 0, 1, 0)
	require.Error(t, err, "the events after 1 are read from the database")
}
