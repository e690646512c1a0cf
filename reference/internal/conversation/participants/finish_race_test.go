package participants_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/participants"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// headHook is a store whose first read of a head of a participants stream runs before once it
// has read the head: another writer, landing between Finish's read of the head and its Init.
type headHook struct {
	store.Store
	once   sync.Once
	before func()
}

func (h *headHook) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	n, err := h.Store.Head(ctx, stream, gen)
	if strings.Contains(stream, participants.Stream) {
		h.once.Do(h.before)
	}
	return n, err
}

// Finish that finds no set, while a concurrent retry of the same start records one before its
// own Init: the set recorded first is kept and Finish answers nil, not the conflict.
func TestFinishKeepsTheSetAConcurrentRetryRecorded(t *testing.T) {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer raw.Close()
	hook := &headHook{Store: raw}
	k, err := kernel.Open(ctx, hook, kernel.Options{})
	require.NoError(t, err)
	defer k.Close()
	var b participants.Book
	hook.before = func() { require.NoError(t, b.Init(ctx, k, "c1", alice, []loomtype.Identity{bob})) }

	require.NoError(t, b.Finish(ctx, k, "c1", alice, []loomtype.Identity{carol}))
	set, err := b.Read(ctx, k, "c1")
	require.NoError(t, err)
	require.Equal(t, []loomtype.Identity{alice, bob}, set.Members)
}
