package sessions_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

var (
	gAlice = loomtype.Identity{Tenant: "acme", Actor: "alice"}
	gBob   = loomtype.Identity{Tenant: "acme", Actor: "bob"}
	gSvc   = loomtype.Identity{Tenant: "acme", Actor: "loom-service"}
)

type diffTool struct{}

func (diffTool) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	return json.RawMessage(`{"block":{"kind":"diff","path":"a.go","patch":"@@ -1 +1 @@\n-a\n+b"}}`), nil
}

// TestToolCallsAreFramesWithTypedBlocks: a live turn's tool call is a tool-started frame and a
// tool-finished frame carrying the typed block the tool gave, between the user's message and
// the reply.
func TestToolCallsAreFramesWithTypedBlocks(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	// The model calls the tool "diff" once, then answers.
	tm := scriptmodel.Tools([]model.ToolCall{{ID: "call-1", Name: "diff", Arguments: `{}`}}, func([]model.Message) string { return "patched" })
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(tm),
		reftest.Conversation(func(c *conversation.Config) { c.Tools = []model.Tool{{Name: "diff"}} }),
		reftest.Deps(func(d *conversation.Deps) { d.Tools = diffTool{} }))
	ctx := context.Background()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	_, _, err = eng.Sessions().Bounds(ctx, alice, st.ID) // the pump follows the session from now on
	require.NoError(t, err)
	_, err = eng.Sessions().Send(ctx, alice, st.ID, "fix it", "m1")
	require.NoError(t, err)
	frames := waitFrames(t, eng.Sessions(), alice, st.ID, 5)
	require.Equal(t, []string{"user-message:sent:m1", "tool-started", "tool-finished", "text-delta", "text-done:complete"}, frames)
	sub, replay, _, _, _, err := eng.Sessions().Subscribe(ctx, st.ID, 2)
	require.NoError(t, err)
	sub.Close()
	require.JSONEq(t, `{"call":"call-1","tool":"diff","ok":true,"block":{"kind":"diff","path":"a.go","patch":"@@ -1 +1 @@\n-a\n+b"}}`, string(replay[0].Data))
}

// TestTerminalLinesAndPrivateMessages: a terminal line is a redacted term-command frame with its
// typist, a line at a password prompt is not logged, and a private message is relayed with its
// enc untouched, stored once per id and never made a turn.
func TestTerminalLinesAndPrivateMessages(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	f, logged, err := ss.Command(ctx, alice, id, "psql --password=pw1 -c 'select 1'", false)
	require.NoError(t, err)
	require.True(t, logged)
	require.EqualValues(t, 1, f.Cur)
	require.Equal(t, "person:alice", f.Author)
	require.JSONEq(t, `{"command":"psql --password=[redacted] -c 'select 1'","via":"terminal"}`, string(f.Data))
	_, logged, err = ss.Command(ctx, alice, id, "hunter2", true)
	require.NoError(t, err)
	require.False(t, logged)
	_, _, err = ss.Command(ctx, alice, id, "ls\nrm -rf /", false)
	require.ErrorIs(t, err, sessions.ErrBadCommand)

	enc := stream.Enc{Alg: "mls-1", Kid: "k7", CT: "AAEC"}
	for range 2 {
		r, err := ss.SendPrivate(ctx, alice, id, "p1", enc)
		require.NoError(t, err)
		require.Equal(t, sessions.StateSent, r.State)
	}
	_, err = ss.SendPrivate(ctx, alice, id, "p2", stream.Enc{Alg: "mls-1", CT: "AAEC"})
	var ee *stream.EncError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "kid", ee.Field)
	sub, replay, _, head, _, err := ss.Subscribe(ctx, id, 0)
	require.NoError(t, err)
	sub.Close()
	require.EqualValues(t, 2, head)
	require.JSONEq(t, `{"message":"p1","state":"sent","enc":{"alg":"mls-1","kid":"k7","ct":"AAEC"}}`, string(replay[1].Data))
	p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, p.Entries)
}

