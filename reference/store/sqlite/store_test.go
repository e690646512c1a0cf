package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var bg = context.Background()

// openAt opens a store at path and closes it when the test ends (closing twice is harmless).
func openAt(t testing.TB, path string) *sqlite.SQLite {
	t.Helper()
	st, err := sqlite.Open(bg, path, sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func openTemp(t testing.TB) (*sqlite.SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	return openAt(t, path), path
}

// appendKinds appends one event per kind to (stream, gen) in one transaction and returns the
// new head.
func appendKinds(t testing.TB, st store.Store, stream string, gen int64, kinds ...string) int64 {
	t.Helper()
	evs := make([]store.NewEvent, len(kinds))
	for i, k := range kinds {
		evs[i] = store.NewEvent{Kind: k, Data: []byte(`"` + k + `"`)}
	}
	var head int64
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		var err error
		head, err = tx.Append(stream, gen, -1, evs...)
		return err
	}))
	return head
}

// lines renders events as "seq kind" for readable comparisons.
func lines(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d %s", e.Seq, e.Kind)
	}
	return out
}

func seqs(evs []store.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func kindsN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// received reports whether ch holds a notification right now. Notifications are sent before
// Update returns, so after an Update this is a deterministic check, not a race.
func received(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAppendAndReadBothWays(t *testing.T) {
	st, _ := openTemp(t)
	before := time.Now().UnixMilli()
	require.EqualValues(t, 3, appendKinds(t, st, "s", 0, "a", "b", "c"))
	require.EqualValues(t, 5, appendKinds(t, st, "s", 0, "d", "e"))
	after := time.Now().UnixMilli()

	fwd, err := st.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 a", "2 b", "3 c", "4 d", "5 e"}, lines(fwd))
	for _, e := range fwd {
		require.Equal(t, "s", e.Stream)
		require.EqualValues(t, 0, e.Gen)
		require.Equal(t, `"`+e.Kind+`"`, string(e.Data))
		require.GreaterOrEqual(t, e.Time, before, "event %d time", e.Seq)
		require.LessOrEqual(t, e.Time, after, "event %d time", e.Seq)
	}

	fwd, err = st.ReadForward(bg, "s", 0, 2, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"3 c", "4 d"}, lines(fwd), "strictly after 2, at most 2")

	fwd, err = st.ReadForward(bg, "s", 0, 5, 10)
	require.NoError(t, err)
	require.Empty(t, fwd, "nothing after the head")

	back, err := st.ReadBackward(bg, "s", 0, 1<<62, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"5 e", "4 d", "3 c", "2 b", "1 a"}, lines(back))

	back, err = st.ReadBackward(bg, "s", 0, 4, 2)
	require.NoError(t, err)
	require.Equal(t, []string{"3 c", "2 b"}, lines(back), "strictly before 4, at most 2, newest first")

	back, err = st.ReadBackward(bg, "s", 0, 1, 10)
	require.NoError(t, err)
	require.Empty(t, back, "nothing before the first event")
}

func TestStreamsAndGenerationsAreSeparate(t *testing.T) {
	st, _ := openTemp(t)
	appendKinds(t, st, "s", 0, "a", "b")
	appendKinds(t, st, "s", 1, "x")
	appendKinds(t, st, "t", 0, "y", "z", "w")

	for _, c := range []struct {
		stream string
		gen    int64
		want   []string
	}{
		{"s", 0, []string{"1 a", "2 b"}},
		{"s", 1, []string{"1 x"}},
		{"t", 0, []string{"1 y", "2 z", "3 w"}},
		{"t", 1, []string{}},
		{"u", 0, []string{}},
	} {
		evs, err := st.ReadForward(bg, c.stream, c.gen, 0, 0)
		require.NoError(t, err)
		require.Equal(t, c.want, lines(evs), "%s/%d", c.stream, c.gen)
		h, err := st.Head(bg, c.stream, c.gen)
		require.NoError(t, err)
		require.EqualValues(t, len(c.want), h, "head of %s/%d", c.stream, c.gen)
	}

	// A stream whose name is a prefix of another's is not mixed with it.
	appendKinds(t, st, "s/", 0, "p")
	evs, err := st.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
}

