package reference_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/gateway"
	"github.com/loomcheck/loomcheck/reference/hostio"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store"
)

// The golden journals pin the on-disk shape of the engine's journals: every stream the engine
// writes for a set of canonical dialogues (each execution's log in every generation, its inbox,
// its record, a shared conversation's participants), checked in under testdata/golden. The replay
// test loads each one into a fresh store and opens the engine on it with divergence "fail": a
// change that moves a decision id, a step id or the order of the journal fails the replay, naming
// the command index, what the log holds and what the run did.
//
// Regenerate (only when the shape is meant to change, which breaks every journal already
// written): go test ./reference/ -run TestGoldenJournals -update-golden
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden journals under testdata/golden")

const goldenDir = "testdata/golden"

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

// goldenProvider is a scripted model: a prompt with "lookup" asks for the lookup tool once, a
// prompt with "slow" streams a word and then waits until it is interrupted, anything else is
// answered at once.
type goldenProvider struct {
	slow chan struct{} // told when a slow answer has begun
}

func (p *goldenProvider) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return model.Response{Content: "the tool said " + last.Content, FinishReason: model.FinishStop}, nil
	}
	text := last.Content
	switch {
	case strings.Contains(text, "lookup"):
		return model.Response{ToolCalls: []model.ToolCall{{ID: "call-1", Name: "lookup", Arguments: `{"q":"weather"}`}}}, nil
	case strings.Contains(text, "slow"):
		if onDelta != nil {
			onDelta("Thinking")
		}
		if p.slow != nil {
			p.slow <- struct{}{}
		}
		<-ctx.Done()
		return model.Response{Content: "Thinking"}, ctx.Err()
	}
	answer := "Answer to: " + text
	if onDelta != nil {
		onDelta(answer)
	}
	return model.Response{Content: answer, FinishReason: model.FinishStop}, nil
}

type goldenTools struct{}

func (goldenTools) Call(_ context.Context, name string, args json.RawMessage, _ string) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"tool": name, "args": string(args), "answer": "sunny"})
}

type goldenMemory struct {
	mu sync.Mutex
	m  map[string][]hostio.MemoryEntry
}

func (g *goldenMemory) Recall(_ context.Context, scope, _ string) ([]hostio.MemoryEntry, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]hostio.MemoryEntry(nil), g.m[scope]...), nil
}

func (g *goldenMemory) Write(_ context.Context, scope string, entries []hostio.MemoryEntry) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string][]hostio.MemoryEntry{}
	}
	g.m[scope] = append(g.m[scope], entries...)
	return nil
}

type goldenSummarizer struct{}

func (goldenSummarizer) Summarize(_ context.Context, previous string, msgs []hostio.SummaryMessage) (string, error) {
	return fmt.Sprintf("%s[%d messages]", previous, len(msgs)), nil
}

// goldenDialogue is one canonical dialogue: the options of its engine and the run that drives it.
type goldenDialogue struct {
	name    string
	options func(dir string, p *goldenProvider) reference.Options
	run     func(t *testing.T, ctx context.Context, eng *reference.Engine, p *goldenProvider)
}

func goldenBase(dir string, p *goldenProvider) reference.Options {
	return reference.Options{
		DataDir: dir,
		Conversation: conversation.Config{
			Keys:  [][]byte{bytes.Repeat([]byte{7}, 32)},
			Tools: []model.Tool{{Name: "lookup", Description: "looks a thing up"}},
		},
		Deps:       conversation.Deps{Provider: p, Tools: goldenTools{}},
		Gateway:    gateway.Config{Insecure: true},
		Divergence: kernel.DivergenceFail,
	}
}

