package conversation

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// countingStore records every read of the store, with the conversation id in its key or stream
// replaced by "<id>", so the reads of two ids can be compared.
type countingStore struct {
	store.Store
	mu  sync.Mutex
	ids []string
	ops []string
	// waiting: since starting was last called, a dialogue read its inbox forward, which it does
	// once it has done everything it starts or recovers with and waits for messages.
	waiting bool
}

func (s *countingStore) note(op, key string) {
	if strings.HasPrefix(key, "in/") {
		// A dialogue waiting for messages reads its inbox on its own, at any time.
		if op == "ReadForward" {
			s.mu.Lock()
			s.waiting = true
			s.mu.Unlock()
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.ids {
		key = strings.ReplaceAll(key, id, "<id>")
	}
	s.ops = append(s.ops, op+" "+key)
}

// setIDs names the ids whose reads are compared; the dialogue may read the store meanwhile.
func (s *countingStore) setIDs(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids = ids
}

// starting says that a dialogue is about to start or recover: settle waits for it.
func (s *countingStore) starting() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting = false
}

// settle waits until the dialogue started last waits for messages (it read its inbox forward),
// and forgets what was read until then.
func (s *countingStore) settle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		waiting := s.waiting
		if waiting {
			s.ops = nil
		}
		s.mu.Unlock()
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the dialogue did not read its inbox within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *countingStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	return ops
}

func (s *countingStore) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	s.note("ReadForward", stream)
	return s.Store.ReadForward(ctx, stream, gen, after, limit)
}

func (s *countingStore) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	s.note("ReadBackward", stream)
	return s.Store.ReadBackward(ctx, stream, gen, before, limit)
}

func (s *countingStore) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	s.note("Head", stream)
	return s.Store.Head(ctx, stream, gen)
}

func (s *countingStore) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	s.note("Meta", key)
	return s.Store.Meta(ctx, key)
}

func (s *countingStore) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	s.note("MetaPrefix", prefix)
	return s.Store.MetaPrefix(ctx, prefix)
}

// TestNotFoundSameStoreWork: a stranger asking about a conversation that exists and is not
// theirs makes the engine read the store exactly as for one that does not exist, the first time
// an id is asked about (nothing known of it yet) and every time after, on every route that
// authorizes; so the uniform 404 costs the same on both paths.
func TestNotFoundSameStoreWork(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	cs := &countingStore{Store: st}
	open := func() (*Conversations, *kernel.Kernel) {
		dl, err := New(Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, Deps{}, nil)
		require.NoError(t, err)
		k, err := kernel.Open(ctx, cs, kernel.Options{Flows: dl.Flows()})
		require.NoError(t, err)
		cv := dl.Client(k)
		return cv, k
	}
	cs.starting()
	cv, k := open()
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	bob := loomtype.Identity{Tenant: "acme", Actor: "bob"}
	started, _, err := cv.Start(ctx, alice, StartOptions{})
	require.NoError(t, err)
	foreign, missing := started.ID, "c_000000000000000000000000"
	cs.setIDs(foreign, missing)
	cs.settle(t) // the new conversation's dialogue starts on its own

	routes := map[string]func(cv *Conversations, id string) error{
		"authorize": func(cv *Conversations, id string) error { return cv.Authorize(ctx, bob, id) },
		"status":    func(cv *Conversations, id string) error { _, err := cv.Status(ctx, bob, id); return err },
		"history": func(cv *Conversations, id string) error {
			_, err := cv.History(ctx, bob, id, HistoryOptions{})
			return err
		},
		"participants": func(cv *Conversations, id string) error { _, err := cv.Participants(ctx, bob, id); return err },
		"runtime":      func(cv *Conversations, id string) error { _, err := cv.AuthorizeRuntime(ctx, bob, id); return err },
	}
	probe := func(cv *Conversations, route, id string) []string {
		cs.take()
		err := routes[route](cv, id)
		require.True(t, errors.Is(err, loomtype.ErrNotFound), "%s %s: %v", route, id, err)
		return cs.take()
	}
	check := func(cv *Conversations, when string) {
		for _, route := range slices.Sorted(func(yield func(string) bool) {
			for r := range routes {
				if !yield(r) {
					return
				}
			}
		}) {
			// A read the dialogue makes on its own can land inside a probe: a difference
			// counts only when it shows every time.
			f, m := probe(cv, route, foreign), probe(cv, route, missing)
			for try := 0; try < 3 && !slices.Equal(f, m); try++ {
				cs.settle(t)
				f, m = probe(cv, route, foreign), probe(cv, route, missing)
			}
			require.Equal(t, m, f, "%s, %s: the reads for a foreign conversation (actual) differ from those for a missing one (expected)", when, route)
		}
	}
	// Known ids: the owner's start made the conversation known; the missing id is asked about
	// once so both are past their first look.
	_ = cv.Authorize(ctx, bob, missing)
	check(cv, "known ids")
	k.Close()

	// A fresh engine on the same store knows nothing yet: the first look at each.
	cs.starting()
	cv2, k2 := open()
	defer k2.Close()
	// The recovered conversation replays its log on its own: let it settle before counting.
	cs.settle(t)
	first := func(id string) []string {
		cs.take()
		require.ErrorIs(t, cv2.Authorize(ctx, bob, id), loomtype.ErrNotFound)
		return cs.take()
	}
	f, m := first(foreign), first(missing)
	require.Equal(t, m, f, "first look: the reads for a foreign conversation differ from those for a missing one")
	check(cv2, "after the first look")

	// Every refusal takes at least the floor, whichever path refused.
	for _, id := range []string{foreign, missing, "not a valid id"} {
		began := time.Now()
		require.ErrorIs(t, cv2.Authorize(ctx, bob, id), loomtype.ErrNotFound)
		require.GreaterOrEqual(t, time.Since(began), NotFoundFloor, "the refusal of %s", id)
	}
	// An id found absent is not refused for ever: once started, its owner reaches it.
	plan := ChosenID(alice, "plan-1")
	require.ErrorIs(t, cv2.Authorize(ctx, alice, plan), loomtype.ErrNotFound)
	planned, _, err := cv2.Start(ctx, alice, StartOptions{ID: "plan-1"})
	require.NoError(t, err)
	require.Equal(t, plan, planned.ID)
	require.NoError(t, cv2.Authorize(ctx, alice, plan))
	require.ErrorIs(t, cv2.Authorize(ctx, bob, plan), loomtype.ErrNotFound)
}
