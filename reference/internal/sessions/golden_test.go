package sessions_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// streamGolden is a session's frame log as the store keeps it: the rows of its frame stream and
// its metadata values (each under its stored key, less the session id that ends it), exactly as
// written, and what a reader must be served from them.
type streamGolden struct {
	Frames []json.RawMessage `json:"frames"`
	Meta   map[string]string `json:"meta"`
	Served []json.RawMessage `json:"served"`
}

// goldenStreamPath is the current shape: the frames in the execution's auxiliary stream
// "frames", the position and the queue in the kernel record tables sessions.pos and
// sessions.queue.
const goldenStreamPath = "testdata/golden-stream/frames-tables.json"

// goldenStreamMeta is a frame log written while the position and the queue were metadata of
// their own (stream/pos/, stream/queue/); it is never rewritten: the engine moves such records
// into its tables when it opens, and serves the log as it was.
const goldenStreamMeta = "testdata/golden-stream/frames.json"

// The stored keys the current shape keeps the position and the queue under (the session id
// follows), and the prefixes of the earlier layout, which nothing may keep once the engine opened.
var (
	goldenTableKeys  = []string{"tbl/12:sessions.pos/", "tbl/14:sessions.queue/"}
	goldenLegacyKeys = []string{"stream/pos/", "stream/queue/"}
)

// goldenStreamTablesV1 is the current layout with a version 1 position, written before cursors
// were reserved (no reserved, epoch or floor): it is never rewritten, and must still load and
// serve its frames as they were.
const goldenStreamTablesV1 = "testdata/golden-stream/frames-tables-v1.json"

// goldenStreamBeforeHandles is a frame log written before frames carried a reply handle (no rid,
// no ver, no room in the position); it is never rewritten: such a log must still load and serve
// its frames as they were.
const goldenStreamBeforeHandles = "testdata/golden-stream/frames-before-handles.json"

// goldenEngine opens the engine of the golden log with the model gm.
func goldenEngine(t *testing.T, gm *scriptmodel.Model) *reftest.Engine {
	t.Helper()
	return reftest.Open(t, reftest.As(gAlice), reftest.Provider(gm),
		// The golden frames keep the times they were written at: none of them expires here.
		reftest.With(func(o *reference.Options) { o.Stream = sessions.Config{Retain: 100 * 365 * 24 * time.Hour} }))
}

// TestGoldenStreamLog pins the on-disk shape of a session's frame log, its position and its
// steering queue: frames written by an earlier version are served as they were, and a message
// that was queued is still picked up. A rename of a stored member breaks this test, not the logs
// already written. -rewrite (reference/internal/transcript) writes the file from the current code
// (review the diff).
func TestGoldenStreamLog(t *testing.T) {
	const conv = "golden-stream"
	if transcript.Rewrite() {
		writeStreamGolden(t, conv)
	}
	for _, path := range []string{goldenStreamPath, goldenStreamTablesV1, goldenStreamMeta, goldenStreamBeforeHandles} {
		t.Run(filepath.Base(path), func(t *testing.T) { checkStreamGolden(t, conv, path) })
	}
}