func TestReadsAreClampedToMaxRead(t *testing.T) {
	st, _ := openTemp(t)
	total := store.MaxRead + 100
	appendKinds(t, st, "big", 0, kindsN("k", total)...)

	for _, limit := range []int{0, -1, store.MaxRead + 1, 1 << 30} {
		evs, err := st.ReadForward(bg, "big", 0, 0, limit)
		require.NoError(t, err)
		require.Len(t, evs, store.MaxRead, "forward limit %d", limit)
		require.EqualValues(t, 1, evs[0].Seq)
		require.EqualValues(t, store.MaxRead, evs[len(evs)-1].Seq)

		evs, err = st.ReadBackward(bg, "big", 0, int64(total)+1, limit)
		require.NoError(t, err)
		require.Len(t, evs, store.MaxRead, "backward limit %d", limit)
		require.EqualValues(t, total, evs[0].Seq)
		require.EqualValues(t, total-store.MaxRead+1, evs[len(evs)-1].Seq)
	}

	// Paging forward by the last seq returned visits every event once, in order.
	var all []int64
	var after int64
	for {
		evs, err := st.ReadForward(bg, "big", 0, after, 300)
		require.NoError(t, err)
		if len(evs) == 0 {
			break
		}
		require.LessOrEqual(t, len(evs), 300)
		all = append(all, seqs(evs)...)
		after = evs[len(evs)-1].Seq
	}
	require.Len(t, all, total)
	for i, s := range all {
		require.EqualValues(t, i+1, s)
	}
}

func TestHead(t *testing.T) {
	st, _ := openTemp(t)
	h, err := st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.Zero(t, h, "an empty stream's head is 0")
	appendKinds(t, st, "s", 0, "a", "b", "c")
	h, err = st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, h)

	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		h, err := tx.Head("s", 0)
		require.NoError(t, err)
		require.EqualValues(t, 3, h)
		n, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "d"})
		require.NoError(t, err)
		require.EqualValues(t, 4, n)
		h, err = tx.Head("s", 0)
		require.NoError(t, err)
		require.EqualValues(t, 4, h, "the transaction sees its own append")
		return nil
	}))
}

func TestOptimisticAppend(t *testing.T) {
	st, _ := openTemp(t)
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		n, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "first"})
		require.EqualValues(t, 1, n)
		return err
	}))

	err := st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "stale"})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict, "expected head 0, actual 1")

	err = st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, 5, store.NewEvent{Kind: "ahead"})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict, "expected head 5, actual 1")

	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		n, err := tx.Append("s", 0, 1, store.NewEvent{Kind: "second"}, store.NewEvent{Kind: "third"})
		require.EqualValues(t, 3, n)
		return err
	}))

	// A conflict in the middle of a transaction undoes the appends before it.
	err = st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("other", 0, 0, store.NewEvent{Kind: "lost"}); err != nil {
			return err
		}
		_, err := tx.Append("s", 0, 2, store.NewEvent{Kind: "lost"})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)

	evs, err := st.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 first", "2 second", "3 third"}, lines(evs))
	h, err := st.Head(bg, "other", 0)
	require.NoError(t, err)
	require.Zero(t, h, "the append before the conflict was rolled back")

	// Appending nothing with a matching expectation succeeds and returns the head.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		n, err := tx.Append("s", 0, 3)
		require.EqualValues(t, 3, n)
		return err
	}))
}

