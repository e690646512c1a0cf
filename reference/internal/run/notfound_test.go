package run_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// readCounter records every read of the store, with the compared ids in keys and streams
// replaced by "<id>", so the reads made for two ids can be compared.
type readCounter struct {
	store.Store
	mu  sync.Mutex
	ids []string
	ops []string
}

func (s *readCounter) note(op, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.ids {
		key = strings.ReplaceAll(key, id, "<id>")
	}
	s.ops = append(s.ops, op+" "+key)
}

func (s *readCounter) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	return ops
}

func (s *readCounter) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	s.note("Meta", key)
	return s.Store.Meta(ctx, key)
}

func (s *readCounter) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	s.note("ReadForward", stream)
	return s.Store.ReadForward(ctx, stream, gen, after, limit)
}

func (s *readCounter) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	s.note("Head", stream)
	return s.Store.Head(ctx, stream, gen)
}

// TestRunNotFoundSameStoreWork: a stranger asking about a run that exists and is not theirs (one
// the kernel holds in memory, having just run it) makes the engine read the store exactly as for
// a run that does not exist, on every route that refuses with the uniform 404, and each refusal
// takes at least run.NotFoundFloor; so the 404 costs the same on both paths.
func TestRunNotFoundSameStoreWork(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	cs := &readCounter{Store: st}
	rs := run.New(run.Deps{Provider: scriptmodel.Echo("re: ")})
	k, err := kernel.Open(ctx, cs, kernel.Options{Flows: rs.Flows(), BeforeRecovery: rs.Bind})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	v, _, err := rs.Start(ctx, alice, run.Options{Prompt: "check pump 3"})
	require.NoError(t, err)
	_, err = k.Await(ctx, v.ID)
	require.NoError(t, err)
	foreign, missing := v.ID, "run:000000000000000000000000"
	cs.mu.Lock()
	cs.ids = []string{foreign, missing}
	cs.mu.Unlock()
	bob := loomtype.Identity{Tenant: "acme", Actor: "bob"}
	routes := map[string]func(id string) error{
		"get":     func(id string) error { _, err := rs.Get(ctx, bob, id); return err },
		"abort":   func(id string) error { return rs.Abort(ctx, bob, id) },
		"cancel":  func(id string) error { return rs.Cancel(ctx, bob, id) },
		"approve": func(id string) error { _, err := rs.Approve(ctx, bob, id, "g1", true); return err },
		"human":   func(id string) error { _, err := rs.AnswerHuman(ctx, bob, id, "c1", []byte(`1`)); return err },
	}
	for name, route := range routes {
		probe := func(id string) ([]string, time.Duration) {
			cs.take()
			began := time.Now()
			require.ErrorIs(t, route(id), loomtype.ErrNotFound, "%s %s", name, id)
			took := time.Since(began)
			return cs.take(), took
		}
		f, ft := probe(foreign)
		m, mt := probe(missing)
		require.NotEmpty(t, m, "%s: a missing run is looked up in the store", name)
		require.Equal(t, m, f, "%s: the reads for someone else's run (actual) differ from those for a missing one (expected)", name)
		require.GreaterOrEqual(t, ft, run.NotFoundFloor, "%s: the refusal of someone else's run", name)
		require.GreaterOrEqual(t, mt, run.NotFoundFloor, "%s: the refusal of a missing run", name)
	}
	// The owner still reaches the run.
	_, err = rs.Get(ctx, alice, foreign)
	require.NoError(t, err)
}
