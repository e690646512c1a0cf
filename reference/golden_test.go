package reference_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	transcripts "github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// The golden journals pin the on-disk shape of the engine's journals: every stream the engine
// writes for a set of canonical dialogues (each execution's log in every generation, its inbox,
// its record, a shared conversation's participants), checked in under testdata/golden. The replay
// test loads each one into a fresh store and opens the engine on it with divergence "fail": a
// change that moves a decision id, a step id or the order of the journal fails the replay, naming
// the command index, what the log holds and what the run did.
//
// Regenerate the journals of the newest version (only when its shape is meant to change, which
// breaks every journal of it already written): go test ./reference/ -run TestGoldenJournals
// -rewrite (the one flag of reference/internal/transcript). It writes under goldenV4Dir only.

// goldenDir holds the journals of version 1 (a consumed event and a verdict each a copy of the
// message), written by the engines before version 2; goldenV2Dir those of version 2 (each fact
// stored once in the log and the inbox); goldenV3Dir those of version 3 (a rotation's carry names
// the accepted envelopes of its replay set and its pending message by their inbox positions, and
// its recent keys by their places in the set, instead of copying them); goldenV4Dir those of
// version 4 (the user record of an accepted turn names its inbox entry, by position and digest,
// instead of holding its text, message id and asker again), which -rewrite writes. All replay: a
// journal already written is never rewritten.
const (
	goldenDir   = "testdata/golden"
	goldenV2Dir = "testdata/golden/v2"
	goldenV3Dir = "testdata/golden/v3"
	goldenV4Dir = "testdata/golden/v4"
)

var (
	gAlice = loomtype.Identity{Tenant: "acme", Actor: "alice"}
	gBob   = loomtype.Identity{Tenant: "acme", Actor: "bob"}
	gCarol = loomtype.Identity{Tenant: "acme", Actor: "carol"}
	gSvc   = loomtype.Identity{Tenant: "acme", Actor: "loom-service"}
)

// goldenFile is one dialogue's journal and what was read from it when it was written.
type goldenFile struct {
	Dialogue   string            `json:"dialogue"`
	Executions []goldenExecution `json:"executions"`
	// Conversations are what their owners read: the whole history and the status.
	Conversations []goldenConversation `json:"conversations"`
}

type goldenExecution struct {
	ID string `json:"id"`
	// Record is the execution's stored record (its kernel.Info as JSON).
	Record  json.RawMessage `json:"record"`
	Streams []goldenStream  `json:"streams"`
}

type goldenStream struct {
	Stream string        `json:"stream"`
	Gen    int64         `json:"gen"`
	Events []goldenEvent `json:"events"`
}

type goldenEvent struct {
	Seq  int64           `json:"seq"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data,omitempty"`
}

type goldenConversation struct {
	ID      string            `json:"id"`
	Owner   loomtype.Identity `json:"owner"`
	Status  loomtype.Status   `json:"status"`
	History []loomtype.Entry  `json:"history"`
}

// goldenDialogue is one canonical dialogue: the options of its engine and the run that drives it.
type goldenDialogue struct {
	name    string
	options func(dir string, p *goldenProvider) reference.Options
	// run drives the dialogue. It returns true when it ended in a crash (the engine was killed,
	// not closed): the journal is what the crash left.
	run func(t *testing.T, ctx context.Context, eng *reftest.Engine, p *goldenProvider) (crashed bool)
	// resumed names conversations (by the id they were started with) that a crash left in the
	// middle of a turn, with the number of entries their history holds once the engine opened
	// on the journal has finished it: each is read (when written and when replayed) only then,
	// and the last of those entries (the interrupted turn's reply, written live after the
	// crash) is compared without its time.
	resumed map[string]int
	// liveModel and liveTools are what a replay of the journal asks the world for: every model
	// call, and the arguments of every tool call, in order. Whatever the journal holds is
	// served from it; only the work a crash interrupted runs again.
	liveModel int
	liveTools []string
	// parallelToo replays the journal a second time with parallel tool calls on: a journal
	// written by the serial loop must resume under the parallel one.
	parallelToo bool
	// answer, if set, is run on the replaying engine before the runs the journal left open are
	// awaited: it answers what a parked run waits for.
	answer func(t *testing.T, ctx context.Context, eng *reftest.Engine)
}

