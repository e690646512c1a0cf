package agent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var alice = loomtype.Identity{Tenant: "acme", Actor: "alice"}

// rig runs one flow that runs the loop with cfg on a single user message, on a kernel over a store
// in a temporary directory that can be crashed and reopened.
type rig struct {
	t    *testing.T
	path string
	st   *sqlite.SQLite
	k    *kernel.Kernel
	cfg  func() agent.Config
	errs chan error // what each run of the loop returned as its error, nil included
	// in is the messages the flow runs the loop on (nil: one user message, "hi").
	in []model.Message
}

func newRig(t *testing.T, cfg func() agent.Config) *rig {
	r := &rig{t: t, path: filepath.Join(t.TempDir(), "loom.db"), cfg: cfg, errs: make(chan error, 16)}
	r.open()
	t.Cleanup(func() { r.k.Close(); r.st.Close() })
	return r
}

func (r *rig) open() {
	st, err := sqlite.Open(context.Background(), r.path, sqlite.Options{})
	require.NoError(r.t, err)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		in := r.in
		if in == nil {
			in = []model.Message{{Role: model.RoleUser, Content: "hi"}}
		}
		res, err := agent.Run(c, r.cfg(), in)
		r.errs <- err
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	}
	k, err := kernel.Open(context.Background(), st, kernel.Options{Flows: map[string]kernel.Flow{"loop": flow}})
	require.NoError(r.t, err)
	r.st, r.k = st, k
}

func (r *rig) start() {
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "loop", Principal: alice})
	require.NoError(r.t, err)
}

func (r *rig) result() agent.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.k.Await(ctx, "x")
	require.NoError(r.t, err)
	require.Equal(r.t, kernel.StateCompleted, info.State, info.Error)
	var res agent.Result
	require.NoError(r.t, json.Unmarshal(info.Output, &res))
	return res
}

// decisions lists the ids of the decisions and steps the run recorded, in order.
func (r *rig) decisions() []string {
	evs, err := r.k.ReadLog(context.Background(), "x", 0, 0, 0)
	require.NoError(r.t, err)
	var out []string
	for _, e := range evs {
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(e.Data, &m)
		if m.ID != "" {
			out = append(out, e.Kind+" "+m.ID)
		}
	}
	return out
}

type echoTool struct{ calls atomic.Int64 }

func (e *echoTool) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	e.calls.Add(1)
	return args, nil
}

// A model that asks for a tool on every response runs out of iterations: the default bound is 8
// model calls, numbered from 1, and the run fails with turn-failed.
func TestLoopStopsAfterTheDefaultIterations(t *testing.T) {
	p := scriptmodel.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{ToolCalls: []model.ToolCall{{ID: "c", Name: "echo", Arguments: `{"n":1}`}}}, nil
	})
	tool := &echoTool{}
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: tool, Tools: []model.Tool{{Name: "echo"}}}
	})
	r.start()
	res := r.result()
	require.Equal(t, agent.Failed, res.Status)
	require.Equal(t, loomtype.ReasonTurnFailed, res.Reason)
	require.True(t, strings.HasPrefix(res.ErrorID, "err_"), res.ErrorID)
	require.EqualValues(t, 8, p.Calls(), "model calls")
	require.EqualValues(t, 8, tool.calls.Load(), "tool calls")
	var want []string
	for i := 1; i <= 8; i++ {
		want = append(want, "decision L#turn:"+string(rune('0'+i))+":response", "step.started L#turn:"+string(rune('0'+i))+":tool:0")
	}
	got := r.decisions()
	var gotIDs []string
	for _, d := range got {
		if strings.HasPrefix(d, "decision ") || strings.HasPrefix(d, "step.started ") {
			gotIDs = append(gotIDs, d)
		}
	}
	require.Equal(t, want, gotIDs)
}

// A configured bound is kept exactly: N model calls, not N+1.
func TestLoopStopsAfterTheConfiguredIterations(t *testing.T) {
	p := scriptmodel.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{ToolCalls: []model.ToolCall{{ID: "c", Name: "echo", Arguments: `{}`}}}, nil
	})
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: &echoTool{}, Tools: []model.Tool{{Name: "echo"}}, MaxIterations: 2}
	})
	r.start()
	res := r.result()
	require.Equal(t, agent.Failed, res.Status)
	require.EqualValues(t, 2, p.Calls())
}

