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

// A fed-back failure's fence is part of its recorded outcome, not of the configuration that
// replays it: a journal recorded without the fence (one written before conversation turns fenced
// their failures) replays bare under a configuration that fences, and one recorded fenced replays
// fenced under one that does not. Each resume asks the model the request it was asked before.
func TestRecordedFailureIsFedBackAsRecorded(t *testing.T) {
	bare := `{"error":"sensor offline"}`
	fenced := `{"untrusted":{"data":{"error":"sensor offline"},"source":"tool-error:lookup"}}`
	for _, tc := range []struct {
		name             string
		recorded, resume bool
		want             string
	}{
		{"recorded bare, resumed fencing", false, true, bare},
		{"recorded fenced, resumed not fencing", true, false, fenced},
		{"recorded fenced, resumed fencing", true, true, fenced},
		{"recorded bare, resumed not fencing", false, false, bare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var reqs []model.Request
			asked := make(chan struct{}, 4)
			var hold atomic.Bool
			hold.Store(true)
			p := scriptmodel.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
				mu.Lock()
				reqs = append(reqs, req)
				n := len(reqs)
				mu.Unlock()
				if n == 1 {
					return model.Response{ToolCalls: []model.ToolCall{{ID: "1", Name: "lookup", Arguments: `{"pump":3}`}}}, nil
				}
				if hold.Swap(false) {
					asked <- struct{}{} // the second request is in flight; its answer is never recorded
					<-ctx.Done()
					return model.Response{}, ctx.Err()
				}
				return model.Response{Content: "The sensor is offline."}, nil
			})
			var toolCalls atomic.Int64
			box := runnerFunc(func(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
				toolCalls.Add(1)
				return nil, &agent.ToolError{Status: 502, Message: "sensor offline"}
			})
			taint := tc.recorded
			r := newRig(t, func() agent.Config {
				return agent.Config{LoopID: "L", Provider: p, Runner: box, Tools: []model.Tool{{Name: "lookup"}}, TaintToolErrors: taint}
			})
			r.start()
			<-asked
			r.k.Close() // the crash, with the failure recorded and the second model call in flight
			r.st.Close()
			taint = tc.resume
			r.open()
			res := r.result()
			require.Equal(t, agent.Complete, res.Status)
			require.Equal(t, "The sensor is offline.", res.Text)
			require.EqualValues(t, 1, toolCalls.Load(), "the recorded failure is served, the tool is not run again")
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, reqs, 3)
			require.Equal(t, reqs[1].Messages, reqs[2].Messages, "the resume asks what was asked before the crash")
			require.Equal(t, tc.want, reqs[2].Messages[2].Content)
		})
	}
}
