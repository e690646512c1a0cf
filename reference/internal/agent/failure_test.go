package agent_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/model"
)

func no() *bool { b := false; return &b }

func wrap(f *agent.Failure, depth int) *agent.Failure {
	for i := depth; i > 0; i-- {
		f = &agent.Failure{Class: "Error", Cause: f}
	}
	return f
}

// Every terminal class is terminal alone, as the only ancestor of a subclass, and at cause
// depth 5; at depth 6 it is ordinary. retryable false makes an ordinary class terminal.
func TestTerminalClassification(t *testing.T) {
	for _, c := range agent.TerminalClasses {
		stop, ok := (&agent.Failure{Class: c}).Terminal()
		require.True(t, ok, c)
		require.Equal(t, agent.TerminalStop{Class: c, Failure: c}, stop)
		stop, ok = (&agent.Failure{Class: "Vendor", Extends: []string{"Base", c}}).Terminal()
		require.True(t, ok, c)
		require.Equal(t, agent.TerminalStop{Class: c, Failure: "Vendor"}, stop)
		stop, ok = wrap(&agent.Failure{Class: c}, 5).Terminal()
		require.True(t, ok, c)
		require.Equal(t, 5, stop.Depth)
		_, ok = wrap(&agent.Failure{Class: c}, 6).Terminal()
		require.False(t, ok, c)
	}
	stop, ok := (&agent.Failure{Class: "VendorError", Retryable: no()}).Terminal()
	require.True(t, ok)
	require.Equal(t, agent.TerminalStop{Class: agent.RetryableFalse, Failure: "VendorError"}, stop)
	yes := true
	for _, f := range []*agent.Failure{nil, {Class: "Error"}, {Class: "VendorTimeout", Retryable: &yes},
		{Class: "VendorTimeout", Extends: []string{"TimeoutError", "Error"}}, wrap(&agent.Failure{Class: "X", Retryable: no()}, 6)} {
		_, ok := f.Terminal()
		require.False(t, ok, "%+v", f)
	}
}

// The loop puts its principal on the context of every tool call.
func TestToolCallsCarryThePrincipal(t *testing.T) {
	p := scriptmodel.Sequence(model.Response{ToolCalls: []model.ToolCall{{ID: "1", Name: "echo", Arguments: `{}`}}}, model.Response{Content: "done"})
	var got []any
	var mu sync.Mutex
	box := runnerFunc(func(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
		pr, ok := agent.PrincipalFrom(ctx)
		mu.Lock()
		got = append(got, pr, ok)
		mu.Unlock()
		return args, nil
	})
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "echo"}}, Principal: &alice}
	})
	r.start()
	require.Equal(t, agent.Complete, r.result().Status)
	require.Equal(t, []any{alice, true}, got)
}

type runnerFunc func(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error)

func (f runnerFunc) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	return f(ctx, name, args, key)
}

// The one window in which a failed call runs twice: the tool answered with a failure, and the
// process died before that outcome was durable. The call was still in flight, so the resume runs
// it once more, with the same idempotency key, and the model (which never read the first
// answer) is sent the second one, fenced. Once the outcome is durable nothing runs it again.
func TestFailedCallInFlightAtCrashRunsOnce(t *testing.T) {
	p := scriptmodel.Sequence(model.Response{ToolCalls: []model.ToolCall{{ID: "1", Name: "pay", Arguments: `{"n":5}`}}}, model.Response{Content: "the bank is down"})
	var attempts atomic.Int64
	var mu sync.Mutex
	var keys []string
	answered := make(chan struct{}, 4)
	var crashNext atomic.Bool
	crashNext.Store(true)
	box := runnerFunc(func(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
		attempts.Add(1)
		mu.Lock()
		keys = append(keys, key)
		mu.Unlock()
		if crashNext.Swap(false) {
			answered <- struct{}{} // the tool has answered; its outcome is not recorded yet
			<-ctx.Done()
		}
		return nil, &agent.ToolError{Status: 502, Message: "bank down"}
	})
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "pay"}}, TaintToolErrors: true}
	})
	r.start()
	<-answered
	r.k.Close() // the crash: the failed call's outcome is never recorded
	require.Equal(t, []string{"decision L#turn:1:response", "step.started L#turn:1:tool:0"}, r.decisions(),
		"the call had started; its outcome was never recorded")
	r.st.Close()
	r.open()
	res := r.result()
	require.Equal(t, agent.Complete, res.Status)
	require.EqualValues(t, 2, attempts.Load(), "the failed call in flight at the crash runs exactly once more")
	require.Equal(t, keys[0], keys[1], "with the same idempotency key")
	require.Len(t, p.Requests(), 2, "the model is asked once per response: its first answer was recorded")
	require.Equal(t, `{"untrusted":{"data":{"error":"bank down"},"source":"tool-error:pay"}}`, p.Requests()[1].Messages[2].Content)

	// The outcome is durable now: another restart runs nothing again.
	r.k.Close()
	r.st.Close()
	r.open()
	require.Equal(t, res, r.result())
	require.EqualValues(t, 2, attempts.Load())
	require.Len(t, p.Requests(), 2)
}
