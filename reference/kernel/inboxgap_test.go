package kernel_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// gappedInbox is a store whose inbox streams ("in/<id>", the kernel's journal layout) have lost
// the entry at position lost once damaged is set: a read of them skips it.
type gappedInbox struct {
	store.Store
	lost    int64
	damaged atomic.Bool
}

func (g *gappedInbox) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	evs, err := g.Store.ReadForward(ctx, stream, gen, after, limit+1)
	if err != nil || !g.damaged.Load() || !strings.HasPrefix(stream, "in/") {
		if len(evs) > limit {
			evs = evs[:limit]
		}
		return evs, err
	}
	out := evs[:0]
	for _, e := range evs {
		if e.Seq != g.lost {
			out = append(out, e)
		}
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// TestInboxAtRefusesAnEntryItWasNotGiven: when the inbox no longer holds a position a flow names
// (damage: a read of it returns the next entry in its place), InboxAt is ErrUnreadable, never the
// message at another position.
func TestInboxAtRefusesAnEntryItWasNotGiven(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	g := &gappedInbox{Store: st, lost: 2}
	got := make(chan []error, 1)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		for range 3 {
			if _, err := c.Receive(); err != nil {
				return nil, err
			}
		}
		g.damaged.Store(true)
		var errs []error
		for _, seqs := range [][]int64{{2}, {1, 2}, {2, 3}} {
			msgs, err := c.InboxAt(seqs)
			if err == nil {
				t.Errorf("InboxAt(%v) read %d messages from an inbox without entry 2", seqs, len(msgs))
			}
			errs = append(errs, err)
		}
		got <- errs
		return json.RawMessage(`null`), nil
	}
	k, err := kernel.Open(ctx, g, kernel.Options{Flows: map[string]kernel.Flow{"reader": flow}})
	require.NoError(t, err)
	t.Cleanup(func() { k.Close() })
	_, err = k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "reader", Principal: alice})
	require.NoError(t, err)
	for _, m := range []string{"m1", "m2", "m3"} {
		require.True(t, send(t, k, "c1", m, "text of "+m))
	}
	for i, e := range <-got {
		assert.ErrorIs(t, e, kernel.ErrUnreadable, i)
	}
}
