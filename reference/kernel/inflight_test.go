package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

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
