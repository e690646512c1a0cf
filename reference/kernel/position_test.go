package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// positioner takes each message, decides on it with DecideTaken (a row shared with the consumed
// event), then makes decision oN:a and notes in seen where Position says it lies, live and in a
// replay alike.
func positioner(seen *sync.Map) kernel.Flow {
	return func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		for n := 1; ; n++ {
			if _, err := c.Receive(); err != nil {
				return nil, err
			}
			if _, err := c.DecideTaken(fmt.Sprintf("o%d:verdict", n), func() (any, error) { return true, nil }); err != nil {
				return nil, err
			}
			id := fmt.Sprintf("o%d:a", n)
			if _, err := c.DecideValue(id, func() (any, error) { return n, nil }); err != nil {
				return nil, err
			}
			seen.Store(id, c.Position())
		}
	}
}

// TestPositionIsWhereTheNewestCommandLies: the position a flow reads right after a decision is
// the seq of the decision's event in the log, whether the decision was made live or replayed
// after a restart, with rows shared by two commands before it.
func TestPositionIsWhereTheNewestCommandLies(t *testing.T) {
	ctx := context.Background()
	var seen sync.Map
	r := newRig(t, map[string]kernel.Flow{"pos": positioner(&seen)})
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "pos", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	send(t, r.k, "c1", "m2", "two")
	waitFor(t, "two decisions", func() bool { _, ok := seen.Load("o2:a"); return ok })
	check := func(n int) {
		t.Helper()
		evs, err := r.k.ReadLog(ctx, "c1", 0, 0, 100)
		require.NoError(t, err)
		found := 0
		for _, ev := range evs {
			if ev.Decision == nil || ev.Kind != "decision" {
				continue
			}
			at, ok := seen.Load(ev.Decision.ID)
			require.True(t, ok, ev.Decision.ID)
			require.Equal(t, ev.Seq, at, ev.Decision.ID)
			found++
		}
		require.Equal(t, n, found)
	}
	check(2)
	seen.Clear()
	r.restart()
	send(t, r.k, "c1", "m3", "three")
	waitFor(t, "the third decision", func() bool { _, ok := seen.Load("o3:a"); return ok })
	check(3)
	require.Empty(t, r.divs)
}
