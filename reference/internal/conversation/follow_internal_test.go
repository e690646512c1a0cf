package conversation

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// markedKey marks the context of the reads a test counts.
type markedKey struct{}

// markedStore counts the reads made under a marked context, so that what one reader does is
// told apart from what the dialogue reads meanwhile.
type markedStore struct {
	store.Store
	mu    sync.Mutex
	reads []string
}

func (s *markedStore) note(ctx context.Context, op, key string) {
	if ctx.Value(markedKey{}) == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads = append(s.reads, op+" "+key)
}

func (s *markedStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reads
	s.reads = nil
	return r
}

func (s *markedStore) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	s.note(ctx, "ReadForward", stream)
	return s.Store.ReadForward(ctx, stream, gen, after, limit)
}

func (s *markedStore) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	s.note(ctx, "ReadBackward", stream)
	return s.Store.ReadBackward(ctx, stream, gen, before, limit)
}

func (s *markedStore) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	s.note(ctx, "Head", stream)
	return s.Store.Head(ctx, stream, gen)
}

func (s *markedStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	s.note(ctx, "Meta", key)
	return s.Store.Meta(ctx, key)
}

func (s *markedStore) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	s.note(ctx, "MetaPrefix", prefix)
	return s.Store.MetaPrefix(ctx, prefix)
}

// followRig is a conversation on a store whose reads are counted, with the hub's tails bounded
// as the test says.
type followRig struct {
	t     *testing.T
	st    *markedStore
	cv    *Conversations
	hub   *live.Hub
	alice loomtype.Identity
	id    string
}

func newFollowRig(t *testing.T, lim live.TailLimits) *followRig {
	return newFollowRigWith(t, lim, Deps{})
}

// newFollowRigWith is newFollowRig with the dialogue's dependencies deps.
func newFollowRigWith(t *testing.T, lim live.TailLimits, deps Deps) *followRig {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	st := &markedStore{Store: raw}
	hub := live.NewHub(0)
	hub.SetTailLimits(lim)
	dl, err := New(Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, deps, hub)
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	t.Cleanup(func() { k.Close(); raw.Close() })
	r := &followRig{t: t, st: st, cv: dl.Client(k), hub: hub, alice: loomtype.Identity{Tenant: "acme", Actor: "alice"}}
	started, _, err := r.cv.Start(ctx, r.alice, StartOptions{})
	require.NoError(t, err)
	r.id = started.ID
	return r
}

// turn sends a turn and waits, through f, until its reply is read; it returns what f read.
func (r *followRig) turn(f *Follower, cur *loomtype.Cursor, n int) []loomtype.Entry {
	ctx := context.Background()
	_, err := r.cv.SendTurn(ctx, r.alice, r.id, fmt.Sprintf("question %d", n), SendOptions{MessageID: fmt.Sprintf("m%d", n)})
	require.NoError(r.t, err)
	var got []loomtype.Entry
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-f.Wake():
		case <-deadline:
			r.t.Fatalf("turn %d: no reply within 10 s; read %v", n, got)
		}
		for done := false; !done; {
			entries, next, d, err := f.Read(context.WithValue(ctx, markedKey{}, true), *cur, 100)
			require.NoError(r.t, err)
			got = append(got, entries...)
			*cur, done = next, d
		}
		for _, e := range got {
			if e.Role == loomtype.RoleAssistant && e.Turn == int64(n) {
				return got
			}
		}
	}
}

func marshal(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestFollowerReadsCommitsFromTheTail: once a follower has read up to the head from the log, the
// turns that follow reach it from the tail, with no read of the store at all (its view of each
// entry included); what it read is what the log holds, entry for entry and byte for byte.
func TestFollowerReadsCommitsFromTheTail(t *testing.T) {
	r := newFollowRig(t, live.TailLimits{})
	ctx := context.Background()
	f := r.cv.Follow(r.id)
	defer f.Close()
	var cur loomtype.Cursor
	for done := false; !done; {
		_, next, d, err := f.Read(context.WithValue(ctx, markedKey{}, true), cur, 100)
		require.NoError(t, err)
		cur, done = next, d
	}
	require.NotEmpty(t, r.st.take(), "the tail starts empty: the first read is the log's")

	var read []loomtype.Entry
	for n := 1; n <= 3; n++ {
		read = append(read, r.turn(f, &cur, n)...)
	}
	require.Empty(t, r.st.take(), "the follower read the store while its cursor was within the tail")
	for _, e := range read {
		v, err := f.View(context.WithValue(ctx, markedKey{}, true), r.alice, e)
		require.NoError(t, err)
		require.Equal(t, e, v)
	}
	require.Empty(t, r.st.take(), "the follower's view of an owner's entry read the store")
	_, err := f.View(ctx, loomtype.Identity{Tenant: "acme", Actor: "bob"}, read[0])
	require.ErrorIs(t, err, loomtype.ErrNotFound, "a stranger's view")

	logged, _, done, err := r.cv.ReadForward(ctx, r.id, loomtype.Cursor{}, 500)
	require.NoError(t, err)
	require.True(t, done)
	var since []loomtype.Entry
	for _, e := range logged {
		if e.Turn >= 1 {
			since = append(since, e)
		}
	}
	require.Equal(t, marshal(t, since), marshal(t, read), "the tail served what the log holds")
}

// TestFollowerBehindTheTailReadsTheLog: with a tail of a few records, a follower whose cursor
// fell behind its start reads the store, and gets from every cursor exactly what ReadForward
// gives: the same entries, the same next cursor, the same done.
func TestFollowerBehindTheTailReadsTheLog(t *testing.T) {
	r := newFollowRig(t, live.TailLimits{Records: 4})
	ctx := context.Background()
	f := r.cv.Follow(r.id)
	defer f.Close()
	var cur loomtype.Cursor
	for done := false; !done; {
		_, next, d, err := f.Read(ctx, cur, 100)
		require.NoError(t, err)
		cur, done = next, d
	}
	start := cur
	for n := 1; n <= 3; n++ {
		r.turn(f, &cur, n)
	}
	fig, ok := r.hub.Tail(r.id)
	require.True(t, ok)
	require.Equal(t, 4, fig.Records, "the tail holds its bound")
	r.st.take()

	// Behind the tail: the log.
	got, next, done, err := f.Read(context.WithValue(ctx, markedKey{}, true), start, 100)
	require.NoError(t, err)
	require.NotEmpty(t, r.st.take(), "a cursor behind the tail's start was served without the log")
	want, wnext, wdone, err := r.cv.ReadForward(ctx, r.id, start, 100)
	require.NoError(t, err)
	require.Equal(t, marshal(t, want), marshal(t, got))
	require.Equal(t, wnext, next)
	require.Equal(t, wdone, done)

	// Every cursor of the log, one entry at a time: the follower and the log agree.
	for c := (loomtype.Cursor{}); ; {
		got, next, done, err := f.Read(ctx, c, 1)
		require.NoError(t, err)
		want, wnext, wdone, err := r.cv.ReadForward(ctx, r.id, c, 1)
		require.NoError(t, err)
		require.Equal(t, marshal(t, want), marshal(t, got), "after %v", c)
		require.Equal(t, wnext, next, "after %v", c)
		require.Equal(t, wdone, done, "after %v", c)
		if done {
			break
		}
		c = next
	}
}
