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
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/agent"
	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/gateway"
	"github.com/loomcheck/loomcheck/reference/hostio"
	transcripts "github.com/loomcheck/loomcheck/reference/internal/transcript"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/run"
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
// Regenerate (only when the shape is meant to change, which breaks every journal already
// written): go test ./reference/ -run TestGoldenJournals -rewrite (the one flag of
// reference/internal/transcript).

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
	// held, if set, is told when a tool call with "hold" in its arguments has begun; that call
	// then waits until it is stopped (the journal is taken at a crash while it waits). Without
	// it such a call answers at once.
	held chan struct{}

	mu         sync.Mutex
	modelCalls int      // every model call
	toolCalls  []string // the arguments of every tool call, in order
}

func (p *goldenProvider) calls() (int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.modelCalls, append([]string(nil), p.toolCalls...)
}

// surveyRounds are the tool calls of a survey turn, one model call each: two calls at once,
// then one, then the answer. A prompt that also says "hold" asks for the third call with "hold"
// in its arguments.
var surveyRounds = [][]model.ToolCall{
	{{ID: "call-n", Name: "lookup", Arguments: `{"q":"north"}`}, {ID: "call-s", Name: "lookup", Arguments: `{"q":"south"}`}},
	{{ID: "call-e", Name: "lookup", Arguments: `{"q":"east"}`}},
}

// survey answers a turn whose prompt says "survey": the calls of surveyRounds, one round per
// model call, then a text that quotes every tool result the request holds.
func survey(req model.Request) (model.Response, bool) {
	user, rounds := -1, 0
	for i, m := range req.Messages {
		if m.Role == model.RoleUser {
			user, rounds = i, 0
		} else if m.Role == model.RoleAssistant && len(m.ToolCalls) > 0 {
			rounds++
		}
	}
	if user < 0 || !strings.Contains(req.Messages[user].Content, "survey") {
		return model.Response{}, false
	}
	if rounds < len(surveyRounds) {
		calls := append([]model.ToolCall(nil), surveyRounds[rounds]...)
		if rounds == 1 && strings.Contains(req.Messages[user].Content, "hold") {
			calls[0].Arguments = `{"q":"east","hold":true}`
		}
		return model.Response{Content: fmt.Sprintf("round %d", rounds+1), ToolCalls: calls}, true
	}
	var seen []string
	for _, m := range req.Messages[user:] {
		if m.Role == model.RoleTool {
			seen = append(seen, m.ToolCallID+"="+m.Content)
		}
	}
	return model.Response{Content: "surveyed: " + strings.Join(seen, "; "), FinishReason: model.FinishStop}, true
}

