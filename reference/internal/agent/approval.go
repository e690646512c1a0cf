package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Parking: a call that needs a person's approval waits at a gate, and a call of a human tool
// waits for the person's answer. Both waits are durable: a gate's answer is a taken kernel
// signal (journaled, so a replay serves it and a gate answered before a crash is not asked
// again), and a human tool's answer completes the call's own step (so it is consumed once). A
// gate or a human call is announced by a recorded marker decision before the run waits, which
// is what a reader of the log (Parked) finds pending.
//
// The shape of a turn: without a human tool, every gate of the turn is asked first, one after
// the other in call order, before any call of the turn starts (parallel or not), so a turn
// parked on a gate has run none of its calls; then the approved calls run as the turn would
// run them. A turn that holds a human tool keeps the sequential shape whatever Parallel says:
// for each call in order its gate (if it needs one), then the call.

// Kinds of a parked call.
const (
	KindApproval = "approval" // a gate: the call waits for a person's approval
	KindHuman    = "human"    // a human tool: the call waits for a person's answer
)

// NotApproved is the error text the model is told for a call a person denied; the call never ran.
const NotApproved = "not approved"

// ErrPendingHuman is what a ToolRunner returns when the tool server has taken the call of a
// human tool and the result will come from a person (the tool server's 202 {"pending":"human"}).
var ErrPendingHuman = errors.New("agent: the tool's result will come from a person")

// Journal ids of parking (see journal_ids.go: add ids, never change one).
const (
	idGate       = "%s#turn:%d:gate:%d"  // the marker of call j's approval gate
	idHumanAsk   = "%s#turn:%d:human:%d" // the marker of human call j's wait for its answer
	parkIDFormat = "t%d-c%d"             // the gate or human call id: turn i, call j
	signalGate   = "approval:"           // the kernel signal a gate's answer is delivered under
	signalHuman  = "human:"              // the kernel signal a human call's answer is delivered under
)

// ParkID is the id of the gate or human call of call j (0-based) of model call turn (1-based).
//
//	agent.ParkID(1, 0) // "t1-c0"
func ParkID(turn, j int) string { return fmt.Sprintf(parkIDFormat, turn, j) }

// ApprovalSignal is the kernel signal name a gate's answer is delivered under; its payload is
// Approval.
//
//	_, err := k.Signal(ctx, runID, agent.ApprovalSignal("t1-c0"), "answer", json.RawMessage(`{"approved":true}`))
func ApprovalSignal(gate string) string { return signalGate + gate }

// HumanSignal is the kernel signal name a human call's answer is delivered under; its payload is
// the answer, the call's result.
//
//	_, err := k.Signal(ctx, runID, agent.HumanSignal("t1-c0"), "answer", json.RawMessage(`{"answer":"yes"}`))
func HumanSignal(call string) string { return signalHuman + call }

// Approval is the payload of a gate's answer. Anything but {"approved": true} denies.
type Approval struct {
	Approved bool `json:"approved"`
}

// Park is a parked call as its marker records it.
type Park struct {
	Kind      string          `json:"kind"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// Step is the step of a human call (the step its answer completes).
	Step string `json:"step,omitempty"`
}

// Answered is how a parked call was answered: Approved for a gate, Result for a human call.
type Answered struct {
	Approved bool
	Result   json.RawMessage
}

// Parked reads the log of one generation of a loop's execution (oldest first) and returns the
// calls that wait for a person now (asked and not answered, in the order they were asked) and
// the answers of every one answered, by AnswerKey (a human tool that needs approval has a gate
// and a human call under one id).
//
//	evs, _ := k.ReadLog(ctx, id, info.Gen, 0, kernel.MaxRead)
//	pending, answered := agent.Parked(evs)
func Parked(evs []kernel.LogEvent) ([]Park, map[string]Answered) {
	var asked []Park
	answered := map[string]Answered{}
	steps := map[string]json.RawMessage{}
	for _, ev := range evs {
		switch {
		case ev.Decision != nil:
			var p Park
			if json.Unmarshal(ev.Decision.Value, &p) == nil && isMarker(ev.Decision.ID, p) {
				asked = append(asked, p)
			}
		case ev.Kind == "signal.taken":
			var t struct {
				Name    string          `json:"name"`
				Payload json.RawMessage `json:"payload"`
			}
			if json.Unmarshal(ev.Data, &t) == nil && len(t.Name) > len(signalGate) && t.Name[:len(signalGate)] == signalGate {
				var a Approval
				_ = json.Unmarshal(t.Payload, &a)
				answered[AnswerKey(KindApproval, t.Name[len(signalGate):])] = Answered{Approved: a.Approved}
			}
		case ev.Kind == "step.completed":
			var s struct {
				ID     string          `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal(ev.Data, &s) == nil {
				steps[s.ID] = s.Result
			}
		}
	}
	var pending []Park
	for _, p := range asked {
		if p.Kind == KindHuman {
			if res, ok := steps[p.Step]; ok {
				var o toolOutcome
				_ = json.Unmarshal(res, &o)
				answered[AnswerKey(KindHuman, p.ID)] = Answered{Result: o.Output}
				continue
			}
		}
		if _, ok := answered[AnswerKey(p.Kind, p.ID)]; !ok {
			pending = append(pending, p)
		}
	}
	return pending, answered
}

