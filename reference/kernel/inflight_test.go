package kernel_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
)

// LiveWork counts the deciders and steps running live, parallel ones each, and drops to zero
// once they ended.
func TestLiveWorkCountsDecidersAndSteps(t *testing.T) {
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	step := func(ctx context.Context) (json.RawMessage, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.Marshal("ok")
	}
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := c.Decide("one", func() (json.RawMessage, error) { return step(context.Background()) }); err != nil {
			return nil, err
		}
		for _, r := range c.ExecuteAll([]string{"a", "b"}, []kernel.StepFunc{step, step}) {
			if r.Err != nil {
				return nil, r.Err
			}
		}
		return json.Marshal("done")
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	require.Zero(t, r.k.LiveWork())
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-started
	require.EqualValues(t, 1, r.k.LiveWork())
	release <- struct{}{}
	<-started
	<-started
	require.EqualValues(t, 2, r.k.LiveWork())
	close(release)
	_, err = r.k.Await(context.Background(), "x")
	require.NoError(t, err)
	waitFor(t, "no step in flight", func() bool { return r.k.LiveWork() == 0 })
}

// closedWithin reports whether ch closes before the test's bound (30 s), which no run of these
// tests comes near: a channel never closed fails the test rather than hanging it.
func closedWithin(t *testing.T, ch <-chan struct{}) bool {
	t.Helper()
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	select {
	case <-ch:
		return true
	case <-bound.C:
		return false
	}
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// LiveIdle is closed while no live work runs, stays open while some does, and closes when the
// last piece running ends: the decider alone, then two parallel steps, the first of which
// ending leaves it open.
func TestLiveIdleClosesWhenTheLastLiveWorkEnds(t *testing.T) {
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	step := func(ctx context.Context) (json.RawMessage, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.Marshal("ok")
	}
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := c.Decide("one", func() (json.RawMessage, error) { return step(context.Background()) }); err != nil {
			return nil, err
		}
		for _, r := range c.ExecuteAll([]string{"a", "b"}, []kernel.StepFunc{step, step}) {
			if r.Err != nil {
				return nil, r.Err
			}
		}
		return json.Marshal("done")
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	require.True(t, isClosed(r.k.LiveIdle()), "nothing runs")
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-started
	decider := r.k.LiveIdle()
	require.False(t, isClosed(decider), "a decider runs")
	release <- struct{}{}
	require.True(t, closedWithin(t, decider), "the decider ended")
	<-started
	<-started
	steps := r.k.LiveIdle()
	require.False(t, isClosed(steps), "two steps run")
	release <- struct{}{}
	require.False(t, isClosed(steps), "one step runs still") // the first ended or is ending: one is held
	close(release)
	require.True(t, closedWithin(t, steps), "both steps ended")
	_, err = r.k.Await(context.Background(), "x")
	require.NoError(t, err)
	require.Zero(t, r.k.LiveWork())
	require.True(t, isClosed(r.k.LiveIdle()))
}