func (p *goldenProvider) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	p.mu.Lock()
	p.modelCalls++
	p.mu.Unlock()
	if r, ok := survey(req); ok {
		return r, nil
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == model.RoleTool {
		return model.Response{Content: "the tool said " + last.Content, FinishReason: model.FinishStop}, nil
	}
	text := last.Content
	switch {
	case strings.Contains(text, "ask a person"):
		return model.Response{ToolCalls: []model.ToolCall{{ID: "call-h", Name: "ask", Arguments: `{"q":"may I?"}`}}}, nil
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

type goldenTools struct{ p *goldenProvider }

func (g goldenTools) Call(ctx context.Context, name string, args json.RawMessage, _ string) (json.RawMessage, error) {
	if g.p != nil {
		g.p.mu.Lock()
		g.p.toolCalls = append(g.p.toolCalls, string(args))
		g.p.mu.Unlock()
	}
	if name == "ask" { // a human tool: the person's answer comes another way
		return nil, agent.ErrPendingHuman
	}
	if g.p != nil && g.p.held != nil && strings.Contains(string(args), "hold") {
		g.p.held <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
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
	// run drives the dialogue. It returns true when it ended in a crash (the engine was killed,
	// not closed): the journal is what the crash left.
	run func(t *testing.T, ctx context.Context, eng *reference.Engine, p *goldenProvider) (crashed bool)
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
	answer func(t *testing.T, ctx context.Context, eng *reference.Engine)
}

func goldenBase(dir string, p *goldenProvider) reference.Options {
	return reference.Options{
		DataDir: dir,
		Conversation: conversation.Config{
			Keys:  [][]byte{bytes.Repeat([]byte{7}, 32)},
			Tools: []model.Tool{{Name: "lookup", Description: "looks a thing up"}},
		},
		Deps:       conversation.Deps{Provider: p, Tools: goldenTools{p: p}},
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
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, p *goldenProvider) bool {
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
			return false
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
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) bool {
			cv := eng.Conversations()
			st, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "rot-1"})
			require.NoError(t, err)
			for i := 1; i <= 5; i++ {
				send(t, ctx, cv, gAlice, st.ID, fmt.Sprintf("turn %d", i), fmt.Sprintf("m%d", i), 0)
				waitEntries(t, ctx, cv, gAlice, st.ID, 2*i)
			}
			return false
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
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) bool {
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
			return false
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
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) bool {
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
			return false
		},
	},
	{
		// The agent loop inside turns: a turn of three model calls, the first asking for two
		// tools at once and the second for one, then the answer; then a plain turn.
		name:    "agent-rounds",
		options: goldenBase,
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) bool {
			cv := eng.Conversations()
			st, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "rounds-1"})
			require.NoError(t, err)
			send(t, ctx, cv, gAlice, st.ID, "survey the coast", "m1", 0)
			waitEntries(t, ctx, cv, gAlice, st.ID, 2)
			send(t, ctx, cv, gAlice, st.ID, "thanks", "m2", 0)
			waitEntries(t, ctx, cv, gAlice, st.ID, 4)
			return false
		},
	},
	{
		// A crash in the middle of a turn's loop: the first model call's two tools completed,
		// the second call asked for a third tool, and the engine is killed while that tool
		// runs. The journal is what the crash left; an engine opened on it runs the tool again
		// and finishes the turn.
		name:    "agent-crash",
		options: goldenBase,
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, p *goldenProvider) bool {
			cv := eng.Conversations()
			st, _, err := cv.Start(ctx, gAlice, conversation.StartOptions{ID: "crash-1"})
			require.NoError(t, err)
			send(t, ctx, cv, gAlice, st.ID, "hello", "m1", 0)
			waitEntries(t, ctx, cv, gAlice, st.ID, 2)
			send(t, ctx, cv, gAlice, st.ID, "survey the coast and hold", "m2", 0)
			select {
			case <-p.held:
			case <-time.After(20 * time.Second):
				t.Fatal("the held tool call never began")
			}
			eng.Kill()
			return true
		},
		resumed:     map[string]int{"crash-1": 4},
		liveModel:   1,
		liveTools:   []string{`{"q":"east","hold":true}`},
		parallelToo: true,
	},
	{
		// Agent runs: one with parallel tool calls (two at once, then one) that completes, and
		// one that a crash stops while the tool of its second model call runs.
		name:    "agent-runs",
		options: goldenBase,
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, p *goldenProvider) bool {
			v, _, err := eng.Runs().Start(ctx, gAlice, run.Options{ID: "survey-1", Prompt: "survey the coast", Parallel: -1})
			require.NoError(t, err)
			info, err := eng.Kernel().Await(ctx, v.ID)
			require.NoError(t, err)
			require.Equal(t, kernel.StateCompleted, info.State, info.Error)
			_, _, err = eng.Runs().Start(ctx, gAlice, run.Options{ID: "survey-2", Prompt: "survey the coast and hold"})
			require.NoError(t, err)
			select {
			case <-p.held:
			case <-time.After(20 * time.Second):
				t.Fatal("the held tool call never began")
			}
			eng.Kill()
			return true
		},
		// A run's options are in its journal: parallel or not, it replays as it was started.
		liveModel: 1,
		liveTools: []string{`{"q":"east","hold":true}`},
	},
	{
		// A run parked on an approval gate: the model asked for lookup, which needs approval,
		// and the engine is closed while the run waits. The replay reaches the same gate, the
		// gate is approved under the new body, and the run finishes with the tool call and
		// exactly one more model call.
		name:    "agent-parked",
		options: goldenBase,
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, _ *goldenProvider) bool {
			v, _, err := eng.Runs().Start(ctx, gAlice, parkedOptions)
			require.NoError(t, err)
			waitPending(t, ctx, eng, v.ID, "t1-c0")
			return false
		},
		answer: func(t *testing.T, ctx context.Context, eng *reference.Engine) {
			v, created, err := eng.Runs().Start(ctx, gAlice, parkedOptions)
			require.NoError(t, err)
			require.False(t, created)
			waitPending(t, ctx, eng, v.ID, "t1-c0")
			_, err = eng.Runs().Approve(ctx, gAlice, v.ID, "t1-c0", true)
			require.NoError(t, err)
		},
		liveModel: 1,
		liveTools: []string{`{"q":"weather"}`},
	},
	{
		// A run parked on a human tool: the person was asked (the tool server answered 202) and
		// the engine is closed while the run waits for the answer. The replay asks again, with
		// the same call, the answer is given under the new body, and the run finishes with
		// exactly one more model call.
		name:    "agent-human",
		options: humanOptions,
		run: func(t *testing.T, ctx context.Context, eng *reference.Engine, p *goldenProvider) bool {
			v, _, err := eng.Runs().Start(ctx, gAlice, humanRunOptions)
			require.NoError(t, err)
			waitPending(t, ctx, eng, v.ID, "t1-c0")
			require.Eventually(t, func() bool { _, tools := p.calls(); return len(tools) == 1 }, 20*time.Second, 5*time.Millisecond)
			return false
		},
		answer: func(t *testing.T, ctx context.Context, eng *reference.Engine) {
			v, created, err := eng.Runs().Start(ctx, gAlice, humanRunOptions)
			require.NoError(t, err)
			require.False(t, created)
			waitPending(t, ctx, eng, v.ID, "t1-c0")
			_, err = eng.Runs().AnswerHuman(ctx, gAlice, v.ID, "t1-c0", json.RawMessage(`{"answer":"yes"}`))
			require.NoError(t, err)
		},
		liveModel: 1,
		liveTools: []string{`{"q":"may I?"}`},
	},
}

