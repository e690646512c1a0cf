package reference_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
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
	eng := openAs(t, alice, t.TempDir()+"/d", conversation.Config{Keys: [][]byte{signingKey()}}, conversation.Deps{Provider: gm}, false)
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
	frames := waitFrames(t, ss, alice, id, 10)
	require.Equal(t, []string{
		"user-message:sent:m1", "text-delta", "user-message:queued:m2", "user-message:queued:m3",
		"user-message:cancelled:m2", "text-done:complete", "user-message:picked-up:m3", "user-message:sent:m3",
		"text-delta", "text-done:complete",
	}, frames)
	_, err = ss.Cancel(ctx, alice, id, "m3")
	require.ErrorIs(t, err, sessions.ErrPickedUp)
}

// TestStopLogsStoppingBeforeTheTurnEnds: a stop is logged as status {stopping: true} before the
// interrupted reply, and a queued message survives the stop and is picked up after it; an idle
// session refuses a stop with ErrIdle.
func TestStopLogsStoppingBeforeTheTurnEnds(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	gm := gatedModel{release: make(chan struct{})}
	eng := openAs(t, alice, t.TempDir()+"/d", conversation.Config{Keys: [][]byte{signingKey()}, BargeIn: true}, conversation.Deps{Provider: gm}, false)
	defer eng.Close()
	ctx := context.Background()
	cv, ss := eng.Conversations(), eng.Sessions()
	st, _, err := cv.Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	_, err = ss.Stop(ctx, alice, id)
	require.ErrorIs(t, err, sessions.ErrIdle)
	_, err = ss.Send(ctx, alice, id, "first", "m1")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		h, _, _ := ss.Bounds(ctx, alice, id)
		return h >= 2
	}, 5*time.Second, 5*time.Millisecond)
	q, err := ss.Send(ctx, alice, id, "second", "m2")
	require.NoError(t, err)
	require.Equal(t, sessions.StateQueued, q.State)
	turn, err := ss.Stop(ctx, alice, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, turn)
	// The stop interrupts turn 1 on its own; only then is the picked-up turn let answer.
	require.Eventually(t, func() bool { return len(kinds(t, ss, alice, id)) >= 5 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, "text-done:interrupted", kinds(t, ss, alice, id)[4])
	gm.release <- struct{}{}
	frames := waitFrames(t, ss, alice, id, 9)
	require.Equal(t, []string{
		"user-message:sent:m1", "text-delta", "user-message:queued:m2", "status:stopping",
		"text-done:interrupted", "user-message:picked-up:m2", "user-message:sent:m2", "text-delta", "text-done:complete",
	}, frames)
}

func kinds(t *testing.T, ss *sessions.Service, who loomtype.Identity, id string) []string {
	sub, replay, _, _, _, err := ss.Subscribe(context.Background(), id, 0)
	require.NoError(t, err)
	sub.Close()
	var out []string
	for _, f := range replay {
		var d map[string]any
		_ = json.Unmarshal(f.Data, &d)
		s := string(f.Kind())
		switch {
		case d["stopping"] == true:
			s += ":stopping"
		case d["state"] != nil:
			s += ":" + d["state"].(string)
		case d["status"] != nil:
			s += ":" + d["status"].(string)
		}
		if f.Kind() == stream.KindUserMessage {
			s += ":" + f.Message
		}
		out = append(out, s)
	}
	return out
}

// TestQueuedMessageSurvivesACrash: a message queued behind a running turn is neither lost nor
// sent twice when the engine dies: after the restart the turn runs again, and the message is
// picked up when it ends, with nobody reading the stream.
func TestQueuedMessageSurvivesACrash(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	dir := t.TempDir() + "/d"
	open := func(gm gatedModel) *reference.Engine {
		return openAs(t, alice, dir, conversation.Config{Keys: [][]byte{signingKey()}}, conversation.Deps{Provider: gm}, true)
	}
	ctx := context.Background()
	gm := gatedModel{release: make(chan struct{})}
	eng := open(gm)
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	_, err = eng.Sessions().Send(ctx, alice, id, "first", "m1")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		h, _, _ := eng.Sessions().Bounds(ctx, alice, id)
		return h >= 2
	}, 5*time.Second, 5*time.Millisecond)
	q, err := eng.Sessions().Send(ctx, alice, id, "second", "m2")
	require.NoError(t, err)
	require.Equal(t, sessions.StateQueued, q.State)
	eng.Kill()

	gm2 := gatedModel{release: make(chan struct{})}
	eng = open(gm2)
	defer eng.Close()
	gm2.release <- struct{}{} // turn 1, run again
	gm2.release <- struct{}{} // turn 2: the queued message, sent with nobody reading
	require.Eventually(t, func() bool {
		p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
		require.NoError(t, err)
		return len(p.Entries) == 4 && p.Entries[3].Status == loomtype.StatusComplete
	}, 10*time.Second, 10*time.Millisecond)
	p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
	require.NoError(t, err)
	require.Equal(t, "second", *p.Entries[2].Text)
	require.Equal(t, "m2", p.Entries[2].MessageID)
	// The frame log is written by its own pump, after the history: wait on the log itself until
	// it holds as many frames as are asserted.
	want := []string{
		"user-message:sent:m1", "text-delta", "user-message:queued:m2", "status:restarted", "text-delta",
		"text-done:complete", "user-message:picked-up:m2", "user-message:sent:m2", "text-delta", "text-done:complete",
	}
	require.Equal(t, want, waitFrames(t, eng.Sessions(), alice, id, len(want)))
}

