package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// lazyRig is a store holding many open executions of a flow that counts its runs (a replay is a
// run) and answers each message with a decision, and a kernel reopened on it whose background
// recovery is held until release is closed.
type lazyRig struct {
	t       *testing.T
	st      *sqlite.SQLite
	k       *kernel.Kernel
	mu      sync.Mutex
	runs    map[string]int
	held    chan string // the ids the background workers are holding
	release chan struct{}
	clock   *fakeClock
}

const lazyN = 120

func lazyID(i int) string { return fmt.Sprintf("x%03d", i) }

func (r *lazyRig) flows() map[string]kernel.Flow {
	counting := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		r.mu.Lock()
		r.runs[c.ID()]++
		r.mu.Unlock()
		for i := 0; ; i++ {
			m, err := c.Receive()
			if err != nil {
				return nil, err
			}
			if _, err := c.Decide(fmt.Sprintf("answer#%d", i), func() (json.RawMessage, error) { return m.Payload, nil }); err != nil {
				return nil, err
			}
		}
	}
	sleeper := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		r.mu.Lock()
		r.runs[c.ID()]++
		r.mu.Unlock()
		if err := c.Sleep("nap", 10*time.Minute); err != nil {
			return nil, err
		}
		return json.RawMessage(`"woke"`), nil
	}
	return map[string]kernel.Flow{"count": counting, "sleep": sleeper}
}

// newLazyRig writes lazyN open executions (each with one answered message) and a sleeper parked
// on its timer, then reopens the store with the background held.
func newLazyRig(t *testing.T) *lazyRig {
	ctx := context.Background()
	r := &lazyRig{t: t, runs: map[string]int{}, held: make(chan string, lazyN+1), release: make(chan struct{}), clock: newFakeClock()}
	path := filepath.Join(t.TempDir(), "loom.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: r.flows(), Clock: r.clock})
	require.NoError(t, err)
	sleeping := make(chan struct{})
	kernel.SetParkHook(k, func(id, site string) {
		if id == "sleeper" && site == "timer nap" {
			close(sleeping)
		}
	})
	for i := range lazyN {
		_, err := k.Start(ctx, kernel.StartRequest{ID: lazyID(i), Flow: "count", Principal: alice})
		require.NoError(t, err)
		require.True(t, send(t, k, lazyID(i), "m1", "hello"))
	}
	_, err = k.Start(ctx, kernel.StartRequest{ID: "sleeper", Flow: "sleep", Principal: alice})
	require.NoError(t, err)
	r.k = k
	waitFor(t, "every first answer", func() bool {
		for i := range lazyN {
			if !r.answered(lazyID(i), 0) {
				return false
			}
		}
		return true
	})
	<-sleeping
	require.NoError(t, k.Close())
	require.NoError(t, st.Close())

	r.runs = map[string]int{}
	r.st, err = sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	r.k, err = kernel.Open(ctx, r.st, kernel.Options{Flows: r.flows(), Clock: r.clock,
		BeforeBackgroundRecovery: func(id string) {
			r.held <- id
			<-r.release
		}})
	require.NoError(t, err)
	t.Cleanup(func() {
		r.releaseAll()
		r.k.Close()
		r.st.Close()
	})
	return r
}

func (r *lazyRig) releaseAll() {
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

func (r *lazyRig) ran() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for id, n := range r.runs {
		out[id] = n
	}
	return out
}

// answered reports whether execution id's log holds decision answer#n.
func (r *lazyRig) answered(id string, n int) bool {
	evs, err := r.k.ReadLog(context.Background(), id, 0, 0, kernel.MaxRead)
	require.NoError(r.t, err)
	for _, e := range evs {
		if e.Decision != nil && e.Decision.ID == fmt.Sprintf("answer#%d", n) {
			return true
		}
	}
	return false
}

// Opening a store with many open executions replays none of them before returning; a message to
// one of them has it replayed and answered at once, while the background recovery is held before
// its first replay: the others are not replayed first, nor at all until it goes on.
func TestANeededExecutionIsServedBeforeTheOthersAreReplayed(t *testing.T) {
	r := newLazyRig(t)
	// The background workers have taken at most their number of executions and hold them.
	target := lazyID(lazyN / 2)
	require.True(t, send(t, r.k, target, "m2", "again"))
	waitFor(t, "the answer to the message", func() bool { return r.answered(target, 1) })
	require.Equal(t, map[string]int{target: 1}, r.ran(), "only the execution the message needed was replayed")

	// Awaiting one and recovering one replay them too, ahead of the held background.
	other := lazyID(3)
	require.NoError(t, r.k.Recover(context.Background(), other))
	require.Equal(t, map[string]int{target: 1, other: 1}, r.ran())
	require.LessOrEqual(t, len(r.held), 2, "the background holds no more than its workers")
}

// A durable timer falls due while the background recovery is held: its execution is replayed
// then, and the timer fires.
func TestATimerDueWakesItsExecution(t *testing.T) {
	r := newLazyRig(t)
	require.NotContains(t, r.ran(), "sleeper")
	r.clock.Set(t0.Add(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Await would replay it; the timer must have done so already.
	waitFor(t, "the sleeper's replay", func() bool { return r.ran()["sleeper"] == 1 })
	info, err := r.k.Await(ctx, "sleeper")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State)
	require.JSONEq(t, `"woke"`, string(info.Output))
}

// Once the background goes on, every open execution is replayed, each once, a few at a time,
// and each then answers a new message.
func TestEveryOpenExecutionIsEventuallyRecovered(t *testing.T) {
	r := newLazyRig(t)
	var first string
	select {
	case first = <-r.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the background recovery took nothing")
	}
	select {
	case <-r.k.Recovered():
		t.Fatal("recovered while the background is held")
	default:
	}
	r.releaseAll()
	select {
	case <-r.k.Recovered():
	case <-time.After(20 * time.Second):
		t.Fatal("the background recovery did not end")
	}
	require.Len(t, r.ran(), lazyN+1, "every execution replayed")
	for id, n := range r.ran() {
		require.Equal(t, 1, n, "%s replayed once", id)
	}
	require.NotEmpty(t, first)
	for i := range lazyN {
		require.True(t, send(t, r.k, lazyID(i), "m2", "again"))
	}
	waitFor(t, "every answer", func() bool {
		for i := range lazyN {
			if !r.answered(lazyID(i), 1) {
				return false
			}
		}
		return true
	})
	require.Len(t, r.ran(), lazyN+1, "the messages replayed nothing again")
}

// Backlog counts what an execution has not consumed durably, whether it has been replayed or not.
func TestBacklogBeforeAndAfterTheReplay(t *testing.T) {
	r := newLazyRig(t)
	id := lazyID(7)
	msgs, err := r.k.Backlog(context.Background(), id, 10)
	require.NoError(t, err)
	require.Empty(t, msgs, "its one message was consumed before the restart")
	require.NoError(t, r.k.Recover(context.Background(), id))
	msgs, err = r.k.Backlog(context.Background(), id, 10)
	require.NoError(t, err)
	require.Empty(t, msgs)
}