var goldenDialogues = []goldenDialogue{
	{
		// Owner mode: plain turns, a tool call, a barge-in, a rejected message, an edit.
		name: "owner",
		options: func(dir string, p *goldenProvider) reference.Options {
			o := goldenBase(dir, p)
			o.Conversation.BargeIn = true
			return o
		},
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, p *goldenProvider) {
			cv := eng.Conversations()
			st, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "owner-1"})
			require.NoError(t, err)
			id := st.ID
			send(t, ctx, cv, gAlice, id, "hello", "m1", 0)
			waitEntries(t, ctx, cv, gAlice, id, 2)
			send(t, ctx, cv, gAlice, id, "please lookup the weather", "m2", 0)
			waitEntries(t, ctx, cv, gAlice, id, 4)
			send(t, ctx, cv, gAlice, id, "a slow question", "m3", 0)
			<-p.slow
			send(t, ctx, cv, gAlice, id, "never mind, hi", "m4", 0)
			waitEntries(t, ctx, cv, gAlice, id, 8)
			send(t, ctx, cv, gAlice, id, "   ", "m5", 0)
			waitEntries(t, ctx, cv, gAlice, id, 9)
			send(t, ctx, cv, gAlice, id, "hello again", "m6", 1)
			waitEntries(t, ctx, cv, gAlice, id, 11)
		},
	},
	{
		// A rotation every two turns: the third turn rides the carry into generation 1, the fifth
		// into generation 2.
		name: "rotation",
		options: func(dir string, p *goldenProvider) reference.Options {
			o := goldenBase(dir, p)
			o.Conversation.RotateEveryTurns = 2
			return o
		},
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) {
			cv := eng.Conversations()
			st, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "rot-1"})
			require.NoError(t, err)
			for i := 1; i <= 5; i++ {
				send(t, ctx, cv, gAlice, st.ID, fmt.Sprintf("turn %d", i), fmt.Sprintf("m%d", i), 0)
				waitEntries(t, ctx, cv, gAlice, st.ID, 2*i)
			}
		},
	},
	{
		// Shared mode: two askers, a participant added and one removed, a tool call, a close.
		name: "shared",
		options: func(dir string, p *goldenProvider) reference.Options {
			o := goldenBase(dir, p)
			svc := gSvc
			o.Conversation.Shared = conversation.Shared{Service: &svc}
			o.Conversation.ToolClasses = map[string]string{"lookup": "weather"}
			o.Deps.Cleared = func(_ context.Context, viewer loomtype.Identity, _ []string) bool { return viewer.Equal(gAlice) }
			return o
		},
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) {
			cv := eng.Conversations()
			st, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "shared-1", Mode: conversation.ModeShared, Participants: []loomtype.Identity{gBob}})
			require.NoError(t, err)
			id := st.ID
			send(t, ctx, cv, gAlice, id, "hello all", "a1", 0)
			waitEntries(t, ctx, cv, gAlice, id, 2)
			send(t, ctx, cv, gBob, id, "please lookup the weather", "b1", 0)
			waitEntries(t, ctx, cv, gAlice, id, 4)
			_, err = cv.ChangeParticipants(ctx, gAlice, id, "add", gCarol)
			require.NoError(t, err)
			send(t, ctx, cv, gCarol, id, "hi from carol", "c1", 0)
			waitEntries(t, ctx, cv, gAlice, id, 6)
			_, err = cv.ChangeParticipants(ctx, gAlice, id, "remove", gBob)
			require.NoError(t, err)
			st2, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "shared-2", Mode: conversation.ModeShared, Participants: []loomtype.Identity{gBob}})
			require.NoError(t, err)
			send(t, ctx, cv, gBob, st2.ID, "short one", "b2", 0)
			waitEntries(t, ctx, cv, gAlice, st2.ID, 2)
			_, err = cv.Close(ctx, gAlice, st2.ID, "close-1")
			require.NoError(t, err)
			_, err = eng.Kernel().Await(ctx, st2.ID)
			require.NoError(t, err)
		},
	},
	{
		// What else the dialogue journals: the budget verdict, memory recall and write-back, the
		// rolling summary of evicted turns, and a close.
		name: "features",
		options: func(dir string, p *goldenProvider) reference.Options {
			o := goldenBase(dir, p)
			o.Conversation.MaxWindowTurns = 1
			o.Conversation.Budget = &conversation.Budget{ContextWindow: 100000, ReserveOutputTokens: 100}
			o.Deps.Memory = &goldenMemory{}
			o.Deps.Summarizer = goldenSummarizer{}
			return o
		},
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) {
			cv := eng.Conversations()
			st, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "feat-1"})
			require.NoError(t, err)
			for i := 1; i <= 3; i++ {
				send(t, ctx, cv, gAlice, st.ID, fmt.Sprintf("turn %d", i), fmt.Sprintf("m%d", i), 0)
				waitEntries(t, ctx, cv, gAlice, st.ID, 2*i)
			}
			st2, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "feat-2"})
			require.NoError(t, err)
			send(t, ctx, cv, gAlice, st2.ID, "only turn", "x1", 0)
			waitEntries(t, ctx, cv, gAlice, st2.ID, 2)
			_, err = cv.Close(ctx, gAlice, st2.ID, "close-1")
			require.NoError(t, err)
			_, err = eng.Kernel().Await(ctx, st2.ID)
			require.NoError(t, err)
		},
	},
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
	st, err := store.Open(ctx, path, store.Options{})
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
	if !*updateGolden {
		t.Skip("writes the golden journals; run with -update-golden")
	}
	ctx := context.Background()
	require.NoError(t, os.MkdirAll(goldenDir, 0o755))
	for _, d := range goldenDialogues {
		t.Run(d.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			p := &goldenProvider{slow: make(chan struct{}, 1)}
			eng, err := reference.Open(ctx, d.options(dir, p))
			require.NoError(t, err)
			d.run(t, ctx, eng, p)
			// Every execution is at rest before the journal is read: each shared turn ended.
			g := goldenFile{Dialogue: d.name}
			require.NoError(t, eng.Close())
			g.Executions = dumpJournal(t, ctx, filepath.Join(dir, "loom.db"))
			// What the owners read, from an engine opened on the same journal.
			eng, err = reference.Open(ctx, d.options(dir, &goldenProvider{}))
			require.NoError(t, err)
			for _, ex := range g.Executions {
				var info kernel.Info
				require.NoError(t, json.Unmarshal(ex.Record, &info))
				if info.Flow != conversation.FlowName {
					continue
				}
				owner := conversationOwner(t, ex)
				st, err := eng.Conversations().Status(ctx, owner, info.ID)
				require.NoError(t, err)
				h, err := wholeHistory(ctx, eng.Conversations(), owner, info.ID)
				require.NoError(t, err)
				g.Conversations = append(g.Conversations, goldenConversation{ID: info.ID, Owner: owner, Status: st, History: h})
			}
			require.NoError(t, eng.Close())
			b, err := json.MarshalIndent(g, "", "  ")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(goldenDir, d.name+".json"), append(b, '\n'), 0o644))
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
	dialogues := map[string]goldenDialogue{}
	for _, d := range goldenDialogues {
		dialogues[d.name] = d
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var g goldenFile
			require.NoError(t, json.Unmarshal(b, &g))
			d, ok := dialogues[g.Dialogue]
			require.True(t, ok, "unknown dialogue %q", g.Dialogue)
			dir := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.MkdirAll(dir, 0o700))
			ended := loadGolden(t, ctx, filepath.Join(dir, "loom.db"), g)

			opt := d.options(dir, &goldenProvider{})
			opt.Divergence = kernel.DivergenceFail
			opt.AllowEmpty = true
			eng, err := reference.Open(ctx, opt)
			require.NoError(t, err)
			defer eng.Close()
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
				h, err := wholeHistory(ctx, eng.Conversations(), c.Owner, c.ID)
				require.NoError(t, err)
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
				require.Equal(t, c.History, h[:len(c.History)], "%s: history after the close", c.ID)
				require.Equal(t, loomtype.StatusClosed, h[len(h)-1].Status, c.ID)
			}
		})
	}
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
	st, err := store.Open(ctx, path, store.Options{})
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
					nevs[i] = store.NewEvent{Kind: ev.Kind, Data: ev.Data}
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