// When the process goes away during a model call, nothing is recorded for it: after a restart the
// model is called again and its answer is the one recorded, not a failure.
func TestModelCallCutByShutdownIsNotRecorded(t *testing.T) {
	entered := make(chan struct{}, 4)
	var live atomic.Bool
	p := scriptmodel.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
		if live.Load() {
			return model.Response{Content: "hello"}, nil
		}
		entered <- struct{}{}
		<-ctx.Done()
		return model.Response{}, ctx.Err()
	})
	var reported atomic.Int64
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, OnError: func(string, error) { reported.Add(1) }}
	})
	r.start()
	<-entered
	r.k.Close() // the kernel stops; the store is still open, so a record would land
	require.Empty(t, r.decisions(), "no decision was recorded for the cut call")
	live.Store(true)
	r.st.Close()
	r.open()
	res := r.result()
	require.Equal(t, agent.Result{Status: agent.Complete, Text: "hello", Iterations: 1}, res)
	require.EqualValues(t, 2, p.Calls())
	require.Equal(t, []string{"decision L#turn:1:response"}, r.decisions())
	require.Zero(t, reported.Load(), "a call cut by the shutdown is no model failure: the error hook hears nothing")
}

// toolbox records every call and answers by tool name.
type toolbox struct {
	mu    sync.Mutex
	calls []string
	fn    func(name string, args json.RawMessage) (json.RawMessage, error)
}

func (b *toolbox) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	b.mu.Lock()
	b.calls = append(b.calls, name+" "+string(args))
	b.mu.Unlock()
	return b.fn(name, args)
}

// What the model is sent back for each tool call: the tool's output as it is, "{}" passed for
// empty arguments, null for an empty or malformed output, and an error for a tool the run does
// not offer (which is never called).
func TestToolOutcomesFedBackToTheModel(t *testing.T) {
	calls := []model.ToolCall{
		{ID: "1", Name: "echo", Arguments: `{"a":1}`},
		{ID: "2", Name: "echo", Arguments: ""},
		{ID: "3", Name: "nope", Arguments: `{}`},
		{ID: "4", Name: "bad", Arguments: `{}`},
		{ID: "5", Name: "empty", Arguments: `{}`},
	}
	p := scriptmodel.Sequence(model.Response{Content: "looking", ToolCalls: calls}, model.Response{Content: "done"})
	box := &toolbox{fn: func(name string, args json.RawMessage) (json.RawMessage, error) {
		switch name {
		case "bad":
			return json.RawMessage("not json"), nil
		case "empty":
			return nil, nil
		}
		return args, nil
	}}
	tools := []model.Tool{{Name: "echo"}, {Name: "bad"}, {Name: "empty"}}
	r := newRig(t, func() agent.Config { return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: tools} })
	r.start()
	res := r.result()
	require.Equal(t, agent.Result{Status: agent.Complete, Text: "done", Tools: []string{"echo", "echo", "nope", "bad", "empty"},
		Calls: []agent.Call{
			{Name: "echo", Arguments: raw(`{"a":1}`), OK: true, Output: raw(`{"a":1}`)},
			{Name: "echo", Arguments: raw(`{}`), OK: true, Output: raw(`{}`)},
			{Name: "nope", Arguments: raw(`{}`), Error: "unknown tool: nope"},
			{Name: "bad", Arguments: raw(`{}`), OK: true, Output: raw(`null`)},
			{Name: "empty", Arguments: raw(`{}`), OK: true, Output: raw(`null`)},
		}, Iterations: 2}, res)
	require.Equal(t, []string{`echo {"a":1}`, `echo {}`, `bad {}`, `empty {}`}, box.calls, "the unknown tool is never called")
	require.Len(t, p.Requests(), 2)
	require.Equal(t, []model.Message{
		{Role: model.RoleUser, Content: "hi"},
		{Role: model.RoleAssistant, Content: "looking", ToolCalls: calls},
		{Role: model.RoleTool, ToolCallID: "1", Content: `{"a":1}`},
		{Role: model.RoleTool, ToolCallID: "2", Content: `{}`},
		{Role: model.RoleTool, ToolCallID: "3", Content: `{"error":"unknown tool: nope"}`},
		{Role: model.RoleTool, ToolCallID: "4", Content: `null`},
		{Role: model.RoleTool, ToolCallID: "5", Content: `null`},
	}, p.Requests()[1].Messages)
}