// waitPending waits until run id waits at exactly the gate.
func waitPending(t *testing.T, ctx context.Context, eng *reftest.Engine, id, gate string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := eng.Runs().Get(ctx, gAlice, id)
		require.NoError(t, err)
		if v.Status == run.StatusWaiting {
			require.Len(t, v.Pending, 1)
			require.Equal(t, gate, v.Pending[0].ID)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v after 20s, want it waiting at %s", id, v, gate)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// resumedEntries is the entry count to wait for before conversation id (the full id, the chosen
// one and its suffix) is read, or 0.
func (d goldenDialogue) resumedEntries(id string) int {
	chosen, _, _ := strings.Cut(id, ".")
	return d.resumed[chosen]
}

// liveTime gives the entry of a resumed conversation that the replay wrote live (the reply of
// the turn the crash interrupted) the recorded time: its own is the replay's, everything else of
// it must be the recorded one.
func (d goldenDialogue) liveTime(c goldenConversation, h []loomtype.Entry) {
	if n := d.resumedEntries(c.ID); n > 0 && len(h) >= n && len(c.History) >= n {
		h[n-1].Time = c.History[n-1].Time
	}
}

func send(t *testing.T, ctx context.Context, cv *conversation.Conversations, who loomtype.Identity, id, text, msgID string, editOf int64) {
	t.Helper()
	_, err := cv.SendTurn(ctx, who, id, text, conversation.SendOptions{MessageID: msgID, EditOf: editOf})
	require.NoError(t, err)
}

// waitEntries waits until the conversation's history holds at least n entries.
func waitEntries(t *testing.T, ctx context.Context, cv *conversation.Conversations, who loomtype.Identity, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h, err := wholeHistory(ctx, cv, who, id)
		require.NoError(t, err)
		if len(h) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d entries after 20s, want %d: %+v", id, len(h), n, h)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func wholeHistory(ctx context.Context, cv *conversation.Conversations, who loomtype.Identity, id string) ([]loomtype.Entry, error) {
	var out []loomtype.Entry
	cur := ""
	for {
		p, err := cv.History(ctx, who, id, conversation.HistoryOptions{Cursor: cur, Limit: 500})
		if err != nil {
			return nil, err
		}
		out = append(out, p.Entries...)
		if p.Done {
			return out, nil
		}
		cur = p.NextCursor
	}
}

// dumpJournal reads every stream the engine wrote for the executions in the store at path.
func dumpJournal(t *testing.T, ctx context.Context, path string) []goldenExecution {
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	kvs, err := st.MetaPrefix(ctx, "exec/")
	require.NoError(t, err)
	var out []goldenExecution
	for _, kv := range kvs {
		var info kernel.Info
		require.NoError(t, json.Unmarshal(kv.Val, &info))
		ex := goldenExecution{ID: info.ID, Record: kv.Val}
		read := func(stream string, gen int64) {
			evs, err := st.ReadForward(ctx, stream, gen, 0, store.MaxRead)
			require.NoError(t, err)
			require.Less(t, len(evs), store.MaxRead)
			if len(evs) == 0 {
				return
			}
			gs := goldenStream{Stream: stream, Gen: gen}
			for _, ev := range evs {
				require.True(t, len(ev.Data) == 0 || json.Valid(ev.Data), "%s: event %d is not JSON", stream, ev.Seq)
				gs.Events = append(gs.Events, goldenEvent{Seq: ev.Seq, Kind: ev.Kind, Data: ev.Data})
			}
			ex.Streams = append(ex.Streams, gs)
		}
		for g := int64(0); g <= info.Gen; g++ {
			read("x/"+info.ID, g)
		}
		read("in/"+info.ID, 0)
		read("participants/"+info.ID, 0)
		out = append(out, ex)
	}
	return out
}

func TestGoldenJournals(t *testing.T) {
	if !transcripts.Rewrite() {
		t.Skip("writes the golden journals; run with -rewrite")
	}
	ctx := context.Background()
	require.NoError(t, os.MkdirAll(goldenV4Dir, 0o755))
	for _, d := range goldenDialogues {
		t.Run(d.name, func(t *testing.T) {
			p := &goldenProvider{slow: make(chan struct{}, 1), held: make(chan struct{}, 1)}
			eng := reftest.Open(t, reftest.With(func(o *reference.Options) { *o = d.options(o.DataDir, p) }))
			dir := eng.Dir
			// Every execution is at rest before the journal is read: each shared turn ended,
			// or the engine crashed.
			g := goldenFile{Dialogue: d.name}
			if !d.run(t, ctx, eng, p) {
				require.NoError(t, eng.Close())
			}
			g.Executions = dumpJournal(t, ctx, filepath.Join(dir, "loom.db"))
			// What the owners read, from an engine opened on the same journal.
			eng.Restart(reftest.With(func(o *reference.Options) { *o = d.options(o.DataDir, &goldenProvider{}) }))
			for _, ex := range g.Executions {
				var info kernel.Info
				require.NoError(t, json.Unmarshal(ex.Record, &info))
				if info.Flow != conversation.FlowName {
					continue
				}
				owner := conversationOwner(t, ex)
				if n := d.resumedEntries(info.ID); n > 0 {
					waitEntries(t, ctx, eng.Conversations(), owner, info.ID, n)
				}
				st, err := eng.Conversations().Status(ctx, owner, info.ID)
				require.NoError(t, err)
				h, err := wholeHistory(ctx, eng.Conversations(), owner, info.ID)
				require.NoError(t, err)
				g.Conversations = append(g.Conversations, goldenConversation{ID: info.ID, Owner: owner, Status: st, History: h})
			}
			require.NoError(t, eng.Close())
			b, err := json.MarshalIndent(g, "", "  ")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(goldenV4Dir, d.name+".json"), append(b, '\n'), 0o644))
		})
	}
}