func TestFailedUpdateLeavesNothing(t *testing.T) {
	st, _ := openTemp(t)
	ch, cancel := st.Subscribe("s")
	defer cancel()
	boom := errors.New("boom")
	err := st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"}, store.NewEvent{Kind: "b"}); err != nil {
			return err
		}
		if err := tx.PutMeta("k", []byte("v")); err != nil {
			return err
		}
		fresh, err := tx.Remember("scope", "key", 10)
		if err != nil || !fresh {
			return fmt.Errorf("remember: fresh=%v err=%v", fresh, err)
		}
		return boom
	})
	require.ErrorIs(t, err, boom, "fn's own error comes back")

	h, err := st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.Zero(t, h, "no event was kept")
	_, ok, err := st.Meta(bg, "k")
	require.NoError(t, err)
	require.False(t, ok, "no metadata was kept")
	require.False(t, received(ch), "a rolled-back append notifies nobody")
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		fresh, err := tx.Remember("scope", "key", 10)
		require.True(t, fresh, "the remembered key was rolled back too")
		return err
	}))

	// The stream is usable afterwards and numbering starts at 1.
	require.EqualValues(t, 1, appendKinds(t, st, "s", 0, "c"))
}

func TestUpdateWithCancelledContextWritesNothing(t *testing.T) {
	st, _ := openTemp(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	ran := false
	err := st.Update(ctx, func(tx store.Tx) error {
		ran = true
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"})
		return err
	})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ran, "fn does not run for a cancelled caller")
	h, err := st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.Zero(t, h)
}

func TestDataRoundTrips(t *testing.T) {
	st, _ := openTemp(t)
	payload := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "bin", Data: payload}, store.NewEvent{Kind: "kind with spaces/é"})
		return err
	}))
	evs, err := st.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	require.Equal(t, payload, evs[0].Data, "binary data, zero bytes included, comes back unchanged")
	require.Equal(t, "kind with spaces/é", evs[1].Kind)
	require.Empty(t, evs[1].Data)
}

func TestMeta(t *testing.T) {
	st, _ := openTemp(t)
	_, ok, err := st.Meta(bg, "missing")
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		for _, k := range []string{"exec/b", "exec/a", "exec/c/1", "exec", "exed/x", "exe", "other"} {
			if err := tx.PutMeta(k, []byte("v:"+k)); err != nil {
				return err
			}
		}
		v, ok, err := tx.Meta("exec/a")
		require.True(t, ok)
		require.Equal(t, "v:exec/a", string(v), "the transaction sees its own write")
		_, ok, _ = tx.Meta("nope")
		require.False(t, ok)
		return err
	}))
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		return tx.PutMeta("exec/a", []byte("v2"))
	}))

	v, ok, err := st.Meta(bg, "exec/a")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "v2", string(v), "PutMeta replaces")

	kvs, err := st.MetaPrefix(bg, "exec/")
	require.NoError(t, err)
	var got []string
	for _, kv := range kvs {
		got = append(got, kv.Key+"="+string(kv.Val))
	}
	require.Equal(t, []string{"exec/a=v2", "exec/b=v:exec/b", "exec/c/1=v:exec/c/1"}, got, "by key order, prefix only")

	kvs, err = st.MetaPrefix(bg, "nothing/")
	require.NoError(t, err)
	require.Empty(t, kvs)

	kvs, err = st.MetaPrefix(bg, "")
	require.NoError(t, err)
	require.Len(t, kvs, 7, "the empty prefix lists everything")
}

func TestRemember(t *testing.T) {
	st, _ := openTemp(t)
	remember := func(scope, key string, keep int) bool {
		t.Helper()
		var fresh bool
		require.NoError(t, st.Update(bg, func(tx store.Tx) error {
			var err error
			fresh, err = tx.Remember(scope, key, keep)
			return err
		}))
		return fresh
	}

	var transcript []string
	try := func(key string) {
		transcript = append(transcript, fmt.Sprintf("%s fresh=%v", key, remember("dd", key, 3)))
	}
	for _, k := range []string{"k1", "k2", "k3", "k1", "k4", "k1", "k2", "k5", "k4"} {
		try(k)
	}
	require.Equal(t, []string{
		"k1 fresh=true",
		"k2 fresh=true",
		"k3 fresh=true",
		"k1 fresh=false", // a duplicate; it does not make k1 newer
		"k4 fresh=true",  // the set keeps 3: k1, the oldest, is forgotten
		"k1 fresh=true",  // so it is new again, and k2 goes
		"k2 fresh=true",  // ... and k3 goes
		"k5 fresh=true",  // ... and k4 goes
		"k4 fresh=true",
	}, transcript)

	require.True(t, remember("other", "k4", 3), "scopes are separate")
	require.False(t, remember("other", "k4", 3))

	// keep <= 0 never forgets.
	for i := range 50 {
		require.True(t, remember("all", fmt.Sprint(i), 0))
	}
	for i := range 50 {
		require.False(t, remember("all", fmt.Sprint(i), 0), "key %d", i)
	}
}