// TestGroupFramesReactionsPresenceAndReadMarkers: a reaction and a pin are logged frames of a
// message the log holds (any other is ErrUnknownMessage); presence is ephemeral (cursor 0, not
// logged) and dropped within 3 s of its author's last; a read marker only moves forward and is
// for its person alone.
func TestGroupFramesReactionsPresenceAndReadMarkers(t *testing.T) {
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
	sub, _, _, _, _, err := ss.Subscribe(ctx, id, 3)
	require.NoError(t, err)
	defer sub.Close()

	f, err := ss.React(ctx, alice, id, "m1", "👍", true, false)
	require.NoError(t, err)
	require.EqualValues(t, 4, f.Cur)
	require.JSONEq(t, `{"message":"m1","emoji":"👍","on":true}`, string(f.Data))
	_, err = ss.React(ctx, alice, id, "nope", "👍", true, false)
	require.ErrorIs(t, err, sessions.ErrUnknownMessage)
	_, err = ss.React(ctx, alice, id, "m1", "", true, false)
	require.ErrorIs(t, err, sessions.ErrBadEmoji)
	p, err := ss.React(ctx, alice, id, "a:1", "", true, true)
	require.NoError(t, err)
	require.Equal(t, "session.pin", p.Type)

	sent, err := ss.Presence(ctx, alice, id, "typing", "")
	require.NoError(t, err)
	require.True(t, sent)
	sent, err = ss.Presence(ctx, alice, id, "typing", "")
	require.NoError(t, err)
	require.False(t, sent, "a second presence within 3 s is dropped")
	_, err = ss.Presence(ctx, alice, id, "doing", "")
	require.ErrorIs(t, err, sessions.ErrBadPresence)

	n, err := ss.MarkRead(ctx, alice, id, 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	n, err = ss.MarkRead(ctx, alice, id, 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "a read marker never moves back")
	_, err = ss.MarkRead(ctx, alice, id, 99)
	require.ErrorIs(t, err, sessions.ErrBadMarker)

	var got []string
	bob := loomtype.Identity{Tenant: "t", Actor: "bob"}
	for len(got) < 4 {
		select {
		case it := <-sub.Frames():
			got = append(got, it.Frame.Type+":"+strconv.FormatInt(it.Frame.Cur, 10)+":"+strconv.FormatBool(it.For(bob)))
		case <-time.After(5 * time.Second):
			t.Fatalf("frames so far: %v", got)
		}
	}
	require.Equal(t, []string{"session.reaction:4:true", "session.pin:5:true", "session.presence:0:true", "session.read-marker:0:false"}, got)
	h, _, err := ss.Bounds(ctx, alice, id)
	require.NoError(t, err)
	require.EqualValues(t, 5, h, "ephemeral frames take no cursor")
}

// TestAReactionToTheEmptyMessageIsRefused: a frame without a message (a terminal line) does not
// make the empty message id one the log holds, for a reaction or a pin.
func TestAReactionToTheEmptyMessageIsRefused(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	_, logged, err := ss.Command(ctx, alice, st.ID, "ls", false)
	require.NoError(t, err)
	require.True(t, logged)
	_, err = ss.React(ctx, alice, st.ID, "", "👍", true, false)
	require.ErrorIs(t, err, sessions.ErrUnknownMessage)
	_, err = ss.React(ctx, alice, st.ID, "", "", true, true)
	require.ErrorIs(t, err, sessions.ErrUnknownMessage)
	h, _, err := ss.Bounds(ctx, alice, st.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, h, "nothing but the terminal line is logged")
}

// TestWhoAnswersRoutesMessages: a message that mentions a person, or only another assistant, is
// the chat's (no turn); one that mentions this assistant is a turn, with its mention frame.
func TestWhoAnswersRoutesMessages(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	_, err = ss.Send(ctx, alice, id, "bob, look", "m1", "person:bob")
	require.NoError(t, err)
	_, err = ss.Send(ctx, alice, id, "kb?", "m2", "assistant:kb")
	require.NoError(t, err)
	_, err = ss.Send(ctx, alice, id, "and you?", "m3", "assistant:loom")
	require.NoError(t, err)
	_, err = ss.Send(ctx, alice, id, "x", "m4", "nobody")
	require.ErrorIs(t, err, sessions.ErrBadMentions)
	frames := waitFrames(t, ss, alice, id, 8)
	require.Equal(t, []string{"user-message:sent:m1", "mention", "user-message:sent:m2", "mention",
		"mention", "user-message:sent:m3", "text-delta", "text-done:complete"}, frames)
	p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 10})
	require.NoError(t, err)
	require.Len(t, p.Entries, 2, "only the message to this assistant is a turn")
}