// checkStreamGolden loads the golden log at path into a conversation whose first turn was
// running, and expects its frames served as the file says and its queued message sent once.
func checkStreamGolden(t *testing.T, conv, path string) {
	ctx := context.Background()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var g streamGolden
	require.NoError(t, json.Unmarshal(raw, &g))

	// The conversation the rows belong to, as it stood when they were written: its first turn
	// asked and running.
	gm := scriptmodel.Gated()
	eng := goldenEngine(t, gm)
	dir := eng.Dir
	st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{ID: conv})
	require.NoError(t, err)
	id := st.ID
	_, err = eng.Conversations().SendTurn(ctx, gAlice, id, "check the pumps", conversation.SendOptions{MessageID: "m-golden"})
	require.NoError(t, err)
	var asked loomtype.Cursor
	require.Eventually(t, func() bool {
		p, err := eng.Conversations().History(ctx, gAlice, id, conversation.HistoryOptions{Limit: 10})
		require.NoError(t, err)
		if len(p.Entries) != 1 {
			return false
		}
		asked, err = loomtype.ParseCursor(p.Entries[0].Cursor)
		require.NoError(t, err)
		return true
	}, 10*time.Second, 5*time.Millisecond)
	eng.Kill()
	// The stored position's "next" is the last log event the session had read (it reads strictly
	// after it): the frames show every record up to the first turn's question and nothing of its
	// reply. Its cursor is where that event lay in the journal the file was written beside; this
	// conversation's journal (of the current version) may lay its events out differently (version
	// 5 keeps the question in its message's verdict row, and the reply's row follows it), so the
	// position is moved to the question's own row here. One event further would be the reply's
	// row, which the session would then take as read.
	g.Meta = atRecord(t, g.Meta, asked)

	// The rows, as an earlier version wrote them.
	s, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
		evs := make([]store.NewEvent, len(g.Frames))
		for i, f := range g.Frames {
			evs[i] = store.NewEvent{Kind: "frame", Data: f}
		}
		if _, err := tx.Append("frames/"+id, 0, 0, evs...); err != nil {
			return err
		}
		for k, v := range g.Meta {
			if err := tx.PutMeta(k+id, []byte(v)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, s.Close())

	gm.ReleaseAhead(2) // the first turn, run again after the crash, and the queued message's turn
	eng.Restart()
	sub, replay, _, _, _, err := eng.Sessions().Subscribe(ctx, id, 0)
	require.NoError(t, err)
	sub.Close()
	require.GreaterOrEqual(t, len(replay), len(g.Served))
	for i, want := range g.Served {
		got, err := json.Marshal(replay[i])
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(got), "frame %d", i+1)
	}
	// The stored queue held one waiting message: once the first turn ends it is sent, once, as
	// the next turn.
	require.Eventually(t, func() bool {
		p, err := eng.Conversations().History(ctx, gAlice, id, conversation.HistoryOptions{Limit: 10})
		require.NoError(t, err)
		return len(p.Entries) == 4 && p.Entries[2].MessageID == "q-golden" && p.Entries[3].Status == loomtype.StatusComplete
	}, 10*time.Second, 10*time.Millisecond)

	// What the engine keeps now is in the current shape, whatever shape it opened.
	eng.Kill()
	s, err = sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	for _, k := range goldenLegacyKeys {
		kvs, err := s.MetaPrefix(ctx, k)
		require.NoError(t, err)
		require.Empty(t, kvs, "%s: the earlier layout is left behind", k)
	}
	for _, k := range goldenTableKeys {
		_, ok, err := s.Meta(ctx, k+id)
		require.NoError(t, err)
		require.True(t, ok, "%s%s is kept", k, id)
	}
}

// writeStreamGolden makes the golden file with the current code: a conversation with a
// streamed turn, a queued message behind it and a terminal line, its rows read back raw.
func writeStreamGolden(t *testing.T, conv string) {
	ctx := context.Background()
	eng := goldenEngine(t, scriptmodel.Gated())
	dir := eng.Dir
	st, _, err := eng.Conversations().Start(ctx, gAlice, conversation.StartOptions{ID: conv})
	require.NoError(t, err)
	id := st.ID
	ss := eng.Sessions()
	_, err = ss.Send(ctx, gAlice, id, "check the pumps", "m-golden")
	require.NoError(t, err)
	waitFrames(t, ss, gAlice, id, 2)
	_, err = ss.Send(ctx, gAlice, id, "and the valves", "q-golden")
	require.NoError(t, err)
	_, _, err = ss.Command(ctx, gAlice, id, "make test TOKEN=abc", false)
	require.NoError(t, err)
	frames := waitFrames(t, ss, gAlice, id, 4)
	require.Equal(t, []string{"user-message:sent:m-golden", "text-delta", "user-message:queued:q-golden", "term-command"}, frames)
	sub, replay, _, _, _, err := ss.Subscribe(ctx, id, 0)
	require.NoError(t, err)
	sub.Close()
	eng.Kill() // the turn never ends: the queue keeps its message

	s, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer s.Close()
	rows, err := s.ReadForward(ctx, "frames/"+id, 0, 0, 100)
	require.NoError(t, err)
	var g streamGolden
	for _, r := range rows {
		g.Frames = append(g.Frames, json.RawMessage(r.Data))
	}
	g.Meta = map[string]string{}
	for _, k := range goldenTableKeys {
		v, ok, err := s.Meta(ctx, k+id)
		require.NoError(t, err)
		require.True(t, ok, k)
		g.Meta[k] = string(v)
	}
	for _, f := range replay {
		b, _ := json.Marshal(f)
		g.Served = append(g.Served, b)
	}
	out, err := json.MarshalIndent(g, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(goldenStreamPath, append(out, '\n'), 0o644))
}

// atRecord is meta with the next cursor of its stored position (the one member "next" of the
// position row, whatever its key) set to next; the other members are kept as written.
func atRecord(t *testing.T, meta map[string]string, next loomtype.Cursor) map[string]string {
	t.Helper()
	out := make(map[string]string, len(meta))
	for k, v := range meta {
		var pos map[string]json.RawMessage
		if json.Unmarshal([]byte(v), &pos) == nil && pos["next"] != nil {
			c, err := json.Marshal(next.String())
			require.NoError(t, err)
			pos["next"] = c
			b, err := json.Marshal(pos)
			require.NoError(t, err)
			v = string(b)
		}
		out[k] = v
	}
	return out
}