// AnswerKey is the key of a parked call's answer in what Parked returns.
//
//	a, ok := answered[agent.AnswerKey(agent.KindApproval, "t1-c0")]
func AnswerKey(kind, id string) string { return kind + ":" + id }

// isMarker reports whether decision id records the park p (a gate or human marker).
func isMarker(id string, p Park) bool {
	switch p.Kind {
	case KindApproval:
		return hasMarkerID(id, idGate, p.ID)
	case KindHuman:
		return hasMarkerID(id, idHumanAsk, p.ID)
	}
	return false
}

// hasMarkerID reports whether id is format's id for the park id (turn and call read from it).
func hasMarkerID(id, format, park string) bool {
	var i, j int
	if _, err := fmt.Sscanf(park, parkIDFormat, &i, &j); err != nil {
		return false
	}
	suffix := fmt.Sprintf(format, "", i, j)
	return len(id) > len(suffix) && id[len(id)-len(suffix):] == suffix
}

func (cfg Config) needs(call model.ToolCall) bool {
	return cfg.NeedsApproval != nil && cfg.NeedsApproval(call)
}

func (cfg Config) human(name string) bool { return cfg.Human != nil && cfg.Human(name) }

// arguments is what the call was made with, as JSON (the tool-call log's rule).
func arguments(call model.ToolCall) json.RawMessage { return logEntry(call, toolOutcome{}).Arguments }

// gate announces call j's gate and waits for its answer; it reports whether the call was approved.
func gate(c *kernel.Context, cfg Config, turn, j int, call model.ToolCall) (bool, error) {
	id := ParkID(turn, j)
	if _, err := c.Decide(fmt.Sprintf(idGate, cfg.LoopID, turn, j), func() (json.RawMessage, error) {
		return json.Marshal(Park{Kind: KindApproval, ID: id, Name: call.Name, Arguments: arguments(call)})
	}); err != nil {
		return false, err
	}
	d, err := c.WaitSignal(ApprovalSignal(id))
	if err != nil {
		return false, err
	}
	var a Approval
	_ = json.Unmarshal(d.Payload, &a)
	return a.Approved, nil
}

// notApproved is the outcome of a call a person denied: it never ran, and the model is told so.
func notApproved() toolOutcome { return toolOutcome{Error: NotApproved} }

// humanRunner is a ToolRunner for a human tool's step: the ask goes to the tool server, and
// when it answers pending the step waits for the person's answer, which is the result.
type humanRunner struct {
	c      *kernel.Context
	inner  ToolRunner
	signal string
}