// TestAReplyReachesOnlyWhoWasInTheRoom: in a shared chat, what the assistant put into the room
// before a person joined is drawn hidden for them (same cursors), while a participant from the
// start sees it; a reply made after they joined reaches them.
func TestAReplyReachesOnlyWhoWasInTheRoom(t *testing.T) {
	eng := reftest.Open(t, reftest.Shared(gSvc), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{Mode: conversation.ModeShared, Participants: []loomtype.Identity{gBob}})
	require.NoError(t, err)
	id := st.ID
	_, err = ss.Send(ctx, gAlice, id, "first", "m1")
	require.NoError(t, err)
	waitFrames(t, ss, gAlice, id, 3)
	carol := loomtype.Identity{Tenant: gAlice.Tenant, Actor: "carol"}
	_, err = eng.Conversations().ChangeParticipants(ctx, gAlice, id, "add", carol)
	require.NoError(t, err)
	require.NoError(t, ss.Participant(ctx, gAlice, id, carol, true))
	_, err = ss.Send(ctx, gAlice, id, "second", "m2")
	require.NoError(t, err)
	waitFrames(t, ss, gAlice, id, 7)

	draw := func(who loomtype.Identity) []string {
		v, err := ss.ViewerOf(ctx, who, id)
		require.NoError(t, err)
		sub, replay, _, _, _, err := ss.Subscribe(ctx, id, 0)
		require.NoError(t, err)
		defer sub.Close()
		var out []string
		for _, f := range replay {
			g, err := ss.Render(ctx, id, v, sub.GuardOf(f))
			require.NoError(t, err)
			out = append(out, strconv.FormatInt(g.Cur, 10)+":"+string(g.Kind()))
		}
		return out
	}
	// A turn's live deltas are its asker's alone (frames 2 and 6 are hidden for both when they
	// came live, shown when the reply came whole from its record), so they are left out here.
	pick := func(fs []string) []string { return []string{fs[0], fs[2], fs[3], fs[4], fs[6]} }
	require.Equal(t, []string{"1:user-message", "3:text-done", "4:participant-joined", "5:user-message", "7:text-done"}, pick(draw(gBob)))
	require.Equal(t, []string{"1:user-message", "3:hidden", "4:participant-joined", "5:user-message", "7:text-done"}, pick(draw(carol)))
	require.Equal(t, "2:hidden", draw(carol)[1], "the reply's text, put in before carol joined")
}

// TestEditAndRetryOfOnesOwnMessage: an edit re-asks one's own message under an idempotency key
// (the same key again sends nothing more), a retry re-asks it as it was, and a message of
// someone else's, a missing key or a blank text is refused before anything is sent.
func TestEditAndRetryOfOnesOwnMessage(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss, cv := eng.Sessions(), eng.Conversations()
	st, _, err := cv.Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	_, err = ss.Send(ctx, alice, id, "check pump 4", "m1")
	require.NoError(t, err)
	waitFrames(t, ss, alice, id, 3)
	_, err = ss.Edit(ctx, alice, id, "m1", "check pump 5", "")
	require.ErrorIs(t, err, sessions.ErrNoKey)
	_, err = ss.Edit(ctx, alice, id, "m1", "   ", "e1")
	require.ErrorIs(t, err, sessions.ErrBadText)
	_, err = ss.Edit(ctx, alice, id, "nope", "x", "e1")
	require.ErrorIs(t, err, loomtype.ErrNotFound)
	_, err = ss.Edit(ctx, loomtype.Identity{Tenant: "t", Actor: "alice", OnBehalfOf: "bot"}, id, "m1", "x", "e1")
	require.Error(t, err)
	for range 2 {
		r, err := ss.Edit(ctx, alice, id, "m1", "check pump 5", "e1")
		require.NoError(t, err)
		require.Equal(t, "e1", r.MessageID)
	}
	_, err = ss.Edit(ctx, alice, id, "m1", "", "r1") // a retry: the message as it was
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := cv.History(ctx, alice, id, conversation.HistoryOptions{Limit: 20})
		require.NoError(t, err)
		return len(p.Entries) == 6 && p.Entries[5].Status == loomtype.StatusComplete
	}, 10*time.Second, 10*time.Millisecond)
	p, err := cv.History(ctx, alice, id, conversation.HistoryOptions{Limit: 20})
	require.NoError(t, err)
	var asked []string
	for _, e := range p.Entries {
		if e.Role == loomtype.RoleUser {
			asked = append(asked, e.MessageID+"="+*e.Text+"@"+strconv.FormatInt(e.EditOf, 10))
		}
	}
	require.Equal(t, []string{"m1=check pump 4@0", "e1=check pump 5@1", "r1=check pump 4@1"}, asked)
}
