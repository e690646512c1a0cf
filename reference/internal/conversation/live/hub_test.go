package live

import (
	"fmt"
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

	h.Delta("c1", "c1", 1, "before any turn") // subscribed, nothing live
	h.Delta("nobody", "nobody", 1, "never opened")
	h.Begin("c1", "c1", 2, "alice", false)
	h.Delta("c1", "c1", 1, "an earlier turn")
	h.Delta("c1", "c1", 3, "a later turn")
	h.Delta("c1", "c1", 2, "Let me")
	h.Delta("c1", "c1", 2, "")

	evs, over := sub.Drain()
	require.False(t, over)
	require.Equal(t, []Event{{Kind: KindDelta, Turn: 2, Text: "Let me", Asker: "alice"}}, evs)
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
	h.Delta("c1", "c1", 2, "after its end")
	evs, _ = sub.Drain()
	require.Equal(t, []Event{{Kind: KindDone, Turn: 2, Asker: "alice"}}, evs)
}

// TestHubPartialBound: the catch-up partial keeps text up to MaxPartialChars characters exactly
// (counted in characters, not bytes); a delta that would cross the bound is still sent live but
// not kept.
func TestHubPartialBound(t *testing.T) {
	for _, unit := range []string{"a", "é"} {
		h := NewHub(0)
		h.Begin("c1", "c1", 1, "alice", false)
		head := strings.Repeat(unit, MaxPartialChars-1)
		h.Delta("c1", "c1", 1, head)
		h.Delta("c1", "c1", 1, unit) // exactly the bound: kept
		_, text, _, _ := h.Partial("c1")
		require.Equal(t, head+unit, text, "%q: N characters are kept", unit)
		sub, err := h.Subscribe("c1", 1<<20)
		require.NoError(t, err)
		h.Delta("c1", "c1", 1, "z") // N+1: sent, not kept
		_, text, _, _ = h.Partial("c1")
		require.Equal(t, head+unit, text, "%q: the character past the bound is not kept", unit)
		evs, _ := sub.Drain()
		require.Equal(t, []Event{{Kind: KindDelta, Turn: 1, Text: "z", Asker: "alice"}}, evs)
	}
}

// TestHubTakesLiveOutputOnlyFromTheTurnsOwnExecution: an execution that is neither the
// conversation's own nor the turn execution the dialogue named publishes nothing, whatever
// conversation, turn and asker it names, and cannot reset or cut the live turn; the named one is
// taken, with the asker the dialogue gave; a Begin it sent before it was named is applied when it
// is; a withdrawn name is taken no more.
func TestHubTakesLiveOutputOnlyFromTheTurnsOwnExecution(t *testing.T) {
	h := NewHub(0)
	sub, err := h.Subscribe("c1", 1<<20)
	require.NoError(t, err)

	// Owner mode: the conversation's own execution runs turn 1; an injected execution names it.
	h.Begin("c1", "c1", 1, "alice", false)
	h.Delta("c1", "c1", 1, "mine ")
	h.Begin("c1", "injected", 1, "mallory", true)
	h.Begin("c1", "injected", 2, "mallory", false)
	h.Delta("c1", "injected", 1, "INJECTED")
	h.Delta("c1", "injected", 2, "INJECTED")
	h.End("c1", 2)
	h.Delta("c1", "c1", 1, "only")
	turn, text, asker, rerun := h.Partial("c1")
	require.Equal(t, []any{int64(1), "mine only", "alice", false}, []any{turn, text, asker, rerun})
	h.End("c1", 1)
	evs, _ := sub.Drain()
	require.Equal(t, []Event{
		{Kind: KindDelta, Turn: 1, Text: "mine only", Asker: "alice"}, // queued deltas coalesce
		{Kind: KindDone, Turn: 1, Asker: "alice"},
	}, evs)

	// Shared mode: the dialogue names turn execution "t2" for turn 2, asked by bob.
	h.Begin("c1", "t2", 2, "bob", true) // before it was named: kept aside, not live
	turn, _, _, _ = h.Partial("c1")
	require.Zero(t, turn)
	h.Delta("c1", "t2", 2, "early ")                    // held until it is named
	h.Tool("c1", "t2", 2, Tool{Call: "k1", Name: "ls"}) // held too, in order
	h.Delta("c1", "t2", 1, "WRONG TURN")                // not its Begin's turn: dropped
	h.Begin("c1", "injected2", 2, "mallory", false)     // never named: nothing of it shows
	h.Delta("c1", "injected2", 2, "INJECTED")
	h.Expect("c1", 2, "t2", "bob")
	h.Delta("c1", "t2", 2, "named ")
	h.Delta("c1", "other", 2, "INJECTED")
	h.Begin("c1", "other", 2, "mallory", true)
	h.Delta("c1", "t2", 2, "words")
	turn, text, asker, rerun = h.Partial("c1")
	require.Equal(t, []any{int64(2), "early named words", "bob", true}, []any{turn, text, asker, rerun})
	h.Withdraw("c1", 2, "other") // not the named one: nothing changes
	h.Withdraw("c1", 2, "t2")
	h.Delta("c1", "t2", 2, "after")
	turn, _, _, _ = h.Partial("c1")
	require.Zero(t, turn)
	evs, _ = sub.Drain()
	require.Equal(t, []Event{
		{Kind: KindReset, Turn: 2, Asker: "bob"},
		{Kind: KindDelta, Turn: 2, Text: "early ", Asker: "bob"},
		{Kind: KindTool, Turn: 2, Asker: "bob", Tool: &Tool{Call: "k1", Name: "ls"}},
		{Kind: KindDelta, Turn: 2, Text: "named words", Asker: "bob"},
	}, evs)

	// A name the dialogue gives with a Begin asker that lies: the dialogue's asker wins.
	h.Expect("c1", 3, "t3", "carol")
	h.Begin("c1", "t3", 3, "mallory", false)
	h.Delta("c1", "t3", 3, "x")
	_, _, asker, _ = h.Partial("c1")
	require.Equal(t, "carol", asker)
	h.End("c1", 3)
	h.mu.Lock()
	_, kept := h.pending["injected2"]
	held := h.pendingBytes
	h.mu.Unlock()
	require.True(t, kept)
	require.Equal(t, 2*(len("INJECTED")+16), held, "only the two executions never named hold anything")
	h.Expect("c1", 4, "injected2", "mallory") // named for another turn: dropped, not shown
	h.End("c1", 4)
	h.Delta("c1", "t3", 3, "y")
	h.Unsubscribe("c1", sub)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.convs, "an ended turn and no subscriber leave nothing behind")
}