// humanRunOptions start the run of the agent-human dialogue: one call of the human tool "ask".
var humanRunOptions = run.Options{ID: "human-1", Prompt: "ask a person first"}

// humanOptions adds the human tool "ask" to the golden engine's options.
func humanOptions(dir string, p *goldenProvider) reference.Options {
	o := goldenBase(dir, p)
	o.Conversation.Tools = append(append([]model.Tool(nil), o.Conversation.Tools...), model.Tool{Name: "ask", Description: "asks a person"})
	o.HumanTools = []string{"ask"}
	return o
}

// parkedOptions start the run of the agent-parked dialogue: one lookup call, which needs approval.
var parkedOptions = run.Options{ID: "parked-1", Prompt: "lookup the weather", Approval: run.NeedsApprovalRule(true, nil)}

// waitPending waits until run id waits at exactly the gate.
func waitPending(t *testing.T, ctx context.Context, eng *reference.Engine, id, gate string) {
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
	require.NoError(t, os.MkdirAll(goldenDir, 0o755))
	for _, d := range goldenDialogues {
		t.Run(d.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			p := &goldenProvider{slow: make(chan struct{}, 1), held: make(chan struct{}, 1)}
			eng, err := reference.Open(ctx, d.options(dir, p))
			require.NoError(t, err)
			// Every execution is at rest before the journal is read: each shared turn ended,
			// or the engine crashed.
			g := goldenFile{Dialogue: d.name}
			if !d.run(t, ctx, eng, p) {
				require.NoError(t, eng.Close())
			}
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
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var g goldenFile
		require.NoError(t, json.Unmarshal(b, &g))
		d, ok := dialogues[g.Dialogue]
		require.True(t, ok, "%s: unknown dialogue %q", f, g.Dialogue)
		t.Run(filepath.Base(f), func(t *testing.T) { replayGolden(t, g, d, false) })
		if d.parallelToo {
			t.Run(filepath.Base(f)+"/parallel", func(t *testing.T) { replayGolden(t, g, d, true) })
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
	opt := d.options(dir, world)
	opt.Conversation.ParallelTools = parallel
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
