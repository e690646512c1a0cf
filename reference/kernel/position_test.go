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
	decisions := func() int {
		evs, err := r.k.ReadLog(ctx, "c1", 0, 0, 100)
		require.NoError(t, err)
		n := 0
		for _, ev := range evs {
			if ev.Decision != nil && ev.Kind == "decision" {
				n++
			}
		}
		return n
	}
	check := func(n int) {
		t.Helper()
		// The newest decision is committed when the flow next waits for a message.
		waitFor(t, "the decisions committed", func() bool { return decisions() == n })
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

// TestLogAtReadsAnEarlierGeneration: a flow reads the events at positions of an earlier
// generation of its log, as ReadLog gives them; a position that generation does not hold, and a
// generation that is not an earlier one, are ErrUnreadable.
func TestLogAtReadsAnEarlierGeneration(t *testing.T) {
	ctx := context.Background()
	type read struct {
		evs []kernel.LogEvent
		err error
	}
	got := make(chan read, 8)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if c.Generation() == 0 {
			for n := 1; n <= 3; n++ {
				if _, err := c.DecideValue(fmt.Sprintf("d%d", n), func() (any, error) { return n, nil }); err != nil {
					return nil, err
				}
			}
			return nil, c.ContinueAsNew(json.RawMessage(`{}`))
		}
		evs, err := c.LogAt(0, []int64{2, 4})
		got <- read{evs, err}
		_, err = c.LogAt(0, []int64{2, 9})
		got <- read{nil, err}
		_, err = c.LogAt(1, []int64{1})
		got <- read{nil, err}
		return json.RawMessage(`1`), nil
	}
	r := newRig(t, map[string]kernel.Flow{"gens": flow})
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "gens", Principal: alice})
	require.NoError(t, err)
	first := <-got
	require.NoError(t, first.err)
	want, err := r.k.ReadLog(ctx, "c1", 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []kernel.LogEvent{want[1], want[3]}, first.evs)
	require.Equal(t, "d1", first.evs[0].Decision.ID)
	require.ErrorIs(t, (<-got).err, kernel.ErrUnreadable, "a position generation 0 does not hold")
	require.ErrorIs(t, (<-got).err, kernel.ErrUnreadable, "the running generation")
}
