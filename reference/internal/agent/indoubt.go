package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// idToolStarted is the mark recorded, for a tool declared not idempotent only, before the step
// of tool call j of model call i starts: its value is the call's idempotency key. It is written
// with the step's own start, in the same commit, before the tool is called.
const idToolStarted = "%s#turn:%d:tool:%d:started"

func toolStartedID(loop string, i, j int) string { return fmt.Sprintf(idToolStarted, loop, i, j) }

// ClassEffectInDoubt is the class of the outcome of a call of a tool declared idempotent: false
// that was started and had no recorded outcome when the process stopped: the tool may or may
// not have acted, and calling it again could act twice.
const ClassEffectInDoubt = "EffectInDoubtError"

// ReasonEffectInDoubt is the reason of a run or a turn that a call in doubt ended.
const ReasonEffectInDoubt loomtype.Reason = "effect-in-doubt"

// InDoubt names the call whose effect is in doubt: its tool and the idempotency key it was
// called with, so that an operator can ask the tool's owner what became of it.
//
//	if res.Reason == agent.ReasonEffectInDoubt { log.Printf("ask %s about %s", res.InDoubt.Tool, res.InDoubt.IdempotencyKey) }
type InDoubt struct {
	Class          string `json:"class"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotencyKey"`
}

// InDoubtError is what Config.OnError is told, once, when a call is found in doubt.
type InDoubtError struct{ InDoubt }

func (e *InDoubtError) Error() string {
	return fmt.Sprintf("agent: the call of %s with key %s was in flight when the process stopped; it is not run again", e.Tool, e.IdempotencyKey)
}

// notIdempotent reports whether calls of tool must not run twice.
func (cfg Config) notIdempotent(tool string) bool {
	return cfg.NotIdempotent != nil && cfg.NotIdempotent(tool)
}

// toolStep is fn, the step of call j of model call turn, made ready to run: for a tool declared
// not idempotent, the started mark is recorded first (it becomes durable with the step's start,
// before the tool is called), and a step whose mark an earlier process recorded runs no tool: its
// outcome is the call in doubt. Then the tool timeout bounds it (timedTool).
//
// The mark is pending until the step's start commits it; should the pending writes overflow in
// between (kernel maxPend) the mark alone may be durable, and a crash then leaves in doubt a call
// that never started: the error is on the side of not calling twice.
func toolStep(c *kernel.Context, cfg Config, turn, j int, call model.ToolCall, fn kernel.StepFunc) (kernel.StepFunc, error) {
	if cfg.notIdempotent(call.Name) {
		key := idempotencyKey(c.ID(), toolStepID(cfg.LoopID, turn, j), call)
		fresh := false
		if _, err := c.Decide(toolStartedID(cfg.LoopID, turn, j), func() (json.RawMessage, error) {
			fresh = true
			return json.Marshal(key)
		}); err != nil {
			return nil, err
		}
		if !fresh {
			// The mark was recorded before this process: the step runs only when no outcome was
			// recorded, so the call was in flight at the stop.
			fn = inDoubtStep(cfg, call.Name, key)
		}
	}
	return timedTool(c, cfg, turn, j, fn)
}

// inDoubtStep is the step of a call in doubt: it calls nothing and records the call in doubt,
// under an error id derived from its key, so that a replay names the same incident.
func inDoubtStep(cfg Config, tool, key string) kernel.StepFunc {
	return func(context.Context) (json.RawMessage, error) {
		d := InDoubt{Class: ClassEffectInDoubt, Tool: tool, IdempotencyKey: key}
		id := "err_" + key[:24]
		if cfg.OnError != nil {
			cfg.OnError(id, &InDoubtError{d})
		}
		return json.Marshal(toolOutcome{Error: ClassEffectInDoubt, ErrorID: id, InDoubt: &d})
	}
}

// endInDoubt ends the run when a call of the response is in doubt: Failed, reason
// ReasonEffectInDoubt, naming the first such call. The outcome is never fed back to the model:
// a model told that a payment may not have happened could well ask for it again. The log keeps
// the calls of the response that ran to an outcome.
func endInDoubt(calls []model.ToolCall, outs []toolOutcome, res *Result) bool {
	var first *toolOutcome
	for j := range outs {
		if outs[j].InDoubt != nil {
			first = &outs[j]
			break
		}
	}
	if first == nil {
		return false
	}
	for j, o := range outs {
		if !o.NotRun && o.InDoubt == nil {
			res.Calls = append(res.Calls, logEntry(calls[j], o))
		}
	}
	res.Status, res.Reason, res.ErrorID, res.InDoubt = Failed, ReasonEffectInDoubt, first.ErrorID, first.InDoubt
	return true
}
