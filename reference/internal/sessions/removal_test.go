package sessions_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestARemovedReaderIsQueuedNothingAfterItsLeftFrame: a removal ends each of the removed
// person's subscriptions and takes it off the session under the lock that logs their
// participant-left frame, so what is logged or sent after it (a frame, presence) is never queued
// for them, however long their reader takes to wind down. A client cannot time that window;
// this reads the subscription's queue itself.
func TestARemovedReaderIsQueuedNothingAfterItsLeftFrame(t *testing.T) {
	eng := reftest.Open(t, reftest.Shared(gSvc), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{Mode: conversation.ModeShared, Participants: []loomtype.Identity{gBob}})
	require.NoError(t, err)
	id := st.ID
	sub, _, _, _, _, err := ss.SubscribeAs(ctx, gBob, id, 0)
	require.NoError(t, err)
	defer sub.Close()

	_, err = eng.Conversations().ChangeParticipants(ctx, gAlice, id, "remove", gBob)
	require.NoError(t, err)
	require.NoError(t, ss.Participant(ctx, gAlice, id, gBob, false))
	_, logged, err := ss.Command(ctx, gAlice, id, "make vet", false)
	require.NoError(t, err)
	require.True(t, logged)
	sent, err := ss.Presence(ctx, gAlice, id, "typing", "")
	require.NoError(t, err)
	require.True(t, sent)

	select {
	case <-sub.Done():
	default:
		t.Fatal("the removed reader's subscription was not ended by the removal")
	}
	require.Equal(t, sessions.EndRemoved, sub.Ended())
	var queued []string
	for len(sub.Frames()) > 0 {
		it := <-sub.Frames()
		queued = append(queued, string(it.Frame.Kind()))
	}
	require.Equal(t, []string{"participant-left"}, queued, "nothing after the removed person's participant-left frame")
}