func (h humanRunner) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	out, err := h.inner.Call(ctx, name, args, key)
	if !errors.Is(err, ErrPendingHuman) {
		return out, err
	}
	ch, stop := h.c.WatchSignal(h.signal)
	defer stop()
	for {
		d, ok, err := h.c.PendingSignal(h.signal)
		if err != nil {
			return nil, err
		}
		if ok {
			return d.Payload, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// humanCall announces human call j and runs its step: the ask, then the wait for the answer.
func humanCall(c *kernel.Context, cfg Config, turn, j int, call model.ToolCall) (toolOutcome, error) {
	id, step := ParkID(turn, j), toolStepID(cfg.LoopID, turn, j)
	if _, err := c.Decide(fmt.Sprintf(idHumanAsk, cfg.LoopID, turn, j), func() (json.RawMessage, error) {
		return json.Marshal(Park{Kind: KindHuman, ID: id, Name: call.Name, Arguments: arguments(call), Step: step})
	}); err != nil {
		return toolOutcome{}, err
	}
	hcfg := cfg
	if cfg.Runner != nil {
		hcfg.Runner = humanRunner{c: c, inner: cfg.Runner, signal: HumanSignal(id)}
	}
	key := idempotencyKey(c.ID(), step, call)
	v, err := c.Execute(step, func(ctx context.Context) (json.RawMessage, error) {
		return json.Marshal(callTool(ctx, hcfg, call, key))
	})
	return decodeOutcome(kernel.StepResult{Value: v, Err: err})
}

// runParking runs one response's calls when the run may park (cfg.NeedsApproval or cfg.Human
// set): the shapes described at the top of this file. step makes call j's ordinary step.
func runParking(c *kernel.Context, cfg Config, turn int, calls []model.ToolCall, res *Result,
	step func(j int, call model.ToolCall) kernel.StepFunc) ([]toolOutcome, bool, error) {
	outs := make([]toolOutcome, len(calls))
	hasHuman := false
	for _, call := range calls {
		hasHuman = hasHuman || cfg.human(call.Name)
	}
	if hasHuman {
		return runHumanTurn(c, cfg, turn, calls, res, step, outs)
	}
	// Every gate first, in call order; nothing of the turn has run yet.
	var runnable []int
	for j, call := range calls {
		if cfg.needs(call) {
			ok, err := gate(c, cfg, turn, j, call)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				outs[j] = notApproved()
				continue
			}
		}
		runnable = append(runnable, j)
	}
	if cfg.Parallel && len(runnable) > 1 {
		return runApprovedParallel(c, cfg, turn, calls, runnable, res, step, outs)
	}
	for _, j := range runnable {
		if stop, err := checkpoint(c, cfg, abortToolID(cfg.LoopID, turn, j)); err != nil {
			return nil, false, err
		} else if stop {
			return outs[:j], true, nil
		}
		res.Tools = append(res.Tools, calls[j].Name)
		o, err := runCall(c, cfg, turn, j, calls[j], step(j, calls[j]))
		if err != nil {
			return nil, false, err
		}
		outs[j] = o
		if stopsBatch(cfg, o) {
			return outs[:j+1], false, nil
		}
	}
	return outs, false, nil
}

// runHumanTurn is runParking for a turn that holds a human tool: for each call in order its gate
// (if it needs one), then the call; outs has a slot for every call.
func runHumanTurn(c *kernel.Context, cfg Config, turn int, calls []model.ToolCall, res *Result,
	step func(j int, call model.ToolCall) kernel.StepFunc, outs []toolOutcome) ([]toolOutcome, bool, error) {
	for j, call := range calls {
		if stop, err := checkpoint(c, cfg, abortToolID(cfg.LoopID, turn, j)); err != nil {
			return nil, false, err
		} else if stop {
			return outs[:j], true, nil
		}
		if cfg.needs(call) {
			ok, err := gate(c, cfg, turn, j, call)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				outs[j] = notApproved()
				continue
			}
		}
		res.Tools = append(res.Tools, call.Name)
		var o toolOutcome
		var err error
		if cfg.human(call.Name) {
			o, err = humanCall(c, cfg, turn, j, call)
		} else {
			o, err = runCall(c, cfg, turn, j, call, step(j, call))
		}
		if err != nil {
			return nil, false, err
		}
		outs[j] = o
		if stopsBatch(cfg, o) {
			return outs[:j+1], false, nil
		}
	}
	return outs, false, nil
}

// runApprovedParallel is runParking's run of the calls runnable (every gate answered, more than
// one approved) in parallel, at most cfg.MaxParallel at once; outs has a slot for every call.
func runApprovedParallel(c *kernel.Context, cfg Config, turn int, calls []model.ToolCall, runnable []int, res *Result,
	step func(j int, call model.ToolCall) kernel.StepFunc, outs []toolOutcome) ([]toolOutcome, bool, error) {
	if stop, err := checkpoint(c, cfg, abortToolsID(cfg.LoopID, turn)); err != nil || stop {
		return nil, stop, err
	}
	ids := make([]string, len(runnable))
	fns := make([]kernel.StepFunc, len(runnable))
	for n, j := range runnable {
		fn, err := toolStep(c, cfg, turn, j, calls[j], step(j, calls[j]))
		if err != nil {
			return nil, false, err
		}
		ids[n], fns[n] = toolStepID(cfg.LoopID, turn, j), fn
		res.Tools = append(res.Tools, calls[j].Name)
	}
	for n, r := range c.ExecuteAllLimit(ids, fns, cfg.MaxParallel) {
		o, err := decodeOutcome(r)
		if err != nil {
			return nil, false, err
		}
		outs[runnable[n]] = o
	}
	return outs, false, nil
}
