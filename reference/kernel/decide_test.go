package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// DecideValue records what Decide records of json.Marshal's encoding of the value, byte for byte,
// and returns that encoding; a replay returns it again without calling the decider. A value that
// json.Marshal cannot encode is the decider's error: nothing is recorded.
func TestDecideValueRecordsWhatDecideWould(t *testing.T) {
	type verdict struct {
		OK   bool   `json:"ok"`
		Text string `json:"text"`
	}
	value := verdict{OK: true, Text: "a <b> & \u2028 é"}
	var calls atomic.Int64
	got := make(chan string, 4)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		v, err := c.DecideValue("value", func() (any, error) { calls.Add(1); return value, nil })
		if err != nil {
			return nil, err
		}
		got <- string(v)
		if _, err := c.Decide("raw", func() (json.RawMessage, error) { return json.Marshal(value) }); err != nil {
			return nil, err
		}
		_, err = c.DecideValue("unencodable", func() (any, error) { return func() {}, nil })
		var unsupported *json.UnsupportedTypeError
		if !errors.As(err, &unsupported) {
			return nil, fmt.Errorf("want json.Marshal's error, got %v", err)
		}
		_, err = c.Receive() // park
		return nil, err
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "both decisions", func() bool { return len(r.transcript("x", 0)) == 3 })
	want, err := json.Marshal(value)
	require.NoError(t, err)
	require.Equal(t, string(want), <-got)
	evs, err := r.k.ReadLog(context.Background(), "x", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 3, "the unencodable value recorded nothing")
	require.Equal(t, strings.Replace(string(evs[2].Data), `"id":"raw"`, `"id":"value"`, 1), string(evs[1].Data))

	r.restart()
	select {
	case v := <-got:
		require.Equal(t, string(want), v)
	case <-time.After(10 * time.Second):
		t.Fatal("the replay did not reach the decision")
	}
	require.EqualValues(t, 1, calls.Load(), "the replay did not call the decider")
}

// Decide records the value its decider returns as json.Marshal writes a JSON text: compact, with
// <, > and & escaped, whatever spacing the decider wrote.
func TestDecideRecordsItsValueAsJSONWritesIt(t *testing.T) {
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := c.Decide("d", func() (json.RawMessage, error) {
			return json.RawMessage(" { \"a\" : [ 1 , \"<b>&\" ] }\n"), nil
		}); err != nil {
			return nil, err
		}
		_, err := c.Receive() // park
		return nil, err
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "the decision", func() bool { return len(r.transcript("x", 0)) == 2 })
	evs, err := r.k.ReadLog(context.Background(), "x", 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, `{"id":"d","value":{"a":[1,"\u003cb\u003e\u0026"]}}`, string(evs[1].Data))
}