// The loop appends the model's answers and the tool outcomes to messages of its own: a caller's
// slice with room to spare is not written, neither its elements nor the room after them, and the
// second model call still sees the whole conversation.
func TestRunLeavesTheCallersMessagesAlone(t *testing.T) {
	hi := model.Message{Role: model.RoleUser, Content: "hi"}
	spare := model.Message{Role: "spare", Content: "untouched"}
	backing := []model.Message{hi, spare, spare, spare}
	calls := []model.ToolCall{{ID: "1", Name: "echo", Arguments: `{"a":1}`}}
	p := scriptmodel.Sequence(model.Response{Content: "looking", ToolCalls: calls}, model.Response{Content: "done"})
	box := &toolbox{fn: func(name string, args json.RawMessage) (json.RawMessage, error) { return args, nil }}
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "echo"}}}
	})
	r.in = backing[:1]
	r.start()
	require.Equal(t, agent.Complete, r.result().Status)
	require.Equal(t, []model.Message{hi, spare, spare, spare}, backing)
	require.Len(t, p.Requests(), 2)
	require.Equal(t, []model.Message{hi, {Role: model.RoleAssistant, Content: "looking", ToolCalls: calls},
		{Role: model.RoleTool, ToolCallID: "1", Content: `{"a":1}`}}, p.Requests()[1].Messages)
}

// Sequential and parallel tool calls differ in what they record and in what a denial stops: one
// at a time, each call has its own abort checkpoint and a denial stops the calls after it; in
// parallel (two calls or more), one checkpoint covers them all and all of them run.
func TestSequentialAndParallelToolCalls(t *testing.T) {
	two := []model.ToolCall{{ID: "1", Name: "a", Arguments: `{}`}, {ID: "2", Name: "b", Arguments: `{}`}}
	one := []model.ToolCall{{ID: "1", Name: "a", Arguments: `{}`}}
	tools := []model.Tool{{Name: "a"}, {Name: "b"}}
	for _, c := range []struct {
		name      string
		parallel  bool
		calls     []model.ToolCall
		deny      string
		wantCalls []string
		wantIDs   []string
		wantRes   agent.Result
	}{
		{"sequential", false, two, "", []string{"a {}", "b {}"},
			[]string{"L#abort:turn:1", "L#turn:1:response", "L#abort:tool:1:0", "L#turn:1:tool:0", "L#abort:tool:1:1", "L#turn:1:tool:1", "L#abort:turn:2", "L#turn:2:response"},
			agent.Result{Status: agent.Complete, Text: "done", Tools: []string{"a", "b"}, Calls: []agent.Call{{Name: "a", Arguments: raw(`{}`), OK: true, Output: raw(`{}`)}, {Name: "b", Arguments: raw(`{}`), OK: true, Output: raw(`{}`)}}, Iterations: 2}},
		{"parallel", true, two, "", []string{"a {}", "b {}"},
			[]string{"L#abort:turn:1", "L#turn:1:response", "L#abort:tools:1", "L#turn:1:tool:0", "L#turn:1:tool:1", "L#abort:turn:2", "L#turn:2:response"},
			agent.Result{Status: agent.Complete, Text: "done", Tools: []string{"a", "b"}, Calls: []agent.Call{{Name: "a", Arguments: raw(`{}`), OK: true, Output: raw(`{}`)}, {Name: "b", Arguments: raw(`{}`), OK: true, Output: raw(`{}`)}}, Iterations: 2}},
		{"parallel, one call", true, one, "", []string{"a {}"},
			[]string{"L#abort:turn:1", "L#turn:1:response", "L#abort:tool:1:0", "L#turn:1:tool:0", "L#abort:turn:2", "L#turn:2:response"},
			agent.Result{Status: agent.Complete, Text: "done", Tools: []string{"a"}, Calls: []agent.Call{{Name: "a", Arguments: raw(`{}`), OK: true, Output: raw(`{}`)}}, Iterations: 2}},
		{"sequential, first denied", false, two, "a", nil,
			[]string{"L#abort:turn:1", "L#turn:1:response", "L#abort:tool:1:0", "L#turn:1:tool:0"},
			agent.Result{Status: agent.Failed, Reason: loomtype.ReasonDenied, Tools: []string{"a"}, Iterations: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := scriptmodel.Sequence(model.Response{ToolCalls: c.calls}, model.Response{Content: "done"})
			box := &toolbox{fn: func(name string, args json.RawMessage) (json.RawMessage, error) { return args, nil }}
			sig := agent.NewSignal(nil)
			r := newRig(t, func() agent.Config {
				return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: tools, Parallel: c.parallel, Signal: sig,
					Allowed: func(tool string) bool { return tool != c.deny }}
			})
			r.start()
			res := r.result()
			res.ErrorID = ""
			require.Equal(t, c.wantRes, res)
			require.ElementsMatch(t, c.wantCalls, box.calls)
			var ids []string
			for _, d := range r.decisions() {
				if !strings.HasPrefix(d, "step.completed ") { // the completions of parallel calls come in any order
					ids = append(ids, d[strings.Index(d, " ")+1:])
				}
			}
			require.Equal(t, c.wantIDs, ids)
			if c.wantRes.Status == agent.Complete {
				// The model is sent every call's outcome, in the calls' order.
				want := []model.Message{{Role: model.RoleUser, Content: "hi"}, {Role: model.RoleAssistant, ToolCalls: c.calls}}
				for _, call := range c.calls {
					want = append(want, model.Message{Role: model.RoleTool, ToolCallID: call.ID, Content: "{}"})
				}
				require.Len(t, p.Requests(), 2)
				require.Equal(t, want, p.Requests()[1].Messages)
			}
		})
	}
}

