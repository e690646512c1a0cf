package reference_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// The canonical dialogues of the golden journals (golden_test.go) and the world they run in.

// goldenProvider is a scripted model: a prompt with "lookup" asks for the lookup tool once, a
// prompt with "slow" streams a word and then waits until it is interrupted, anything else is
// answered at once. It stays a model of its own (not reference/internal/scriptmodel): the golden
// journals hold every one of its answers, byte for byte, and the replay counts its calls and the
// tool calls its turns make.
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, p *goldenProvider) bool {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, _ *goldenProvider) bool {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, _ *goldenProvider) bool {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, _ *goldenProvider) bool {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, _ *goldenProvider) bool {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, p *goldenProvider) bool {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, p *goldenProvider) bool {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, _ *goldenProvider) bool {
			v, _, err := eng.Runs().Start(ctx, gAlice, parkedOptions)
			require.NoError(t, err)
			waitPending(t, ctx, eng, v.ID, "t1-c0")
			return false
		},
		answer: func(t *testing.T, ctx context.Context, eng *reftest.Engine) {
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
		run: func(t *testing.T, ctx context.Context, eng *reftest.Engine, p *goldenProvider) bool {
			v, _, err := eng.Runs().Start(ctx, gAlice, humanRunOptions)
			require.NoError(t, err)
			waitPending(t, ctx, eng, v.ID, "t1-c0")
			require.Eventually(t, func() bool { _, tools := p.calls(); return len(tools) == 1 }, 20*time.Second, 5*time.Millisecond)
			return false
		},
		answer: func(t *testing.T, ctx context.Context, eng *reftest.Engine) {
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