func TestSubscribe(t *testing.T) {
	st, _ := openTemp(t)
	ch, cancel := st.Subscribe("s")
	other, cancelOther := st.Subscribe("t")
	defer cancelOther()

	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"})
		require.False(t, received(ch), "nobody is told before the commit")
		return err
	}))
	require.True(t, received(ch), "told after the commit")
	require.False(t, received(other), "a subscriber of another stream is not told")
	h, err := st.Head(bg, "s", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, h, "a woken reader sees the commit")

	// Several commits before the subscriber looks coalesce into one wake-up.
	appendKinds(t, st, "s", 0, "b")
	appendKinds(t, st, "s", 1, "c")
	require.True(t, received(ch))
	require.False(t, received(ch), "coalesced")

	// Writes that append nothing to the stream do not notify.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("s", []byte("x")); err != nil {
			return err
		}
		_, err := tx.Append("s", 0, -1)
		return err
	}))
	require.False(t, received(ch), "metadata and empty appends notify nobody")

	// One transaction touching two streams tells both.
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "d"}); err != nil {
			return err
		}
		_, err := tx.Append("t", 0, -1, store.NewEvent{Kind: "e"})
		return err
	}))
	require.True(t, received(ch))
	require.True(t, received(other))

	// Two subscribers of one stream are both told.
	ch2, cancel2 := st.Subscribe("s")
	appendKinds(t, st, "s", 0, "f")
	require.True(t, received(ch))
	require.True(t, received(ch2))

	cancel()
	cancel() // ending twice is harmless
	appendKinds(t, st, "s", 0, "g")
	require.False(t, received(ch), "an ended subscription is not told")
	require.True(t, received(ch2), "the other subscription still is")
	cancel2()
}

func TestSubscriberWakesAcrossGoroutines(t *testing.T) {
	st, _ := openTemp(t)
	ch, cancel := st.Subscribe("s")
	defer cancel()
	const n = 200
	go func() {
		for range n {
			if err := st.Update(bg, func(tx store.Tx) error {
				_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "x"})
				return err
			}); err != nil {
				return
			}
		}
	}()
	// A reader that reads after each wake-up never misses the last commit.
	deadline := time.After(10 * time.Second)
	var seen int64
	for seen < n {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("woken reader saw only %d of %d events", seen, n)
		}
		evs, err := st.ReadForward(bg, "s", 0, seen, 0)
		require.NoError(t, err)
		for _, e := range evs {
			require.Equal(t, seen+1, e.Seq)
			seen = e.Seq
		}
	}
}

func TestKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	st := openAt(t, path)
	appendKinds(t, st, "s", 0, "a", "b")
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return tx.PutMeta("m", []byte("1")) }))

	st.Kill()
	st.Kill() // a second kill does nothing

	err := st.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "late"})
		return err
	})
	require.ErrorIs(t, err, store.ErrClosed)
	require.ErrorIs(t, err, loomtype.ErrStoreClosed, "ErrClosed is the engine-wide store-closed error")
	_, err = st.ReadForward(bg, "s", 0, 0, 0)
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = st.ReadBackward(bg, "s", 0, 10, 0)
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = st.Head(bg, "s", 0)
	require.ErrorIs(t, err, store.ErrClosed)
	_, _, err = st.Meta(bg, "m")
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = st.MetaPrefix(bg, "")
	require.ErrorIs(t, err, store.ErrClosed)
	require.NoError(t, st.Close(), "closing a killed store is harmless")

	re := openAt(t, path)
	evs, err := re.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 a", "2 b"}, lines(evs), "everything committed before the kill survives")
	v, ok, err := re.Meta(bg, "m")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "1", string(v))
	require.EqualValues(t, 3, appendKinds(t, re, "s", 0, "c"), "numbering continues")
}

