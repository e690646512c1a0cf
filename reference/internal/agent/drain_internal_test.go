package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A zero AbortDrain is the default; any other value is kept as it is.
func TestAbortDrainDefault(t *testing.T) {
	require.Equal(t, DefaultAbortDrain, Config{}.abortDrain())
	require.Equal(t, 50*time.Millisecond, DefaultAbortDrain)
	require.Equal(t, time.Second, Config{AbortDrain: time.Second}.abortDrain())
	require.Equal(t, -time.Nanosecond, Config{AbortDrain: -1}.abortDrain())
}

// drainThenCancel cancels at once for d <= 0, after d otherwise, and not at all when the call ends
// first.
func TestDrainThenCancel(t *testing.T) {
	for _, d := range []time.Duration{0, -1} {
		cancelled := false
		drainThenCancel(context.Background(), d, func() { cancelled = true })
		require.True(t, cancelled, "d = %v: cancelled at once", d)
	}
	cancelled := false
	start := time.Now()
	drainThenCancel(context.Background(), 20*time.Millisecond, func() { cancelled = true })
	require.True(t, cancelled)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)

	ctx, end := context.WithCancel(context.Background())
	end()
	cancelled = false
	drainThenCancel(ctx, time.Hour, func() { cancelled = true })
	require.False(t, cancelled, "the call ended first: nothing to cancel")
}
