package live

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSubscriberCapIsExactAndStartsAgainAfterEachDrain: a queue of exactly its cap does not
// overflow (one byte more does), and a drain empties the count, so the next batch is allowed
// the whole cap again.
func TestSubscriberCapIsExactAndStartsAgainAfterEachDrain(t *testing.T) {
	const max = 116 // one delta of 100 characters, counted with its 16 bytes of framing
	h := NewHub(0)
	s, err := h.Subscribe("c1", max)
	require.NoError(t, err)
	h.Begin("c1", "c1", 1, "alice", false)
	for round := range 3 {
		h.Delta("c1", "c1", 1, strings.Repeat("x", 100))
		evs, over := s.Drain()
		require.False(t, over, "round %d: a queue of exactly its cap overflowed", round)
		require.Equal(t, []Event{{Kind: KindDelta, Turn: 1, Text: strings.Repeat("x", 100), Asker: "alice"}}, evs)
	}

	s2, err := h.Subscribe("c1", max)
	require.NoError(t, err)
	h.Delta("c1", "c1", 1, strings.Repeat("y", 101))
	_, over := s2.Drain()
	require.True(t, over, "a queue one byte over its cap did not overflow")
}
