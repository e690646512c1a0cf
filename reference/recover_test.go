package reference_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// TestRecoverManySharedConversationsMidTurn: a store that holds many shared conversations, each
// crashed in the middle of its turn (the coordinating execution inside the step that awaits the
// turn execution, the turn execution inside its model call), is opened again; every
// conversation recovers at once, with everything the others recover beside it, and answers its
// turn exactly once. Each recovered flow reaches the kernel through its own context: none may
// depend on anything the engine sets up after the kernel has started recovering.
func TestRecoverManySharedConversationsMidTurn(t *testing.T) {
	const n = 50
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	held := scriptmodel.Held() // holds every answer until its call is stopped
	eng := reftest.Open(t, reftest.Shared(gSvc), reftest.Provider(held))
	ids := make([]string, n)
	for i := range ids {
		st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{ID: fmt.Sprintf("many-%d", i),
			Mode: conversation.ModeShared, Participants: []loomtype.Identity{gBob}})
		require.NoError(t, err)
		ids[i] = st.ID
		_, err = eng.Conversations().SendTurn(ctx, gBob, st.ID, fmt.Sprintf("question %d", i), conversation.SendOptions{MessageID: "q1"})
		require.NoError(t, err)
	}
	for held.Waited() < n {
		require.NoError(t, ctx.Err(), "only %d of %d turns reached the model", held.Waited(), n)
		time.Sleep(5 * time.Millisecond)
	}
	eng.Crash()

	eng.Restart(reftest.Provider(model.Builtin()))
	for i, id := range ids {
		var h []loomtype.Entry
		var err error
		for {
			h, err = wholeHistory(ctx, eng.Conversations(), gAlice, id)
			require.NoError(t, err, id)
			if len(h) >= 2 || ctx.Err() != nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		require.Len(t, h, 2, "%s: %+v", id, h)
		require.Equal(t, loomtype.RoleUser, h[0].Role, id)
		require.Equal(t, loomtype.StatusAccepted, h[0].Status, id)
		require.Equal(t, loomtype.RoleAssistant, h[1].Role, id)
		require.Equal(t, loomtype.StatusComplete, h[1].Status, "%s: %+v", id, h[1])
		require.NotNil(t, h[1].Text, id)
		require.Equal(t, fmt.Sprintf(`You said: "question %d"`, i), *h[1].Text, id)
		info, err := eng.Kernel().Info(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "open", info.State, "%s: %s", id, info.Error)
	}
}
