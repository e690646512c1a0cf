package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// twoStepFlow is a flow that decides once, then runs two steps in parallel; each piece signals
// started when it begins and waits for a value on release (or its close) to end.
func twoStepFlow() (started chan struct{}, release chan struct{}, flow kernel.Flow) {
	started, release = make(chan struct{}, 4), make(chan struct{})
	step := func(ctx context.Context) (json.RawMessage, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return json.Marshal("ok")
	}
	flow = func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
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
	return started, release, flow
}

// LiveWork counts the deciders and steps running live, parallel ones each, and drops to zero
// once they ended.
func TestLiveWorkCountsDecidersAndSteps(t *testing.T) {
	started, release, flow := twoStepFlow()
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

// LiveIdle is closed while no live work runs, stays open while some does, and closes when the
// last piece running ends: the decider alone, then two parallel steps, the first of which
// ending leaves it open.
func TestLiveIdleClosesWhenTheLastLiveWorkEnds(t *testing.T) {
	started, release, flow := twoStepFlow()
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	require.True(t, reftest.IsClosed(r.k.LiveIdle()), "nothing runs")
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-started
	decider := r.k.LiveIdle()
	require.False(t, reftest.IsClosed(decider), "a decider runs")
	release <- struct{}{}
	require.True(t, reftest.ClosesWithin(decider), "the decider ended")
	<-started
	<-started
	steps := r.k.LiveIdle()
	require.False(t, reftest.IsClosed(steps), "two steps run")
	release <- struct{}{}
	require.False(t, reftest.IsClosed(steps), "one step runs still") // the first ended or is ending: one is held
	close(release)
	require.True(t, reftest.ClosesWithin(steps), "both steps ended")
	_, err = r.k.Await(context.Background(), "x")
	require.NoError(t, err)
	require.Zero(t, r.k.LiveWork())
	require.True(t, reftest.IsClosed(r.k.LiveIdle()))
}
