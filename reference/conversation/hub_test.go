package conversation

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHubDropsDeltasOfATurnThatIsNotLive: live text reaches subscribers only from the turn the
// dialogue marked live; a delta of another turn, of a conversation with no live turn, or of one
// nobody opened is dropped and leaves the partial alone.
func TestHubDropsDeltasOfATurnThatIsNotLive(t *testing.T) {
	h := NewHub(0)
	sub, err := h.Subscribe("c1", 1<<20)
	require.NoError(t, err)

	h.Delta("c1", 1, "before any turn") // subscribed, nothing live
	h.Delta("nobody", 1, "never opened")
	h.Begin("c1", 2, "alice", false)
	h.Delta("c1", 1, "an earlier turn")
	h.Delta("c1", 3, "a later turn")
	h.Delta("c1", 2, "Let me")
	h.Delta("c1", 2, "")

	evs, over := sub.Drain()
	require.False(t, over)
	require.Equal(t, []LiveEvent{{Kind: "delta", Turn: 2, Text: "Let me", Asker: "alice"}}, evs)
	turn, text, asker, rerun := h.Partial("c1")
	require.Equal(t, int64(2), turn)
	require.Equal(t, "Let me", text)
	require.Equal(t, "alice", asker)
	require.False(t, rerun)

	h.End("c1", 3) // not the live turn: nothing ends
	turn, _, _, _ = h.Partial("c1")
	require.Equal(t, int64(2), turn)
	h.End("c1", 2)
	turn, text, _, _ = h.Partial("c1")
	require.Equal(t, int64(0), turn)
	require.Equal(t, "", text)
	h.Delta("c1", 2, "after its end")
	evs, _ = sub.Drain()
	require.Equal(t, []LiveEvent{{Kind: "done", Turn: 2, Asker: "alice"}}, evs)
}

// TestHubPartialBound: the catch-up partial keeps text up to MaxPartialChars characters exactly
// (counted in characters, not bytes); a delta that would cross the bound is still sent live but
// not kept.
func TestHubPartialBound(t *testing.T) {
	for _, unit := range []string{"a", "é"} {
		h := NewHub(0)
		h.Begin("c1", 1, "alice", false)
		head := strings.Repeat(unit, MaxPartialChars-1)
		h.Delta("c1", 1, head)
		h.Delta("c1", 1, unit) // exactly the bound: kept
		_, text, _, _ := h.Partial("c1")
		require.Equal(t, head+unit, text, "%q: N characters are kept", unit)
		sub, err := h.Subscribe("c1", 1<<20)
		require.NoError(t, err)
		h.Delta("c1", 1, "z") // N+1: sent, not kept
		_, text, _, _ = h.Partial("c1")
		require.Equal(t, head+unit, text, "%q: the character past the bound is not kept", unit)
		evs, _ := sub.Drain()
		require.Equal(t, []LiveEvent{{Kind: "delta", Turn: 1, Text: "z", Asker: "alice"}}, evs)
	}
}