func TestKillWaitsForTheWriteInProgress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	st := openAt(t, path)
	inside := make(chan struct{})
	release := make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- st.Update(bg, func(tx store.Tx) error {
			if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "in-flight"}); err != nil {
				return err
			}
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	killed := make(chan struct{})
	go func() { st.Kill(); close(killed) }()
	select {
	case <-killed:
		t.Fatal("Kill returned while a write was in progress")
	default:
	}
	close(release)
	select {
	case err := <-updated:
		require.NoError(t, err, "the write in progress is not cut short")
	case <-time.After(10 * time.Second):
		t.Fatal("the write in progress never finished")
	}
	select {
	case <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill never returned")
	}
	err := st.Update(bg, func(tx store.Tx) error { return nil })
	require.ErrorIs(t, err, store.ErrClosed, "nothing after the kill")

	re := openAt(t, path)
	evs, err := re.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 in-flight"}, lines(evs))
}

func TestCloseAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loom.db")
	st := openAt(t, path)
	appendKinds(t, st, "s", 0, "a", "b", "c")
	appendKinds(t, st, "s", 2, "z")
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("exec/1", []byte("one")); err != nil {
			return err
		}
		_, err := tx.Remember("dd", "k", 5)
		return err
	}))
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")
	err := st.Update(bg, func(tx store.Tx) error { return nil })
	require.ErrorIs(t, err, store.ErrClosed)

	re := openAt(t, path)
	evs, err := re.ReadForward(bg, "s", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 a", "2 b", "3 c"}, lines(evs))
	h, err := re.Head(bg, "s", 2)
	require.NoError(t, err)
	require.EqualValues(t, 1, h)
	kvs, err := re.MetaPrefix(bg, "exec/")
	require.NoError(t, err)
	require.Equal(t, []store.KV{{Key: "exec/1", Val: []byte("one")}}, kvs)
	require.NoError(t, re.Update(bg, func(tx store.Tx) error {
		fresh, err := tx.Remember("dd", "k", 5)
		require.False(t, fresh, "remembered keys survive a reopen")
		return err
	}))
}

func TestOpenRefusesWhatIsNotAStore(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, []byte(strings.Repeat("this is not a database\n", 200)), 0o600))
	st, err := sqlite.Open(bg, junk, sqlite.Options{})
	if err == nil {
		st.Close()
	}
	require.Error(t, err, "a file that is not SQLite")

	st, err = sqlite.Open(bg, filepath.Join(dir, "missing", "dir", "loom.db"), sqlite.Options{})
	if err == nil {
		st.Close()
	}
	require.Error(t, err, "a directory that does not exist")
}

