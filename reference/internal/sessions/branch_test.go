package sessions_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// historyTexts waits until who's history of id holds n entries and returns each as
// "role status text".
func historyTexts(t *testing.T, cv *conversation.Conversations, who loomtype.Identity, id string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := cv.History(context.Background(), who, id, conversation.HistoryOptions{Direction: "forward", Limit: 100})
		require.NoError(t, err)
		if len(p.Entries) >= n || time.Now().After(deadline) {
			var out []string
			for _, e := range p.Entries {
				s := string(e.Role) + " " + string(e.Status)
				if e.Text != nil {
					s += " " + *e.Text
				}
				out = append(out, s)
			}
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBranchSeedsTheNewConversation: a branch at a message starts a conversation of the
// caller's with the exchanges before it and asks the message again there; the same key answers
// the same, another branch under it is refused, a delegate is refused, the original is unchanged.
func TestBranchSeedsTheNewConversation(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	cv, ss := eng.Conversations(), eng.Sessions()
	st, _, err := cv.Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	for i, text := range []string{"one", "two"} {
		_, err := ss.Send(ctx, alice, id, text, []string{"m1", "m2"}[i])
		require.NoError(t, err)
		historyTexts(t, cv, alice, id, 2*(i+1))
	}
	original := historyTexts(t, cv, alice, id, 4)

	_, err = ss.Branch(ctx, alice, id, "m2", "")
	require.ErrorIs(t, err, sessions.ErrNoKey)
	_, err = ss.Branch(ctx, loomtype.Identity{Tenant: "t", Actor: "alice", OnBehalfOf: "bob"}, id, "m2", "k1")
	require.Error(t, err, "a caller who may not read the session is refused")
	_, err = ss.Branch(ctx, alice, id, "a:1", "k1")
	require.ErrorIs(t, err, loomtype.ErrNotFound)

	b, err := ss.Branch(ctx, alice, id, "m2", "k1")
	require.NoError(t, err)
	require.Equal(t, id, b.From)
	require.Equal(t, "m2", b.Message)
	require.NotEqual(t, id, b.Session)
	require.Equal(t, []string{"user accepted one", "assistant complete You asked: one", "user accepted two", "assistant complete You asked: two"},
		historyTexts(t, cv, alice, b.Session, 4))

	again, err := ss.Branch(ctx, alice, id, "m2", "k1")
	require.NoError(t, err)
	require.Equal(t, b, again)
	_, err = ss.Branch(ctx, alice, id, "m1", "k1")
	require.ErrorIs(t, err, sessions.ErrKeyReused)
	// A new message in the branch fences what the repeated branch could have asked there: the
	// conversation answers it after.
	_, err = ss.Send(ctx, alice, b.Session, "three", "m3")
	require.NoError(t, err)
	require.Equal(t, []string{"user accepted one", "assistant complete You asked: one", "user accepted two", "assistant complete You asked: two",
		"user accepted three", "assistant complete You asked: three"},
		historyTexts(t, cv, alice, b.Session, 6), "the same key asks nothing more")
	require.Equal(t, original, historyTexts(t, cv, alice, id, 4), "the original is not changed")
}

// TestThreadReplyParentIsChecked: a parent the log does not hold is refused and nothing is
// logged; one it holds is taken.
func TestThreadReplyParentIsChecked(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	_, err = ss.Send(ctx, alice, id, "hello", "m1")
	require.NoError(t, err)
	waitFrames(t, ss, alice, id, 3)
	_, err = ss.SendThread(ctx, alice, id, "more", "m2", "a:2")
	require.ErrorIs(t, err, sessions.ErrUnknownParent)
	waitFrames(t, ss, alice, id, 3)
	r, err := ss.SendThread(ctx, alice, id, "more", "m2", "a:1")
	require.NoError(t, err)
	require.Equal(t, sessions.StateSent, r.State)
	waitFrames(t, ss, alice, id, 6)
}
