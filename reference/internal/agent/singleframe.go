package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// idSingleFrame is the one journaled step of a single-frame run, under the loop's id.
const idSingleFrame = "%s#single-frame"

// SingleFrame configures the deprecated single-frame runner (RunSingleFrame).
//
//	sf := agent.SingleFrame{NotIdempotent: func(t string) bool { return t == "pay" }}
type SingleFrame struct {
	// NotIdempotent reports whether a tool is declared idempotent: false. Such a tool is
	// refused (the run ends Failed, reason ReasonToolTerminal, class
	// ClassIdempotentToolRefused) unless AcceptAtLeastOnce is set, since a crash re-runs the
	// whole frame and with it every call that had already fired.
	NotIdempotent func(tool string) bool
	// AcceptAtLeastOnce is the explicit opt-out: a tool declared idempotent: false runs, and
	// runs again when a crash re-runs the frame.
	AcceptAtLeastOnce bool
}

// RunSingleFrame runs the whole loop of cfg inside ONE journaled step: the model calls and the
// tool calls are made live inside it and none of them is recorded on its own, so a crash before
// the step completes re-runs the whole loop (the model is asked again from the start and every
// tool that had fired fires again). A completed run is served from the step. This is the
// deprecated runner; Run is the canonical loop.
//
// Each tool call carries FrameKey(<execution id>, turn, position, tool, arguments) as its
// idempotency key. Before any call of a response runs, every call of it is checked against
// sf.NotIdempotent: a refused tool ends the run (no call of that response runs or starts). The
// rest follows Run: failures classified and fed back (fenced when cfg.TaintToolErrors), terminal
// failures and toolErrors "fail" stop the response (fail-fast in parallel), the signal is looked
// at before every model call and every tool call.
//
// Errors: as Run's; a step that could not record its result.
//
//	res, err := agent.RunSingleFrame(c, cfg, agent.SingleFrame{NotIdempotent: declared}, msgs)
func RunSingleFrame(c *kernel.Context, cfg Config, sf SingleFrame, messages []model.Message) (Result, error) {
	if cfg.MaxIterations <= 0 {
		cfg.MaxIterations = 8
	}
	outer := c.ID()
	raw, err := c.Execute(fmt.Sprintf(idSingleFrame, cfg.LoopID), func(ctx context.Context) (json.RawMessage, error) {
		res, err := runFrame(ctx, cfg, sf, outer, messages)
		if err != nil {
			return nil, err
		}
		return json.Marshal(res)
	})
	var se *kernel.StepError
	if errors.As(err, &se) {
		return Result{Status: Failed, Reason: loomtype.ReasonTurnFailed}, nil
	}
	if err != nil {
		return Result{}, err
	}
	var res Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return Result{}, fmt.Errorf("agent: recorded single frame: %w", err)
	}
	return res, nil
}

// runFrame is the loop inside the frame. It returns an error only when ctx ended (the process is
// going away, or the run was cancelled): nothing is recorded then.
func runFrame(ctx context.Context, cfg Config, sf SingleFrame, outer string, messages []model.Message) (Result, error) {
	msgs := append([]model.Message(nil), messages...)
	var res Result
	fired := func() bool {
		if cfg.Signal == nil {
			return false
		}
		cfg.Signal.Arm()
		return cfg.Signal.Check()
	}
	for i := 1; i <= cfg.MaxIterations; i++ {
		if fired() {
			res.Status = Interrupted
			return res, nil
		}
		if cfg.OnLive != nil {
			cfg.OnLive()
		}
		resp, err := cfg.Provider.Complete(ctx, model.Request{Model: cfg.Model, Messages: msgs, Tools: cfg.Tools}, nil)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		res.Iterations = i
		if err != nil {
			id := NewErrorID()
			if cfg.OnError != nil {
				cfg.OnError(id, err)
			}
			res.Status, res.Reason, res.ErrorID = Failed, loomtype.ReasonModelError, id
			return res, nil
		}
		if len(resp.ToolCalls) == 0 {
			res.Status, res.Text = Complete, cutText(resp.Content)
			return res, nil
		}
		// The whole response is checked before any call of it runs or starts.
		if !sf.AcceptAtLeastOnce && sf.NotIdempotent != nil {
			for _, call := range resp.ToolCalls {
				if sf.NotIdempotent(call.Name) {
					res.Status, res.Reason = Failed, ReasonToolTerminal
					res.Terminal = &TerminalStop{Tool: call.Name, Class: ClassIdempotentToolRefused, Failure: ClassIdempotentToolRefused}
					return res, nil
				}
			}
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls})
		outs, stopped := frameCalls(ctx, cfg, outer, i, resp.ToolCalls, fired, &res)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if endOnFailure(cfg, resp.ToolCalls, outs, &res) {
			return res, nil
		}
		for j, o := range outs {
			if o.Denied {
				res.Status, res.Reason, res.ErrorID = Failed, loomtype.ReasonDenied, o.ErrorID
				return res, nil
			}
			res.Calls = append(res.Calls, logEntry(resp.ToolCalls[j], o))
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: resp.ToolCalls[j].ID, Content: toolContent(o)})
		}
		if stopped {
			res.Status, res.Text = Interrupted, resp.Content
			return res, nil
		}
	}
	res.Status, res.Reason = Failed, loomtype.ReasonTurnFailed
	res.ErrorID = "err_" + idempotencyKey(outer, cfg.LoopID, model.ToolCall{Name: maxIterName})[:24]
	return res, nil
}

// frameCalls runs one response's calls inside the frame: one after the other, or at once (at
// most cfg.MaxParallel) in a fail-fast scope. stopped says the signal fired before a call.
func frameCalls(ctx context.Context, cfg Config, outer string, turn int, calls []model.ToolCall, fired func() bool, res *Result) ([]toolOutcome, bool) {
	run := func(ctx context.Context, j int, call model.ToolCall) toolOutcome {
		key, err := FrameKey(outer, turn, j, call.Name, call.Arguments)
		if err != nil {
			return toolOutcome{Error: "arguments are not JSON"}
		}
		return callTool(ctx, cfg, call, key)
	}
	if !cfg.Parallel || len(calls) < 2 {
		outs := make([]toolOutcome, 0, len(calls))
		for j, call := range calls {
			if fired() {
				return outs, true
			}
			res.Tools = append(res.Tools, call.Name)
			o := run(ctx, j, call)
			outs = append(outs, o)
			if stopsBatch(cfg, o) {
				break
			}
		}
		return outs, false
	}
	if fired() {
		return nil, true
	}
	scope := newBatchScope()
	var slots chan struct{}
	if cfg.MaxParallel > 0 {
		slots = make(chan struct{}, cfg.MaxParallel)
	}
	outs := make([]toolOutcome, len(calls))
	var wg sync.WaitGroup
	for j, call := range calls {
		res.Tools = append(res.Tools, call.Name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, leave := scope.join(ctx)
			defer leave()
			if slots != nil {
				select {
				case slots <- struct{}{}:
					defer func() { <-slots }()
				case <-cctx.Done():
				}
			}
			if scope.isStopped() || ctx.Err() != nil {
				outs[j] = toolOutcome{NotRun: true}
				return
			}
			o := run(cctx, j, call)
			if scope.isStopped() && cctx.Err() != nil {
				o = toolOutcome{NotRun: true}
			} else if stopsBatch(cfg, o) {
				scope.stop()
			}
			outs[j] = o
		}()
	}
	wg.Wait()
	return outs, false
}
