package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A decider that fails records nothing: Decide returns its error as is, and the next decision is
// the next record of the log.
func TestFailedDecisionIsNotRecorded(t *testing.T) {
	errNo := errors.New("no answer")
	var got atomic.Value
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		v, err := c.Decide("first", func() (json.RawMessage, error) { return nil, errNo })
		got.Store([]any{string(v), err})
		if _, err := c.Decide("second", func() (json.RawMessage, error) { return json.Marshal("B") }); err != nil {
			return nil, err
		}
		_, err = c.Receive() // park
		return nil, err
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "the second decision", func() bool { return len(r.transcript("x", 0)) == 2 })
	require.Equal(t, []any{"", errNo}, got.Load(), "the decider's error, and no value")
	require.Equal(t, []string{"started", `decision second = "B"`}, r.transcript("x", 0))
}

// A decider that was running a step when the process stopped runs again on replay: the log ends
// with the step's start and no decision, and the replay neither reads past the log's end nor
// serves a decision that was never recorded.
func TestInterruptedDeciderRunsAgain(t *testing.T) {
	var deciderRuns, stepRuns atomic.Int64
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		v, err := c.Decide("d", func() (json.RawMessage, error) {
			deciderRuns.Add(1)
			return c.Execute("s", func(ctx context.Context) (json.RawMessage, error) {
				stepRuns.Add(1)
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return json.Marshal("S")
			})
		})
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-started
	waitFor(t, "the step's start", func() bool { return len(r.transcript("x", 0)) == 2 })
	r.restart()
	<-started
	close(release)
	// A replay that panics would leave the execution running forever: bound the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.k.Await(ctx, "x")
	require.NoError(t, err, "the execution did not finish after the restart")
	require.Equal(t, kernel.StateCompleted, info.State, info.Error)
	require.JSONEq(t, `"S"`, string(info.Output))
	require.EqualValues(t, 2, deciderRuns.Load(), "the decider ran again")
	require.EqualValues(t, 2, stepRuns.Load(), "its step was in flight at the crash, so it ran again")
	require.Equal(t, []string{"started", "step.started s", `step.completed s = "S"`, `decision d = "S"`, "completed"},
		r.transcript("x", 0))

	// Replayed once more, the recorded decision is served: neither the decider nor its step runs.
	r.restart()
	info, err = r.k.Await(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State)
	require.EqualValues(t, 2, deciderRuns.Load())
}

// A closed kernel starts nothing: Start is ErrStopped and writes nothing to the store, which a
// kernel opened later on the same store can tell.
func TestStartAfterCloseIsRefused(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	require.NoError(t, r.k.Close())
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "late", Flow: "echo", Principal: alice})
	require.ErrorIs(t, err, kernel.ErrStopped)
	require.Empty(t, r.transcript("late", 0), "nothing was recorded for the refused start")
	r.restart()
	_, err = r.k.Info(context.Background(), "late")
	require.ErrorIs(t, err, loomtype.ErrNotFound, "the execution does not exist after a reopen")
}
