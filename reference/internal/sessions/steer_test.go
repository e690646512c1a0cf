package sessions_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// The tests of package sessions_test run the sessions on a whole engine (reftest) with scripted
// models (scriptmodel): what a stream shows is what the conversation did.

// TestSteeringQueuesWhileTheAssistantWorks: a message sent while a turn runs is queued (and
// shown so), taken back by its sender once (again answers the same), and the next one is picked
// up when the turn ends and then answered; the frames say so in that order.
func TestSteeringQueuesWhileTheAssistantWorks(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	gm := scriptmodel.Gated()
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(gm))
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

	gm.Release() // turn 1 ends; m3 is picked up and runs
	gm.Release() // turn 2 ends
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
	gm := scriptmodel.Gated()
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(gm), reftest.Conversation(func(c *conversation.Config) { c.BargeIn = true }))
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
	gm.Release()
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

// TestQueuedMessageSurvivesACrash: a message queued behind a running turn is neither lost nor
// sent twice when the engine dies: after the restart the turn runs again, and the message is
// picked up when it ends, with nobody reading the stream.
func TestQueuedMessageSurvivesACrash(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	ctx := context.Background()
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Gated()))
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

	gm2 := scriptmodel.Gated()
	eng.Restart(reftest.Provider(gm2))
	gm2.Release() // turn 1, run again
	gm2.Release() // turn 2: the queued message, sent with nobody reading
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

// TestPickedUpMessageSurvivesACrashAtEveryWrite: a waiting message is picked up at the safe
// point (its picked-up frame and the queue commit), then sent to the conversation. Whatever
// durable write of that stretch the engine dies right after (the crash right after the pick-up's
// commit, before the send, among them), the message is sent exactly once after the restart and
// answered: the history holds it once, and the frame log shows it picked up once and sent once.
func TestPickedUpMessageSurvivesACrashAtEveryWrite(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	ctx := context.Background()
	for n := int64(1); ; n++ {
		// The rig keeps its signing key across the restart: a message signed before it verifies
		// after it.
		gm := scriptmodel.Gated()
		eng := reftest.Open(t, reftest.As(alice), reftest.Provider(gm))
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
		gm.Release() // turn 1 ends: m2 is picked up and sent, and turn 2 waits on the model
		reached := stretchCrashed(t, eng.Sessions(), gm, id, crashed)
		eng.Kill()
		if !reached {
			require.Greater(t, n, int64(3), "the stretch from turn 1's end to turn 2 has writes to crash after")
			return
		}

		answering := scriptmodel.Gated()
		answering.ReleaseAll() // answers at once
		eng.Restart(reftest.Provider(answering))
		var entries []loomtype.Entry
		require.Eventually(t, func() bool {
			p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
			require.NoError(t, err)
			entries = p.Entries
			return len(p.Entries) >= 4 && p.Entries[3].Status == loomtype.StatusComplete
		}, 10*time.Second, 10*time.Millisecond, "crash after write %d: turn 2 is answered after the restart", n)
		// The frame log is written after the history: wait on it until m2 is sent there and a
		// reply is done after it.
		require.Eventually(t, func() bool {
			f := kinds(t, eng.Sessions(), alice, id)
			return slices.Contains(f, "user-message:sent:m2") && f[len(f)-1] == "text-done:complete"
		}, 10*time.Second, 10*time.Millisecond, "crash after write %d: the frame log shows turn 2 answered", n)
		frames := kinds(t, eng.Sessions(), alice, id)
		p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
		require.NoError(t, err)
		entries = p.Entries
		require.Len(t, entries, 4, "crash after write %d: two turns, each asked and answered once", n)
		require.Equal(t, "m2", entries[2].MessageID, "crash after write %d", n)
		require.Equal(t, "second", *entries[2].Text, "crash after write %d", n)
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

// stretchCrashed waits until the armed crash point is reached (true) or the stretch from turn 1's
// end to turn 2 waiting on its model is written whole without reaching it (false): turn 2's
// model call waits and its "working" delta, the stretch's last write, is in the frame log.
func stretchCrashed(t *testing.T, ss *sessions.Service, gm *scriptmodel.Model, id string, crashed <-chan struct{}) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-crashed:
			return true
		default:
		}
		if gm.Waited() == 2 {
			// The crash may come between the look above and this read, which then fails.
			if sub, replay, _, _, _, err := ss.Subscribe(context.Background(), id, 0); err == nil {
				sub.Close()
				n := len(replay)
				if n >= 2 && replay[n-1].Kind() == stream.KindTextDelta && replay[n-2].Kind() == stream.KindUserMessage && replay[n-2].Message == "m2" {
					select {
					case <-crashed: // the delta was the crash point
						return true
					default:
						return false
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("neither the crash point nor turn 2's wait on its model within 30 s (model calls waiting: %d)", gm.Waited())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestATurnThatDoesNotResumeIsGivenUp: a turn left open by a kill that has no reply within the
// resume wait after the restart is given up: status {state: failed} after what it streamed by
// then, the turn stopped (its reply recorded interrupted), and nothing of that reply after it.
func TestATurnThatDoesNotResumeIsGivenUp(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	ctx := context.Background()
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Gated()),
		reftest.Conversation(func(c *conversation.Config) { c.BargeIn = true }),
		reftest.With(func(o *reference.Options) { o.Stream = sessions.Config{ResumeWait: 200 * time.Millisecond} }))
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	id := st.ID
	_, err = eng.Sessions().Send(ctx, alice, id, "first", "m1")
	require.NoError(t, err)
	waitFrames(t, eng.Sessions(), alice, id, 2)
	eng.Kill()

	eng.Restart(reftest.Provider(scriptmodel.Gated())) // never answers
	require.Eventually(t, func() bool {
		p, err := eng.Conversations().History(ctx, alice, id, conversation.HistoryOptions{Limit: 50})
		require.NoError(t, err)
		return len(p.Entries) == 2 && p.Entries[1].Status == loomtype.StatusInterrupted
	}, 10*time.Second, 10*time.Millisecond, "the given-up turn is stopped")
	// The run after the restart streams "working" at once, before the wait is over, then waits.
	// The frame log is written apart from the history: wait on it until it holds the frames
	// compared.
	want := []string{"user-message:sent:m1", "text-delta", "status:restarted", "text-delta", "status:failed"}
	require.Equal(t, want, waitFrames(t, eng.Sessions(), alice, id, len(want)))
}
