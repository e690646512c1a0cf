package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/model"
)

// heldBox is a tool runner whose first call of each tool in hold waits until the process goes
// away; it counts every call and keeps each call's key.
type heldBox struct {
	mu      sync.Mutex
	calls   map[string][]string
	hold    map[string]bool
	started chan string
}

func newHeldBox(hold ...string) *heldBox {
	b := &heldBox{calls: map[string][]string{}, hold: map[string]bool{}, started: make(chan string, 8)}
	for _, h := range hold {
		b.hold[h] = true
	}
	return b
}

func (b *heldBox) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	b.mu.Lock()
	b.calls[name] = append(b.calls[name], key)
	held := b.hold[name]
	b.hold[name] = false
	b.mu.Unlock()
	b.started <- name
	if held {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return json.RawMessage(`{"done":true}`), nil
}

func (b *heldBox) keys(name string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls[name]...)
}

// A call of a tool declared not idempotent that a crash cut off is never run again: the resume
// records it in doubt, ends the run failed without asking the model again, and a second restart
// serves the recorded outcome.
func TestNotIdempotentCallInFlightAtCrashIsInDoubt(t *testing.T) {
	p := scriptmodel.Sequence(model.Response{ToolCalls: []model.ToolCall{{ID: "1", Name: "pay", Arguments: `{"n":5}`}}}, model.Response{Content: "paid"})
	box := newHeldBox("pay")
	var mu sync.Mutex
	var reported []error
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "pay"}},
			NotIdempotent: func(tool string) bool { return tool == "pay" },
			OnError: func(_ string, err error) {
				mu.Lock()
				reported = append(reported, err)
				mu.Unlock()
			}}
	})
	r.start()
	<-box.started
	r.k.Close()
	require.Equal(t, []string{"decision L#turn:1:response", "decision L#turn:1:tool:0:started", "step.started L#turn:1:tool:0"}, r.decisions(),
		"the started mark is durable with the step's start, before the tool is called")
	r.st.Close()
	r.open()
	res := r.result()
	key := box.keys("pay")[0]
	want := agent.Result{Status: agent.Failed, Reason: agent.ReasonEffectInDoubt, ErrorID: "err_" + key[:24],
		Tools: []string{"pay"}, Iterations: 1, InDoubt: &agent.InDoubt{Class: agent.ClassEffectInDoubt, Tool: "pay", IdempotencyKey: key}}
	require.Equal(t, want, res)
	require.Len(t, box.keys("pay"), 1, "the call in doubt is not run again")
	require.Len(t, p.Requests(), 1, "the model is not asked again")
	var ie *agent.InDoubtError
	require.Len(t, reported, 1)
	require.ErrorAs(t, reported[0], &ie)
	require.Equal(t, *want.InDoubt, ie.InDoubt)

	r.k.Close()
	r.st.Close()
	r.open()
	require.Equal(t, want, r.result(), "a second restart serves the recorded outcome")
	require.Len(t, box.keys("pay"), 1)
	require.Len(t, p.Requests(), 1)
	require.Len(t, reported, 1, "the call in doubt is reported once")
}

// An undeclared tool keeps the at-least-once resume, and its journal holds no started mark.
func TestUndeclaredCallInFlightAtCrashRunsAgain(t *testing.T) {
	p := scriptmodel.Sequence(model.Response{ToolCalls: []model.ToolCall{{ID: "1", Name: "pay", Arguments: `{"n":5}`}}}, model.Response{Content: "paid"})
	box := newHeldBox("pay")
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "pay"}},
			NotIdempotent: func(tool string) bool { return tool == "refund" }}
	})
	r.start()
	<-box.started
	r.k.Close()
	require.Equal(t, []string{"decision L#turn:1:response", "step.started L#turn:1:tool:0"}, r.decisions())
	r.st.Close()
	r.open()
	require.Equal(t, agent.Complete, r.result().Status)
	keys := box.keys("pay")
	require.Len(t, keys, 2)
	require.Equal(t, keys[0], keys[1])
}

// In a parallel batch each call is judged alone: the undeclared call in flight runs again, the
// call in doubt does not, and the run ends in doubt with the other call's outcome logged.
func TestParallelBatchJudgesEachCallAlone(t *testing.T) {
	p := scriptmodel.Sequence(model.Response{ToolCalls: []model.ToolCall{
		{ID: "1", Name: "pay", Arguments: `{"n":5}`}, {ID: "2", Name: "look", Arguments: `{}`}}}, model.Response{Content: "done"})
	box := newHeldBox("pay", "look")
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "pay"}, {Name: "look"}}, Parallel: true,
			NotIdempotent: func(tool string) bool { return tool == "pay" }}
	})
	r.start()
	<-box.started
	<-box.started
	r.k.Close()
	r.st.Close()
	r.open()
	res := r.result()
	require.Equal(t, agent.Failed, res.Status)
	require.Equal(t, agent.ReasonEffectInDoubt, res.Reason)
	require.Equal(t, &agent.InDoubt{Class: agent.ClassEffectInDoubt, Tool: "pay", IdempotencyKey: box.keys("pay")[0]}, res.InDoubt)
	require.Equal(t, []agent.Call{{Name: "look", Arguments: json.RawMessage(`{}`), OK: true, Output: json.RawMessage(`{"done":true}`)}}, res.Calls)
	require.Len(t, box.keys("pay"), 1)
	look := box.keys("look")
	require.Len(t, look, 2)
	require.Equal(t, look[0], look[1])
	require.Len(t, p.Requests(), 1)
}

// One after the other, the calls after the one in doubt are not run: they had not started.
func TestSequentialCallsAfterInDoubtAreNotRun(t *testing.T) {
	p := scriptmodel.Sequence(model.Response{ToolCalls: []model.ToolCall{
		{ID: "1", Name: "pay", Arguments: `{"n":5}`}, {ID: "2", Name: "look", Arguments: `{}`}}}, model.Response{Content: "done"})
	box := newHeldBox("pay")
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "pay"}, {Name: "look"}},
			NotIdempotent: func(tool string) bool { return tool == "pay" }}
	})
	r.start()
	<-box.started
	r.k.Close()
	r.st.Close()
	r.open()
	res := r.result()
	require.Equal(t, agent.ReasonEffectInDoubt, res.Reason)
	require.Empty(t, res.Calls)
	require.Equal(t, []string{"pay"}, res.Tools)
	require.Len(t, box.keys("pay"), 1)
	require.Empty(t, box.keys("look"), "the call after the one in doubt had not started and is not run")
	require.Len(t, p.Requests(), 1)
}