// TestHubPendingBeginsAreBounded: Begins from executions nobody named are kept for at most
// maxPendingBegins executions, and one that is named takes its Begin with it.
func TestHubPendingBeginsAreBounded(t *testing.T) {
	h := NewHub(0)
	for i := range maxPendingBegins + 10 {
		h.Begin("c1", fmt.Sprintf("x%d", i), 1, "mallory", false)
	}
	h.mu.Lock()
	n := len(h.pending)
	h.mu.Unlock()
	require.Equal(t, maxPendingBegins, n)
	h.Begin("c1", "t1", 1, "bob", true)
	h.Expect("c1", 1, "t1", "bob")
	h.mu.Lock()
	_, kept := h.pending["t1"]
	h.mu.Unlock()
	require.False(t, kept)
	turn, _, asker, rerun := h.Partial("c1")
	require.Equal(t, []any{int64(1), "bob", true}, []any{turn, asker, rerun})
	// A Begin kept for another conversation or turn is not applied by this name.
	h.Begin("c2", "t9", 4, "bob", true)
	h.Expect("c1", 2, "t9", "bob")
	turn, _, _, _ = h.Partial("c1")
	require.Equal(t, int64(1), turn, "the live turn stays until its End")
}

// TestHubHeldOutputIsBounded: what executions not named yet stream is held up to
// maxPendingBytes in all; past it, nothing more is held, and a named execution's held output
// is shown and released.
func TestHubHeldOutputIsBounded(t *testing.T) {
	h := NewHub(0)
	sub, err := h.Subscribe("c1", 4<<20)
	require.NoError(t, err)
	h.Begin("c1", "t1", 1, "bob", false)
	h.Begin("c1", "t2", 1, "bob", false)
	big := strings.Repeat("x", maxPendingBytes/2-16)
	h.Delta("c1", "t1", 1, big)
	h.Delta("c1", "t2", 1, big)
	h.Delta("c1", "t2", 1, "y") // one byte past the bound: not held
	h.mu.Lock()
	require.Equal(t, maxPendingBytes, h.pendingBytes)
	h.mu.Unlock()
	h.Expect("c1", 1, "t2", "bob")
	h.mu.Lock()
	require.Equal(t, maxPendingBytes/2, h.pendingBytes, "t2's held output is released when it is named")
	h.mu.Unlock()
	evs, _ := sub.Drain()
	require.Equal(t, []Event{{Kind: KindDelta, Turn: 1, Text: big, Asker: "bob"}}, evs)
	h.Begin("c1", "t1", 1, "bob", false) // a second Begin starts its hold afresh
	h.mu.Lock()
	require.Zero(t, h.pendingBytes)
	h.mu.Unlock()
}
