package sessions_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestDrawSharesTheEncodingOfWhatIsSeenAsIs: a live frame of a shared chat is drawn by Draw as
// Render draws it, for each viewer; a viewer who sees it as it was logged gets its one shared
// encoding, byte for byte the frame's own JSON, and a viewer it is hidden from (a turn's live
// text is its asker's alone) gets none, so that the placeholder is what is sent.
func TestDrawSharesTheEncodingOfWhatIsSeenAsIs(t *testing.T) {
	eng := reftest.Open(t, reftest.Shared(gSvc), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{Mode: conversation.ModeShared, Participants: []loomtype.Identity{gBob}})
	require.NoError(t, err)
	id := st.ID
	sub, _, _, _, _, err := ss.Subscribe(ctx, id, 0)
	require.NoError(t, err)
	defer sub.Close()
	_, err = ss.Send(ctx, gAlice, id, "first", "m1")
	require.NoError(t, err)

	shared, own := map[string]int{}, map[string]int{}
	for done := false; !done; {
		it := recv(t, sub.Frames())
		done = it.Frame.Kind() == stream.KindTextDone
		for _, who := range []loomtype.Identity{gAlice, gBob} {
			v, err := ss.ViewerOf(ctx, who, id)
			require.NoError(t, err)
			want, err := ss.Render(ctx, id, v, it)
			require.NoError(t, err)
			got, enc, err := ss.Draw(ctx, id, v, it)
			require.NoError(t, err)
			require.Equal(t, want, got)
			if enc == nil {
				own[who.Actor+":"+string(got.Kind())]++
				continue
			}
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.Equal(t, string(b), string(enc), "%s: %s", who.Actor, got.Kind())
			shared[who.Actor+":"+string(got.Kind())]++
		}
	}
	require.Equal(t, 1, shared["alice:user-message"])
	require.Equal(t, 1, shared["bob:user-message"])
	require.Positive(t, shared["alice:text-delta"], "the asker sees the live text as it is")
	require.Positive(t, own["bob:hidden"], "the live text is hidden from bob")
	require.Zero(t, own["alice:text-delta"]+shared["bob:text-delta"])
}

// recv is the next item of ch; a stream that stays silent for long fails the test (a deadlock
// guard, not a wait).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came")
	}
	panic("unreachable")
}
