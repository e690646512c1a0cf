package reference

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
)

// drain is what n.drained answered, and the engine's live work when it had.
type drain struct {
	ok   bool
	live int64
}

// drainOf runs n.drained(e) with no request in flight, in the background, and returns where its
// answer comes once the drain has begun.
func drainOf(n *Node, e *Engine) <-chan drain {
	idle := make(chan struct{})
	close(idle)
	out := make(chan drain, 1)
	begun := make(chan struct{})
	go func() {
		close(begun)
		ok := n.drained(e, idle)
		out <- drain{ok, e.liveWork()}
	}()
	<-begun
	return out
}

// A hand-over's drain ends when the engine's live work does, woken by it: a model call running,
// then a ticket waiting, each holds it until it is over, and it answers drained (true), not the
// end of its bound (drainWait, far beyond what either takes once released), with nothing left
// running. A node that closes ends a drain still waiting.
func TestADrainEndsWhenTheLiveWorkDoes(t *testing.T) {
	ctx := context.Background()
	m := &heldModel{asked: make(chan string, 1), release: make(chan struct{})}
	e := partitionEngine(t, sharedStore(t), 0, func(o *Options) { o.Deps.Provider = m })
	n := &Node{done: make(chan struct{})}
	id := conversationOf(t, e, qAlice)
	_, err := e.cv.SendTurn(ctx, qAlice, id, "hello", conversation.SendOptions{MessageID: "m1"})
	require.NoError(t, err)
	require.Equal(t, "hello", <-m.asked)
	require.EqualValues(t, 1, e.liveWork(), "the model call")

	drained := drainOf(n, e)
	close(m.release)
	// Drained, with nothing left running when it said so: not at its bound, nor before the call
	// ended.
	require.Equal(t, drain{true, 0}, <-drained)

	op, err := e.ss.Open(ctx, qAlice, id, 0, "")
	require.NoError(t, err)
	drained = drainOf(n, e)
	_, err = e.ss.Redeem(op.Ticket, qAlice, "")
	require.NoError(t, err)
	require.Equal(t, drain{true, 0}, <-drained, "drained when the ticket was presented")

	// A node that closes ends a drain still waiting.
	_, err = e.ss.Open(ctx, qAlice, id, 0, "")
	require.NoError(t, err)
	drained = drainOf(n, e)
	close(n.done)
	require.Equal(t, drain{false, 1}, <-drained)
}