// When recording an abort checkpoint fails (the store went away), the run stops there: no model
// call after the turn's checkpoint, no tool call after the tools' checkpoint, one at a time or in
// parallel.
func TestCheckpointFailureStopsTheRun(t *testing.T) {
	call := []model.ToolCall{{ID: "1", Name: "a", Arguments: `{}`}, {ID: "2", Name: "a", Arguments: `{}`}}
	for _, c := range []struct {
		name      string
		parallel  bool
		killAt    int // the Check call during which the store dies
		wantModel int64
	}{
		{"turn checkpoint", false, 1, 0},
		{"sequential tool checkpoint", false, 2, 1},
		{"parallel tools checkpoint", true, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := scriptmodel.Sequence(model.Response{ToolCalls: call}, model.Response{Content: "done"})
			box := &toolbox{fn: func(name string, args json.RawMessage) (json.RawMessage, error) { return args, nil }}
			var r *rig
			var checks atomic.Int64
			sig := agent.NewSignal(nil)
			sig.SetProbe(func() bool {
				if checks.Add(1) == int64(c.killAt) {
					r.st.Kill()
				}
				return false
			})
			r = newRig(t, func() agent.Config {
				return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "a"}}, Parallel: c.parallel, Signal: sig}
			})
			r.start()
			select {
			case err := <-r.errs:
				require.ErrorIs(t, err, store.ErrClosed, "the store's refusal to record the checkpoint")
			case <-time.After(10 * time.Second):
				t.Fatal("the run did not return")
			}
			require.Equal(t, c.wantModel, int64(p.Calls()), "model calls")
			require.Empty(t, box.calls, "tool calls")
		})
	}
}

// A barge-in seen at the checkpoint before parallel tool calls interrupts the run there: none of
// the calls runs, and the run ends interrupted with the response's text.
func TestParallelToolsCheckpointInterrupts(t *testing.T) {
	calls := []model.ToolCall{{ID: "1", Name: "a", Arguments: `{}`}, {ID: "2", Name: "a", Arguments: `{}`}}
	p := scriptmodel.Sequence(model.Response{Content: "let me look", ToolCalls: calls}, model.Response{Content: "done"})
	box := &toolbox{fn: func(name string, args json.RawMessage) (json.RawMessage, error) { return args, nil }}
	var checks atomic.Int64
	sig := agent.NewSignal(nil)
	sig.SetProbe(func() bool { return checks.Add(1) == 2 }) // the second checkpoint: the tools'
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "a"}}, Parallel: true, Signal: sig}
	})
	r.start()
	require.Equal(t, agent.Result{Status: agent.Interrupted, Text: "let me look", Iterations: 1}, r.result())
	require.Empty(t, box.calls)
	require.EqualValues(t, 1, p.Calls())
	require.Equal(t, []string{"decision L#abort:turn:1", "decision L#turn:1:response", "decision L#abort:tools:1"}, r.decisions())
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }
