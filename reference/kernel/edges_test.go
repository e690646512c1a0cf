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
	"github.com/loomcheck/loomcheck/reference/store"
)

// Input is the generation-0 input of a known execution, and ErrNotFound for an unknown one.
func TestInput(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice, Input: json.RawMessage(`7`)})
	require.NoError(t, err)
	in, err := r.k.Input(context.Background(), "c1")
	require.NoError(t, err)
	require.JSONEq(t, `7`, string(in))
	_, err = r.k.Input(context.Background(), "nobody")
	require.ErrorIs(t, err, loomtype.ErrNotFound)
}

// Await gives up with the caller's context, whatever the execution does.
func TestAwaitEndsWithItsContext(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = r.k.Await(ctx, "c1") // the echo flow parks, waiting for a message
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// Backlog reports a store that cannot be read, rather than an empty backlog.
func TestBacklogReportsStoreFailure(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	r.st.Kill()
	_, err = r.k.Backlog(context.Background(), "c1", 10)
	require.ErrorIs(t, err, store.ErrClosed)
}

// A flow whose store goes away under it (the process is dying) is told ErrStopped, not a store
// error it might record or report as its own failure.
func TestStoreGoneIsStopped(t *testing.T) {
	proceed, running := make(chan struct{}), make(chan struct{})
	got := make(chan error, 1)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		close(running)
		<-proceed
		_, err := c.Peek(1)
		got <- err
		return nil, err
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-running
	r.st.Kill()
	close(proceed)
	select {
	case err := <-got:
		require.ErrorIs(t, err, kernel.ErrStopped)
	case <-time.After(10 * time.Second):
		t.Fatal("the flow never got an answer from Peek")
	}
}

// After a divergence, every later operation of the flow reports the same divergence: a flow that
// ignores the first report cannot go on consuming messages.
func TestReceiveAfterDivergenceReportsIt(t *testing.T) {
	var calls atomic.Int64
	flows := map[string]kernel.Flow{"echo": echo(&calls)}
	r := newRig(t, flows)
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	waitFor(t, "reply", func() bool { return len(r.transcript("c1", 0)) == 3 })
	second := make(chan error, 1)
	flows["echo"] = func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := c.Receive(); err != nil {
			return nil, err
		}
		_, _ = c.Decide("renamed", func() (json.RawMessage, error) { return json.Marshal("x") }) // diverges; ignored
		_, err := c.Receive()
		second <- err
		return nil, err
	}
	r.restart()
	<-r.divs
	select {
	case err := <-second:
		var d *loomtype.DivergenceError
		require.ErrorAs(t, err, &d)
		require.Equal(t, "decision renamed", d.Got)
	case <-time.After(10 * time.Second):
		t.Fatal("Receive after a divergence did not return")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.k.Await(ctx, "c1")
	require.NoError(t, err)
	require.Equal(t, kernel.StateFailed, info.State)
	require.True(t, strings.Contains(info.Error, "diverged"), info.Error)
}

// A store failure that is not the store going away reaches the flow as it is: here another
// writer appended to the execution's log, so committing the consumption conflicts. The
// consumption is committed with what follows it, when the flow next waits, so that is the
// command that answers the failure; every command after it answers it too.
func TestLogConflictReachesTheFlow(t *testing.T) {
	proceed, running := make(chan struct{}), make(chan struct{})
	got := make(chan error, 1)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		close(running)
		<-proceed
		if _, err := c.Receive(); err != nil {
			got <- fmt.Errorf("the first receive: %w", err)
			return nil, err
		}
		_, err := c.Receive() // nothing waits: the pending consumption is committed first
		if _, again := c.Decide("after", func() (json.RawMessage, error) { return nil, nil }); !errors.Is(again, store.ErrConflict) {
			err = fmt.Errorf("a command after the failure answered %v", again)
		}
		got <- err
		return nil, err
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-running
	require.NoError(t, r.st.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.Append(kernel.LogStream("x"), 0, -1, store.NewEvent{Kind: "foreign"})
		return err
	}))
	send(t, r.k, "x", "m1", "hi")
	close(proceed)
	select {
	case err := <-got:
		require.ErrorIs(t, err, store.ErrConflict)
		require.NotErrorIs(t, err, kernel.ErrStopped)
	case <-time.After(10 * time.Second):
		t.Fatal("Receive did not return")
	}
}

// In warn mode, a replay whose steps part from the log after the first goes on live from there: the
// recorded step is served, the new one runs, and both results come back in order.
func TestExecuteAllDivergingMidwayGoesLiveInWarnMode(t *testing.T) {
	var runs atomic.Int64
	step := func(v string) kernel.StepFunc {
		return func(ctx context.Context) (json.RawMessage, error) {
			runs.Add(1)
			return json.Marshal(v)
		}
	}
	ids := []string{"a", "b"}
	flows := map[string]kernel.Flow{}
	flows["f"] = func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		res := c.ExecuteAll(ids, []kernel.StepFunc{step(strings.ToUpper(ids[0])), step(strings.ToUpper(ids[1]))})
		if _, err := c.Receive(); err != nil { // park
			return nil, err
		}
		return json.Marshal([]string{string(res[0].Value), string(res[1].Value)})
	}
	r := newRig(t, flows)
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "both steps", func() bool { return len(r.transcript("x", 0)) == 5 })
	ids = []string{"a", "c"}
	r.mode = kernel.DivergenceWarn
	r.restart()
	<-r.divs
	send(t, r.k, "x", "go", "go")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.k.Await(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State, info.Error)
	require.JSONEq(t, `["\"A\"", "\"C\""]`, string(info.Output), "a served from the log; c run live")
	require.EqualValues(t, 3, runs.Load(), "a and b before the restart, c after it")
}
