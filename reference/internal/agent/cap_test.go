package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Tool calls whose arguments together are one character over the cap fail the run, record no
// response (so a resume would ask the model again) and run no tool; at the cap exactly they run.
func TestToolCallsOverTheCapAreNeverRecorded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chars int
		over  bool
	}{{"at the cap", agent.MaxResponseChars, false}, {"one over", agent.MaxResponseChars + 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			args := `{"f":"` + strings.Repeat("x", tc.chars-8) + `"}`
			require.Equal(t, tc.chars, len(args))
			first := true
			p := scriptmodel.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
				if first {
					first = false
					return model.Response{ToolCalls: []model.ToolCall{{ID: "c", Name: "echo", Arguments: args}}}, nil
				}
				return model.Response{Content: "done"}, nil
			})
			tool := &echoTool{}
			var reported []error
			r := newRig(t, func() agent.Config {
				return agent.Config{LoopID: "L", Provider: p, Runner: tool, Tools: []model.Tool{{Name: "echo"}},
					OnError: func(_ string, err error) { reported = append(reported, err) }}
			})
			r.start()
			res := r.result()
			if !tc.over {
				require.Equal(t, agent.Complete, res.Status)
				require.EqualValues(t, 1, tool.calls.Load())
				return
			}
			require.Equal(t, agent.Failed, res.Status)
			require.True(t, res.TooLarge)
			require.Equal(t, loomtype.ReasonModelError, res.Reason)
			require.NotEmpty(t, res.ErrorID)
			require.Zero(t, tool.calls.Load(), "no call of a response over the cap runs")
			require.EqualValues(t, 1, p.Calls())
			require.Empty(t, r.decisions(), "nothing of the response is recorded")
			require.Len(t, reported, 1)
			require.ErrorIs(t, reported[0], agent.ErrResponseTooLarge)
		})
	}
}