// conversationOwner reads the owner stamp of a conversation's start input.
func conversationOwner(t *testing.T, ex goldenExecution) loomtype.Identity {
	for _, s := range ex.Streams {
		if s.Stream == "x/"+ex.ID && s.Gen == 0 {
			var started struct {
				Input struct {
					Owner loomtype.Identity `json:"owner"`
				} `json:"input"`
			}
			require.NoError(t, json.Unmarshal(s.Events[0].Data, &started))
			return started.Input.Owner
		}
	}
	t.Fatalf("%s has no start", ex.ID)
	return loomtype.Identity{}
}

// TestGoldenJournalsReplay loads each golden journal into a fresh store and replays it with
// divergence "fail". An execution that had ended is reopened (its end event dropped, its record
// set open) so that its whole newest generation replays and must end again with the recorded
// output; an open conversation replays up to its inbox, then a close is sent and must be taken up
// live. The history read from the journal must be exactly the recorded one.
func TestGoldenJournalsReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no golden journals under %s", goldenDir)
	var later []string
	for _, dir := range []string{goldenV2Dir, goldenV3Dir, goldenV4Dir} {
		fs, err := filepath.Glob(filepath.Join(dir, "*.json"))
		require.NoError(t, err)
		require.Len(t, fs, len(files), "a journal of each later version beside each of version 1, under %s", dir)
		later = append(later, fs...)
	}
	files = append(files, later...)
	dialogues := map[string]goldenDialogue{}
	for _, d := range goldenDialogues {
		dialogues[d.name] = d
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var g goldenFile
		require.NoError(t, json.Unmarshal(b, &g))
		d, ok := dialogues[g.Dialogue]
		require.True(t, ok, "%s: unknown dialogue %q", f, g.Dialogue)
		name, _ := filepath.Rel(goldenDir, f)
		t.Run(name, func(t *testing.T) { replayGolden(t, g, d, false) })
		if d.parallelToo {
			t.Run(name+"/parallel", func(t *testing.T) { replayGolden(t, g, d, true) })
		}
	}
}

// replayGolden replays one golden journal (see TestGoldenJournalsReplay), with parallel tool
// calls on if parallel.
func replayGolden(t *testing.T, g goldenFile, d goldenDialogue, parallel bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	ended := loadGolden(t, ctx, filepath.Join(dir, "loom.db"), g)

	world := &goldenProvider{}
	eng := reftest.Open(t, reftest.Dir(dir), reftest.With(func(o *reference.Options) {
		*o = d.options(o.DataDir, world)
		o.Conversation.ParallelTools = parallel
		o.Divergence = kernel.DivergenceFail
		o.AllowEmpty = true
	}))
	k := eng.Kernel()
	// Every execution that had ended replays to the same end.
	ids := make([]string, 0, len(ended))
	for id := range ended {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		want := ended[id]
		got, err := k.Await(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, want.State, got.State, "%s: replay ended %s: %s", id, got.State, got.Error)
		require.JSONEq(t, string(orNull(want.Output)), string(orNull(got.Output)), "%s: output", id)
		require.Equal(t, want.Error, got.Error, id)
	}
	// Every conversation reads back exactly as recorded; an open one then takes a close
	// live, after its replay.
	for _, c := range g.Conversations {
		if n := d.resumedEntries(c.ID); n > 0 {
			waitEntries(t, ctx, eng.Conversations(), c.Owner, c.ID, n)
		}
		h, err := wholeHistory(ctx, eng.Conversations(), c.Owner, c.ID)
		require.NoError(t, err)
		d.liveTime(c, h)
		require.Equal(t, c.History, h, "%s: history", c.ID)
		st, err := eng.Conversations().Status(ctx, c.Owner, c.ID)
		require.NoError(t, err)
		require.Equal(t, c.Status, st, "%s: status", c.ID)
		if c.Status.State != "open" {
			continue
		}
		_, err = eng.Conversations().Close(ctx, c.Owner, c.ID, "golden-close")
		require.NoError(t, err)
		info, err := k.Await(ctx, c.ID)
		require.NoError(t, err)
		require.Equal(t, kernel.StateCompleted, info.State, "%s: the replay did not complete: %s", c.ID, info.Error)
		require.JSONEq(t, fmt.Sprintf(`{"turns":%d}`, c.Status.Turns), string(info.Output), c.ID)
		h, err = wholeHistory(ctx, eng.Conversations(), c.Owner, c.ID)
		require.NoError(t, err)
		require.Len(t, h, len(c.History)+1, c.ID)
		d.liveTime(c, h)
		require.Equal(t, c.History, h[:len(c.History)], "%s: history after the close", c.ID)
		require.Equal(t, loomtype.StatusClosed, h[len(h)-1].Status, c.ID)
	}
	// A run the crash left open is finished by the replay, live from where its journal ends
	// (a parked one once it is answered).
	if d.answer != nil {
		d.answer(t, ctx, eng)
	}
	for _, ex := range g.Executions {
		var info kernel.Info
		require.NoError(t, json.Unmarshal(ex.Record, &info))
		if info.Flow != run.FlowName || info.State != kernel.StateOpen {
			continue
		}
		got, err := k.Await(ctx, info.ID)
		require.NoError(t, err)
		require.Equal(t, kernel.StateCompleted, got.State, "%s: %s", info.ID, got.Error)
	}
	models, tools := world.calls()
	require.Equal(t, d.liveModel, models, "model calls made by the replay")
	require.Equal(t, d.liveTools, tools, "tool calls made by the replay")
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// loadGolden writes a golden journal into a new store at path. An execution that had ended is
// reopened: the end event of its newest generation is dropped and its record says open; what it
// ended with is returned by id.
func loadGolden(t *testing.T, ctx context.Context, path string, g goldenFile) map[string]kernel.Info {
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	ended := map[string]kernel.Info{}
	require.NoError(t, st.Update(ctx, func(tx store.Tx) error {
		for _, ex := range g.Executions {
			var info kernel.Info
			if err := json.Unmarshal(ex.Record, &info); err != nil {
				return err
			}
			record := ex.Record
			reopen := info.State != kernel.StateOpen
			if reopen {
				ended[info.ID] = info
				open := info
				open.State, open.Output, open.Error = kernel.StateOpen, nil, ""
				record, _ = json.Marshal(open)
			}
			for _, s := range ex.Streams {
				evs := s.Events
				if reopen && s.Stream == "x/"+ex.ID && s.Gen == info.Gen {
					last := evs[len(evs)-1].Kind
					if last != "completed" && last != "failed" {
						return fmt.Errorf("%s: an ended execution whose log ends with %q", ex.ID, last)
					}
					evs = evs[:len(evs)-1]
				}
				nevs := make([]store.NewEvent, len(evs))
				for i, ev := range evs {
					if ev.Seq != int64(i+1) {
						return fmt.Errorf("%s gen %d: seq %d at %d", s.Stream, s.Gen, ev.Seq, i)
					}
					// The file indents each event's JSON; the engine wrote it compact, and a
					// recorded value is served byte for byte (a tool's output reaches the model
					// as written), so it goes back as it was.
					data := ev.Data
					if len(data) > 0 {
						var buf bytes.Buffer
						if err := json.Compact(&buf, data); err != nil {
							return err
						}
						data = buf.Bytes()
					}
					nevs[i] = store.NewEvent{Kind: ev.Kind, Data: data}
				}
				if _, err := tx.Append(s.Stream, s.Gen, 0, nevs...); err != nil {
					return err
				}
			}
			if err := tx.PutMeta("exec/"+ex.ID, record); err != nil {
				return err
			}
		}
		return nil
	}))
	return ended
}
