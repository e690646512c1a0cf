package live

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMemoryReportsQueuesPartialsAndTails: the figures follow what the hub holds: each
// subscriber's queue as its cap counts it (16 bytes of framing per event), the partial, and
// nothing once a queue is drained and the turn ended.
func TestMemoryReportsQueuesPartialsAndTails(t *testing.T) {
	h := NewHub(0)
	require.Equal(t, Memory{}, h.Memory())
	s1, err := h.Subscribe("c1", 1<<20)
	require.NoError(t, err)
	s2, err := h.Subscribe("c1", 1<<20)
	require.NoError(t, err)
	h.Begin("c1", "c1", 1, "alice", false)
	h.Delta("c1", "c1", 1, strings.Repeat("x", 100))
	_, _ = s2.Drain()
	h.Delta("c1", "c1", 1, strings.Repeat("y", 50))
	m := h.Memory()
	require.Equal(t, 1, m.Conversations)
	require.Equal(t, 2, m.Subscribers)
	require.Equal(t, 116+66+66, m.QueuedBytes, "s1 holds both deltas, s2 the second")
	require.Equal(t, 116+66, m.MaxQueuedBytes)
	require.Equal(t, 150, m.PartialBytes)

	h.End("c1", 1)
	_, _ = s1.Drain()
	_, _ = s2.Drain()
	h.Unsubscribe("c1", s1)
	h.Unsubscribe("c1", s2)
	require.Equal(t, Memory{}, h.Memory())
}
