package reference_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/gateway"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/sessions"
	"github.com/loomcheck/loomcheck/reference/stream"
)

// gatedModel streams "working" and waits for a release before it answers each turn.
type gatedModel struct{ release chan struct{} }

func (m gatedModel) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	if onDelta != nil {
		onDelta("working")
	}
	select {
	case <-m.release:
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
	return model.Response{Content: "done: " + req.Messages[len(req.Messages)-1].Content, FinishReason: model.FinishStop}, nil
}

// TestSteeringQueuesWhileTheAssistantWorks: a message sent while a turn runs is queued (and
// shown so), taken back by its sender once (again answers the same), and the next one is picked
// up when the turn ends and then answered; the frames say so in that order.
func TestSteeringQueuesWhileTheAssistantWorks(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	gm := gatedModel{release: make(chan struct{})}
	eng, err := reference.Open(context.Background(), reference.Options{
		DataDir:      t.TempDir() + "/d",
		Conversation: conversation.Config{Keys: [][]byte{signingKey()}},
		Deps:         conversation.Deps{Provider: gm},
		Gateway:      gateway.Config{Authenticate: func(*http.Request) (loomtype.Identity, error) { return alice, nil }},
	})
	require.NoError(t, err)
	defer eng.Close()
	ctx := context.Background()
	cv, ss := eng.Conversations(), eng.Sessions()
	st, _, err := cv.Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	first, err := ss.Send(ctx, alice, id, "first", "m1")
	require.NoError(t, err)
	require.Equal(t, sessions.StateSent, first.State)
	require.Eventually(t, func() bool {
		h, _, _ := ss.Bounds(ctx, alice, id)
		return h >= 2 // the user-message and the live delta
	}, 5*time.Second, 5*time.Millisecond)

	q1, err := ss.Send(ctx, alice, id, "second", "m2")
	require.NoError(t, err)
	require.Equal(t, sessions.StateQueued, q1.State)
	q2, err := ss.Send(ctx, alice, id, "third", "m3")
	require.NoError(t, err)
	require.Equal(t, sessions.StateQueued, q2.State)
	c1, err := ss.Cancel(ctx, alice, id, "m2")
	require.NoError(t, err)
	require.Equal(t, sessions.StateCanceled, c1.State)
	c2, err := ss.Cancel(ctx, alice, id, "m2")
	require.NoError(t, err)
	require.Equal(t, sessions.StateCanceled, c2.State)
	_, err = ss.Cancel(ctx, loomtype.Identity{Tenant: "t", Actor: "bob"}, id, "m3")
	require.ErrorIs(t, err, loomtype.ErrNotFound)

	gm.release <- struct{}{} // turn 1 ends; m3 is picked up and runs
	gm.release <- struct{}{} // turn 2 ends
	var frames []string
	require.Eventually(t, func() bool {
		sub, replay, _, _, _, err := ss.Subscribe(ctx, id, 0)
		require.NoError(t, err)
		sub.Close()
		frames = frames[:0]
		for _, f := range replay {
			var d map[string]any
			_ = json.Unmarshal(f.Data, &d)
			s := string(f.Kind())
			if st, ok := d["state"].(string); ok {
				s += ":" + st
			}
			if f.Kind() == stream.KindUserMessage {
				s += ":" + f.Message
			}
			frames = append(frames, s)
		}
		return len(frames) == 10
	}, 5*time.Second, 10*time.Millisecond, "%v", frames)
	require.Equal(t, []string{
		"user-message:sent:m1", "text-delta", "user-message:queued:m2", "user-message:queued:m3",
		"user-message:cancelled:m2", "text-done", "user-message:picked-up:m3", "user-message:sent:m3",
		"text-delta", "text-done",
	}, frames)
	_, err = ss.Cancel(ctx, alice, id, "m3")
	require.ErrorIs(t, err, sessions.ErrPickedUp)
}
