package run_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// askCounter answers every question with its own text and counts how often each was asked.
type askCounter struct {
	mu    sync.Mutex
	asked map[string]int
}

func (a *askCounter) Complete(_ context.Context, req model.Request, _ func(string)) (model.Response, error) {
	q := req.Messages[len(req.Messages)-1].Content
	a.mu.Lock()
	a.asked[q]++
	a.mu.Unlock()
	return model.Response{Content: "re: " + q}, nil
}

// cacheProvider is what both caches offer: base behind the cache, for who in scope.
type cacheProvider interface {
	Provider(base model.Provider, who loomtype.Identity, scope string) model.Provider
}

// caches open a cache of max entries of each kind: in the process, and kept in a store (SQLite
// here; the two nodes sharing one on PostgreSQL are reference's tests).
var caches = map[string]func(t *testing.T, max int) cacheProvider{
	"memory": func(_ *testing.T, max int) cacheProvider { return run.NewResponseCache(max) },
	"stored": func(t *testing.T, max int) cacheProvider {
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		k, err := kernel.Open(ctx, st, kernel.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { k.Close() })
		c, err := run.OpenStoredCache(ctx, k, max)
		require.NoError(t, err)
		return c
	},
}

// TestResponseCacheSharePerPrincipal: one principal asking many different questions fills the
// response cache with its own answers only; it never pushes out what another principal keeps
// there. Each principal's answers are forgotten to make room for its own. The same for both
// caches.
func TestResponseCacheSharePerPrincipal(t *testing.T) {
	for name, open := range caches {
		t.Run(name, func(t *testing.T) { testResponseCacheShare(t, open) })
	}
}

func testResponseCacheShare(t *testing.T, open func(*testing.T, int) cacheProvider) {
	ctx := context.Background()
	base := &askCounter{asked: map[string]int{}}
	const max = 8
	rc := open(t, max)
	mallory := loomtype.Identity{Tenant: "acme", Actor: "mallory"}
	ask := func(who loomtype.Identity, q string) {
		t.Helper()
		res, err := rc.Provider(base, who, "acme").Complete(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: q}}}, nil)
		require.NoError(t, err)
		require.Equal(t, "re: "+q, res.Content)
	}
	ask(alice, "check pump 3")
	for i := range 10 * max {
		ask(mallory, fmt.Sprintf("flood %d", i))
	}
	ask(alice, "check pump 3")
	require.Equal(t, 1, base.asked["check pump 3"], "alice's cached answer was pushed out by mallory's questions")
	// mallory's own answers make room for her newest: her last question is still cached.
	ask(mallory, fmt.Sprintf("flood %d", 10*max-1))
	require.Equal(t, 1, base.asked[fmt.Sprintf("flood %d", 10*max-1)])
}