func TestConcurrentUpdatesAreGapless(t *testing.T) {
	st, _ := openTemp(t)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				data := []byte(fmt.Sprintf("w%d-%d", w, i))
				if w%2 == 0 {
					// Blind appends.
					if err := st.Update(bg, func(tx store.Tx) error {
						_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "x", Data: data})
						return err
					}); err != nil {
						errs <- err
						return
					}
					continue
				}
				// Optimistic appends: read the head outside, expect it inside, retry on conflict.
				for {
					h, err := st.Head(bg, "s", 0)
					if err != nil {
						errs <- err
						return
					}
					err = st.Update(bg, func(tx store.Tx) error {
						_, err := tx.Append("s", 0, h, store.NewEvent{Kind: "x", Data: data})
						return err
					})
					if err == nil {
						break
					}
					if !errors.Is(err, store.ErrConflict) {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	var all []store.Event
	var after int64
	for {
		evs, err := st.ReadForward(bg, "s", 0, after, 0)
		require.NoError(t, err)
		if len(evs) == 0 {
			break
		}
		all = append(all, evs...)
		after = evs[len(evs)-1].Seq
	}
	require.Len(t, all, writers*each)
	next := map[int]int{}
	for i, e := range all {
		require.EqualValues(t, i+1, e.Seq, "no gap, no duplicate")
		var w, n int
		_, err := fmt.Sscanf(string(e.Data), "w%d-%d", &w, &n)
		require.NoError(t, err)
		require.Equal(t, next[w], n, "writer %d's appends land in its order, each once", w)
		next[w]++
	}
	for w := range writers {
		require.Equal(t, each, next[w], "writer %d", w)
	}
}

func TestReadsSeeWholeTransactions(t *testing.T) {
	st, _ := openTemp(t)
	const batches, batch = 120, 3
	done := make(chan struct{})
	writeErr := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range batches {
			evs := make([]store.NewEvent, batch)
			for j := range evs {
				evs[j] = store.NewEvent{Kind: "x", Data: []byte(fmt.Sprint(i))}
			}
			if err := st.Update(bg, func(tx store.Tx) error {
				_, err := tx.Append("s", 0, -1, evs...)
				return err
			}); err != nil {
				writeErr <- err
				return
			}
		}
	}()

	var wg sync.WaitGroup
	readErrs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last int
			finished := false
			for !finished {
				select {
				case <-done:
					finished = true // one more read after the writer is done
				default:
				}
				evs, err := st.ReadForward(bg, "s", 0, 0, 0)
				if err != nil {
					readErrs <- err
					return
				}
				if len(evs)%batch != 0 {
					readErrs <- fmt.Errorf("read %d events: a transaction was seen in part", len(evs))
					return
				}
				if len(evs) < last {
					readErrs <- fmt.Errorf("read %d events after having read %d", len(evs), last)
					return
				}
				for i, e := range evs {
					if e.Seq != int64(i+1) || string(e.Data) != fmt.Sprint(i/batch) {
						readErrs <- fmt.Errorf("event %d is seq %d data %q", i, e.Seq, e.Data)
						return
					}
				}
				last = len(evs)
				// Head is read after the events, so it can only be ahead of them.
				h, err := st.Head(bg, "s", 0)
				if err != nil {
					readErrs <- err
					return
				}
				if h < int64(last) {
					readErrs <- fmt.Errorf("head %d behind a read of %d events", h, last)
					return
				}
			}
			if last != batches*batch {
				readErrs <- fmt.Errorf("the final read saw %d events", last)
			}
		}()
	}
	wg.Wait()
	close(readErrs)
	select {
	case err := <-writeErr:
		require.NoError(t, err)
	default:
	}
	for err := range readErrs {
		require.NoError(t, err)
	}
}

func TestMetaPrefixFindsKeysAfterAnyByte(t *testing.T) {
	st, _ := openTemp(t)
	ctx := context.Background()
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		for _, k := range []string{"p/\xff", "p/\xff\xff", "p/a", "q/a", "\xffz"} {
			if err := tx.PutMeta(k, []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}))
	kvs, err := st.MetaPrefix(ctx, "p/")
	require.NoError(t, err)
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, kv.Key)
	}
	require.Equal(t, []string{"p/a", "p/\xff", "p/\xff\xff"}, keys)
	all, err := st.MetaPrefix(ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 5, "the empty prefix lists every key, 0xFF-first ones included")
}

func TestReadsAfterCloseAreErrClosed(t *testing.T) {
	st, _ := openTemp(t)
	require.NoError(t, st.Close())
	ctx := context.Background()
	_, err := st.ReadForward(ctx, "s", 0, 0, 10)
	require.ErrorIs(t, err, store.ErrClosed)
	_, err = st.Head(ctx, "s", 0)
	require.ErrorIs(t, err, store.ErrClosed)
	_, _, err = st.Meta(ctx, "k")
	require.ErrorIs(t, err, store.ErrClosed)
}
