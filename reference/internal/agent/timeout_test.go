package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/model"
)

// stallTool blocks every call until its context ends, and notes when each call began.
type stallTool struct {
	calls   atomic.Int64
	entered chan time.Time
}

func (s *stallTool) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	s.calls.Add(1)
	s.entered <- time.Now()
	<-ctx.Done()
	return nil, ctx.Err()
}

// A tool call that a crash cut off resumes its countdown from the recorded deadline: after the
// restart it gets only what was left of ToolTimeout, so the run ends about ToolTimeout after the
// first attempt began, not ToolTimeout after the restart; the deadline is recorded once, before
// the step.
func TestToolTimeoutResumesItsCountdownAfterARestart(t *testing.T) {
	const timeout = 2000 * time.Millisecond
	p := scriptmodel.Sequence(
		model.Response{ToolCalls: []model.ToolCall{{ID: "c", Name: "stall", Arguments: `{}`}}},
		model.Response{Content: "it timed out"},
	)
	tool := &stallTool{entered: make(chan time.Time, 4)}
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: tool, Tools: []model.Tool{{Name: "stall"}}, ToolTimeout: timeout}
	})
	r.start()
	first := <-tool.entered
	time.Sleep(1500 * time.Millisecond)
	r.k.Close()
	r.st.Close()
	r.open()
	res := r.result()
	took := time.Since(first)
	require.Equal(t, agent.Complete, res.Status)
	require.Equal(t, []agent.Call{{Name: "stall", Arguments: json.RawMessage(`{}`), Error: agent.TimeoutText}}, res.Calls)
	require.Less(t, took, 3000*time.Millisecond, "the countdown went on from the first attempt (a new one would end after %s)", 1500*time.Millisecond+timeout)
	require.GreaterOrEqual(t, took, timeout-50*time.Millisecond, "the call had its whole bound")
	var deadlines []string
	for _, d := range r.decisions() {
		if strings.HasSuffix(d, ":deadline") {
			deadlines = append(deadlines, d)
		}
	}
	require.Equal(t, []string{"decision L#turn:1:tool:0:deadline"}, deadlines)
}

// Without a timeout configured no deadline is recorded: the journal's shape is what it was.
func TestNoTimeoutRecordsNoDeadline(t *testing.T) {
	p := scriptmodel.Sequence(
		model.Response{ToolCalls: []model.ToolCall{{ID: "c", Name: "echo", Arguments: `{}`}}},
		model.Response{Content: "done"},
	)
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Runner: &echoTool{}, Tools: []model.Tool{{Name: "echo"}}}
	})
	r.start()
	require.Equal(t, agent.Complete, r.result().Status)
	for _, d := range r.decisions() {
		require.NotContains(t, d, "deadline")
	}
}
