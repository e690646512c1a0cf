package reference_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/gateway"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// heldProvider holds every answer until its context ends, counting the calls that began.
type heldProvider struct{ began atomic.Int64 }

func (p *heldProvider) Complete(ctx context.Context, _ model.Request, _ func(string)) (model.Response, error) {
	p.began.Add(1)
	<-ctx.Done()
	return model.Response{}, ctx.Err()
}

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
	svc := gSvc
	dir := filepath.Join(t.TempDir(), "data")
	options := func(p model.Provider) reference.Options {
		return reference.Options{
			DataDir: dir,
			Conversation: conversation.Config{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")},
				Shared: conversation.Shared{Service: &svc}},
			Deps:    conversation.Deps{Provider: p},
			Gateway: gateway.Config{Insecure: true},
		}
	}

	held := &heldProvider{}
	eng, err := reference.Open(ctx, options(held))
	require.NoError(t, err)
	ids := make([]string, n)
	for i := range ids {
		st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{ID: fmt.Sprintf("many-%d", i),
			Mode: conversation.ModeShared, Participants: []loomtype.Identity{gBob}})
		require.NoError(t, err)
		ids[i] = st.ID
		_, err = eng.Conversations().SendTurn(ctx, gBob, st.ID, fmt.Sprintf("question %d", i), conversation.SendOptions{MessageID: "q1"})
		require.NoError(t, err)
	}
	for held.began.Load() < n {
		require.NoError(t, ctx.Err(), "only %d of %d turns reached the model", held.began.Load(), n)
		time.Sleep(5 * time.Millisecond)
	}
	eng.Crash()

	eng, err = reference.Open(ctx, options(model.Builtin()))
	require.NoError(t, err)
	defer eng.Close()
	for i, id := range ids {
		var h []loomtype.Entry
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
