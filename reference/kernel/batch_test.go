package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// kinds renders execution id's committed log (read from the store, not from the kernel) as
// "kind id" lines.
func kinds(t *testing.T, st *sqlite.SQLite, id string) string {
	evs, err := st.ReadForward(context.Background(), kernel.LogStream(id), 0, 0, 0)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		line := e.Kind
		var v struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(e.Data, &v) == nil && v.ID != "" {
			line += " " + v.ID
		}
		out = append(out, line)
	}
	return strings.Join(out, ", ")
}

// A message's consumption and the decisions made after it, with nothing outside the execution
// able to see them in between, are committed in one transaction, before the execution waits
// again: whoever reads the log once it waits (the park hook here) finds all of them. Before a
// step runs, its start and everything before it are committed; before a decider reaches the
// world through Ctx, everything before it is. The end is committed with what preceded it.
func TestWritesAreBatchedUntilSomethingCanSeeThem(t *testing.T) {
	var r *rig
	var mu sync.Mutex
	var seen []string // what the store held at each point something outside could look
	look := func(point string) {
		mu.Lock()
		seen = append(seen, point+": "+kinds(t, r.st, "b"))
		mu.Unlock()
	}
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := c.Receive(); err != nil {
			return nil, err
		}
		for _, id := range []string{"a", "b", "c"} {
			if _, err := c.Decide(id, func() (json.RawMessage, error) { return json.RawMessage(`1`), nil }); err != nil {
				return nil, err
			}
		}
		if _, err := c.Receive(); err != nil { // waits: a, b and c are committed first
			return nil, err
		}
		if _, err := c.Decide("d", func() (json.RawMessage, error) { return nil, nil }); err != nil {
			return nil, err
		}
		if _, err := c.Execute("s", func(context.Context) (json.RawMessage, error) {
			look("in step s")
			return nil, nil
		}); err != nil {
			return nil, err
		}
		if _, err := c.Decide("e", func() (json.RawMessage, error) { return nil, nil }); err != nil {
			return nil, err
		}
		if _, err := c.Decide("io", func() (json.RawMessage, error) {
			_ = c.Ctx() // the door of I/O
			look("in decider io, after Ctx")
			return nil, nil
		}); err != nil {
			return nil, err
		}
		_, err := c.Decide("f", func() (json.RawMessage, error) { return nil, nil })
		return nil, err
	}
	r = newRig(t, map[string]kernel.Flow{"f": flow})
	kernel.SetParkHook(r.k, func(id, site string) { look(site) })
	ctx := context.Background()
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "b", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "the first wait", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })

	before := r.st.Writes()
	require.True(t, send(t, r.k, "b", "m1", "one"))
	waitFor(t, "the second wait", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2 })
	require.Equal(t, int64(2), r.st.Writes()-before,
		"the message, then its consumption and three decisions in one transaction (five before)")

	require.True(t, send(t, r.k, "b", "m2", "two"))
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := r.k.Await(cctx, "b")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State, info.Error)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{
		"receive: started",
		"receive: started, consumed, decision a, decision b, decision c",
		"in step s: started, consumed, decision a, decision b, decision c, consumed, decision d, step.started s",
		"in decider io, after Ctx: started, consumed, decision a, decision b, decision c, consumed, decision d, step.started s, step.completed s, decision e",
		"end completed: started, consumed, decision a, decision b, decision c, consumed, decision d, step.started s, step.completed s, decision e, decision io, decision f, completed",
	}, seen)
}

// A crash before pending writes are committed loses them as one: the replay finds the log as it
// stood at the previous commit and makes the same decisions again, once.
func TestACrashBeforeTheCommitReplaysThePendingWrites(t *testing.T) {
	var mu sync.Mutex
	made := map[string]int{}
	hold := make(chan struct{})
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		for _, id := range []string{"a", "b"} {
			if _, err := c.Decide(id, func() (json.RawMessage, error) {
				mu.Lock()
				made[id]++
				mu.Unlock()
				return json.RawMessage(`1`), nil
			}); err != nil {
				return nil, err
			}
		}
		_, err := c.Decide("held", func() (json.RawMessage, error) {
			<-hold
			return nil, nil
		})
		return nil, err
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	var once sync.Once
	unhold := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(unhold) // before the rig's cleanup closes the kernel, should the test stop early
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "a and b", func() bool { mu.Lock(); defer mu.Unlock(); return made["b"] == 1 })
	require.Equal(t, "started", kinds(t, r.st, "x"), "a and b wait for something to see them")
	r.st.Kill() // the process dies while the decider holds: a and b were never committed
	unhold()
	require.NoError(t, r.k.Close())
	r.open()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.k.Await(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State, info.Error)
	require.Equal(t, "started, decision a, decision b, decision held, completed", kinds(t, r.st, "x"))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"a": 2, "b": 2}, made, "made again once after the crash, nothing seen of the first")
}