// toolModel calls the tool "diff" once, then answers.
type toolModel struct{}

func (toolModel) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	if req.Messages[len(req.Messages)-1].Role != "tool" {
		return model.Response{ToolCalls: []model.ToolCall{{ID: "call-1", Name: "diff", Arguments: `{}`}}, FinishReason: model.FinishToolCalls}, nil
	}
	return model.Response{Content: "patched", FinishReason: model.FinishStop}, nil
}

type diffTool struct{}

func (diffTool) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	return json.RawMessage(`{"block":{"kind":"diff","path":"a.go","patch":"@@ -1 +1 @@\n-a\n+b"}}`), nil
}

// TestToolCallsAreFramesWithTypedBlocks: a live turn's tool call is a tool-started frame and a
// tool-finished frame carrying the typed block the tool gave, between the user's message and
// the reply.
func TestToolCallsAreFramesWithTypedBlocks(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := openAs(t, alice, t.TempDir()+"/d", conversation.Config{Keys: [][]byte{signingKey()}, Tools: []model.Tool{{Name: "diff"}}}, conversation.Deps{Provider: toolModel{}, Tools: diffTool{}}, false)
	defer eng.Close()
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
	eng := openAs(t, alice, t.TempDir()+"/d", conversation.Config{Keys: [][]byte{signingKey()}}, conversation.Deps{Provider: echoModel{}}, false)
	defer eng.Close()
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

// waitFrames waits until session id's log holds n frames and returns them as kinds does; it
// fails with what the log holds when that does not happen in time.
func waitFrames(t *testing.T, ss *sessions.Service, who loomtype.Identity, id string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		frames := kinds(t, ss, who, id)
		if len(frames) == n {
			return frames
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d frames, have %d: %v", n, len(frames), frames)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGroupFramesReactionsPresenceAndReadMarkers: a reaction and a pin are logged frames of a
// message the log holds (any other is ErrUnknownMessage); presence is ephemeral (cursor 0, not
// logged) and dropped within 3 s of its author's last; a read marker only moves forward and is
// for its person alone.
func TestGroupFramesReactionsPresenceAndReadMarkers(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := openAs(t, alice, t.TempDir()+"/d", conversation.Config{Keys: [][]byte{signingKey()}}, conversation.Deps{Provider: echoModel{}}, false)
	defer eng.Close()
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

// TestWhoAnswersRoutesMessages: a message that mentions a person, or only another assistant, is
// the chat's (no turn); one that mentions this assistant is a turn, with its mention frame.
func TestWhoAnswersRoutesMessages(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := openAs(t, alice, t.TempDir()+"/d", conversation.Config{Keys: [][]byte{signingKey()}}, conversation.Deps{Provider: echoModel{}}, false)
	defer eng.Close()
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
	svc := gSvc
	eng, err := reference.Open(context.Background(), reference.Options{
		DataDir:      t.TempDir() + "/d",
		Conversation: conversation.Config{Keys: [][]byte{signingKey()}, Shared: conversation.Shared{Service: &svc}},
		Deps:         conversation.Deps{Provider: echoModel{}},
		Gateway:      gateway.Config{Insecure: true},
	})
	require.NoError(t, err)
	defer eng.Close()
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
	eng := openAs(t, alice, t.TempDir()+"/d", conversation.Config{Keys: [][]byte{signingKey()}}, conversation.Deps{Provider: echoModel{}}, false)
	defer eng.Close()
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

// openAs opens an engine on dir whose gateway takes every request as who, with the
// conversation configuration conf and the dependencies deps (allowEmpty as in
// reference.Options). The caller closes it.
func openAs(t *testing.T, who loomtype.Identity, dir string, conf conversation.Config, deps conversation.Deps, allowEmpty bool) *reference.Engine {
	t.Helper()
	eng, err := reference.Open(context.Background(), reference.Options{
		DataDir:      dir,
		Conversation: conf,
		Deps:         deps,
		Gateway:      gateway.Config{Authenticate: func(*http.Request) (loomtype.Identity, error) { return who, nil }},
		AllowEmpty:   allowEmpty,
	})
	require.NoError(t, err)
	return eng
}

// TestPickedUpMessageSurvivesACrashAtEveryWrite: a waiting message is picked up at the safe
// point (its picked-up frame and the queue commit), then sent to the conversation. Whatever
// durable write of that stretch the engine dies right after (the crash right after the pick-up's
// commit, before the send, among them), the message is sent exactly once after the restart and
// answered: the history holds it once, and the frame log shows it picked up once and sent once.
func TestPickedUpMessageSurvivesACrashAtEveryWrite(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	ctx := context.Background()
	key := signingKey() // one key across the restart: a message signed before it verifies after it
	for n := int64(1); ; n++ {
		dir := t.TempDir() + "/d"
		open := func(gm gatedModel) *reference.Engine {
			eng := openAs(t, alice, dir, conversation.Config{Keys: [][]byte{key}}, conversation.Deps{Provider: gm}, true)
			return eng
		}
		gm := gatedModel{release: make(chan struct{})}
		eng := open(gm)
		st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
		require.NoError(t, err)
		id := st.ID
		_, err = eng.Sessions().Send(ctx, alice, id, "first", "m1")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			h, _, _ := eng.Sessions().Bounds(ctx, alice, id)
			return h >= 2
		}, 5*time.Second, 5*time.Millisecond)
		q, err := eng.Sessions().Send(ctx, alice, id, "second", "m2")
		require.NoError(t, err)
		require.Equal(t, sessions.StateQueued, q.State)

		crashed := eng.CrashAfterWrite(n)
		gm.release <- struct{}{} // turn 1 ends: m2 is picked up and sent, and turn 2 waits on the model
		reached := true
		select {
		case <-crashed:
		case <-time.After(2 * time.Second):
			reached = false // every write up to turn 2 waiting on its model has been crashed after
		}
		eng.Kill()
		if !reached {
			require.Greater(t, n, int64(3), "the stretch from turn 1's end to turn 2 has writes to crash after")
			return
		}

		answering := gatedModel{release: make(chan struct{})}
		close(answering.release) // answers at once
		eng = open(answering)
		var entries []loomtype.Entry
		require.Eventually(t, func() bool {
			p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
			require.NoError(t, err)
			entries = p.Entries
			return len(p.Entries) >= 4 && p.Entries[3].Status == loomtype.StatusComplete
		}, 10*time.Second, 10*time.Millisecond, "crash after write %d: turn 2 is answered after the restart", n)
		time.Sleep(100 * time.Millisecond) // a second send would be a fifth entry by now
		p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
		require.NoError(t, err)
		entries = p.Entries
		require.Len(t, entries, 4, "crash after write %d: two turns, each asked and answered once", n)
		require.Equal(t, "m2", entries[2].MessageID, "crash after write %d", n)
		require.Equal(t, "second", *entries[2].Text, "crash after write %d", n)
		frames := kinds(t, eng.Sessions(), alice, id)
		picked, sent := 0, 0
		for _, f := range frames {
			switch f {
			case "user-message:picked-up:m2":
				picked++
			case "user-message:sent:m2":
				sent++
			}
		}
		require.Equal(t, 1, picked, "crash after write %d: %v", n, frames)
		require.Equal(t, 1, sent, "crash after write %d: %v", n, frames)
		require.Equal(t, "text-done:complete", frames[len(frames)-1], "crash after write %d: %v", n, frames)
		eng.Close()
	}
}

// TestATurnThatDoesNotResumeIsGivenUp: a turn left open by a kill that has no reply within the
// resume wait after the restart is given up: status {state: failed} after what it streamed by
// then, the turn stopped (its reply recorded interrupted), and nothing of that reply after it.
func TestATurnThatDoesNotResumeIsGivenUp(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	dir := t.TempDir() + "/d"
	key := signingKey()
	open := func(gm gatedModel) *reference.Engine {
		eng, err := reference.Open(context.Background(), reference.Options{
			DataDir:      dir,
			Conversation: conversation.Config{Keys: [][]byte{key}, BargeIn: true},
			Deps:         conversation.Deps{Provider: gm},
			Gateway:      gateway.Config{Authenticate: func(*http.Request) (loomtype.Identity, error) { return alice, nil }},
			Stream:       sessions.Config{ResumeWait: 200 * time.Millisecond},
			AllowEmpty:   true,
		})
		require.NoError(t, err)
		return eng
	}
	ctx := context.Background()
	eng := open(gatedModel{release: make(chan struct{})})
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	_, err = eng.Sessions().Send(ctx, alice, id, "first", "m1")
	require.NoError(t, err)
	waitFrames(t, eng.Sessions(), alice, id, 2)
	eng.Kill()

	eng = open(gatedModel{release: make(chan struct{})}) // never answers
	defer eng.Close()
	require.Eventually(t, func() bool {
		p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
		require.NoError(t, err)
		return len(p.Entries) == 2 && p.Entries[1].Status == loomtype.StatusInterrupted
	}, 10*time.Second, 10*time.Millisecond, "the given-up turn is stopped")
	time.Sleep(100 * time.Millisecond) // a shown reply would be logged by now
	// The run after the restart streams "working" at once, before the wait is over, then waits.
	require.Equal(t, []string{"user-message:sent:m1", "text-delta", "status:restarted", "text-delta", "status:failed"},
		kinds(t, eng.Sessions(), alice, id))
}
