package kernel_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// TestWatchLogCommitsToldExactlyTheLog: a watcher of an execution is told every event its log
// holds, across a continue-as-new, in the log's order and with the log's content (Time aside),
// each commit once and only after it committed; another execution's commits are not its; after
// stop nothing more is told. Decisions tells the same without the starts' inputs.
func TestWatchLogCommitsToldExactlyTheLog(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	var mu sync.Mutex
	var told, decisions []kernel.LogEvent
	commits := 0
	stop := r.k.WatchLogCommits("c1", func(c kernel.LogCommit) {
		require.Equal(t, "c1", c.ID)
		require.Equal(t, len(c.Events()), c.Len())
		mu.Lock()
		defer mu.Unlock()
		commits++
		told = append(told, c.Events()...)
		decisions = append(decisions, c.Decisions()...)
	})
	var other atomic.Int64
	stopOther := r.k.WatchLogCommits("c2", func(kernel.LogCommit) { other.Add(1) })
	defer stopOther()

	ctx := context.Background()
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	send(t, r.k, "c1", "m2", "rotate")
	send(t, r.k, "c1", "m3", "three")
	waitFor(t, "the reply in generation 1", func() bool { return len(r.transcript("c1", 1)) == 3 })

	var logged []kernel.LogEvent
	for gen := int64(0); gen <= 1; gen++ {
		evs, err := r.k.ReadLog(ctx, "c1", gen, 0, kernel.MaxRead)
		require.NoError(t, err)
		logged = append(logged, evs...)
	}
	for i := range logged {
		logged[i].Time = 0
	}
	mu.Lock()
	require.Equal(t, logged, told, "the watcher was told the log, event for event")
	starts := 0
	for i := range logged {
		if logged[i].Start != nil {
			starts++
			logged[i].Start = nil
		}
	}
	require.Equal(t, 2, starts, "both generations' starts were told")
	require.Equal(t, logged, decisions, "Decisions is Events without the starts' inputs")
	require.Less(t, commits, len(told)+1)
	mu.Unlock()
	require.Zero(t, other.Load(), "c2 wrote nothing")

	stop()
	stop() // a second stop is harmless
	mu.Lock()
	n := len(told)
	mu.Unlock()
	send(t, r.k, "c1", "m4", "four")
	waitFor(t, "the fourth reply", func() bool { return len(r.transcript("c1", 1)) == 5 })
	mu.Lock()
	require.Equal(t, n, len(told), "a stopped watcher was told of a commit")
	mu.Unlock()
}
