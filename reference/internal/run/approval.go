package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// StatusWaiting is the status of a run parked for a person: a call waits at its approval gate,
// or a human tool waits for its answer (View.Pending says which).
const StatusWaiting = "waiting"

// WarnRequireApproval is the code of the warning the first start that uses requireApproval gets
// from a Runs (one per engine: per process with the process driver).
const WarnRequireApproval = "LOOM_AGENT_REQUIRE_APPROVAL_DEPRECATED"

// ApprovalRule is the one effective approval rule of a run, whichever option spelled it: the
// journal holds this, never the spelling, so the same effective decision records the same log.
// Tools gives a verdict per tool name (true: the call waits for a person); a tool it does not
// name gets Default. A nil rule parks nothing.
type ApprovalRule struct {
	Default bool            `json:"default"`
	Tools   map[string]bool `json:"tools,omitempty"`
}

// Parks reports whether a call of tool waits for a person's approval.
func (r *ApprovalRule) Parks(tool string) bool {
	if r == nil {
		return false
	}
	if v, ok := r.Tools[tool]; ok {
		return v
	}
	return r.Default
}

// NeedsApprovalRule is the effective rule of needsApproval: true parks every call, false none,
// and per tool true parks and false runs, a tool not named parks (fails closed). It returns nil
// for false.
//
//	r := run.NeedsApprovalRule(false, map[string]bool{"lookup": false}) // transfer parks
func NeedsApprovalRule(all bool, tools map[string]bool) *ApprovalRule {
	if tools == nil && !all {
		return nil
	}
	if tools == nil {
		return &ApprovalRule{Default: true}
	}
	return &ApprovalRule{Default: true, Tools: tools}
}

// RequireApprovalRule is the effective rule of the deprecated requireApproval, whose polarity
// is the old one: true means a call runs on its own, false that it waits; per tool the same, a
// tool not named waits. RequireApprovalRule(x, m) equals NeedsApprovalRule(!x, m inverted).
//
//	r := run.RequireApprovalRule(false, map[string]bool{"lookup": true}) // transfer parks
func RequireApprovalRule(all bool, tools map[string]bool) *ApprovalRule {
	if tools == nil {
		return NeedsApprovalRule(!all, nil)
	}
	inv := make(map[string]bool, len(tools))
	for k, v := range tools {
		inv[k] = !v
	}
	return NeedsApprovalRule(false, inv)
}

// Warning is a warning the start answer carries.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Pending is a call that waits for a person, as the run's owner reads it: Kind "approval" (its
// gate id answers it at /approvals/{id}) or "human" (/human/{id}).
type Pending struct {
	Kind      string          `json:"kind"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ErrNotPending: the gate or human call answered is not waiting for an answer (never asked,
// answered otherwise already, or the run has ended). Its HTTP answer is 409 conflict with
// detail "not pending".
var ErrNotPending = fmt.Errorf("%w: not pending", loomtype.ErrConflict)

// checkApproval checks the approval rule's tool names; field is the option that spelled it.
func (rs *Runs) checkApproval(opt Options) error {
	if opt.Approval == nil {
		return nil
	}
	field := "needsApproval"
	if opt.RequireApproval {
		field = "requireApproval"
	}
	for name := range opt.Approval.Tools {
		if !rs.knows(name) {
			return loomtype.BadRequest(field, "")
		}
	}
	return nil
}

// warnings returns the deprecation warning for the first start of this Runs that uses
// requireApproval, and nil for every other start.
func (rs *Runs) warnings(opt Options) []Warning {
	if !opt.RequireApproval || !rs.warned.CompareAndSwap(false, true) {
		return nil
	}
	return []Warning{{Code: WarnRequireApproval, Message: "requireApproval is deprecated: use needsApproval (true parks a call for a person)"}}
}

// parkingConfig sets the loop's approval rule and human tools.
func (rs *Runs) parkingConfig(cfg *agent.Config, opt Options) {
	if rule := opt.Approval; rule != nil {
		cfg.NeedsApproval = func(call model.ToolCall) bool { return rule.Parks(call.Name) }
	}
	if len(rs.deps.Human) > 0 {
		human := map[string]bool{}
		for _, n := range rs.deps.Human {
			human[n] = true
		}
		cfg.Human = func(tool string) bool { return human[tool] }
	}
}

// parked reads what the open run waits for and how its parked calls were answered.
func (rs *Runs) parked(ctx context.Context, info kernel.Info) ([]agent.Park, map[string]agent.Answered, error) {
	var evs []kernel.LogEvent
	var after int64
	for {
		page, err := rs.k.ReadLog(ctx, info.ID, info.Gen, after, kernel.MaxRead)
		if err != nil {
			return nil, nil, err
		}
		evs = append(evs, page...)
		if len(page) < kernel.MaxRead {
			break
		}
		after = page[len(page)-1].Seq
	}
	p, a := agent.Parked(evs)
	return p, a, nil
}

// pendingView fills an open run's view with what it waits for.
func (rs *Runs) pendingView(ctx context.Context, info kernel.Info, v *View) error {
	parks, _, err := rs.parked(ctx, info)
	if err != nil {
		return err
	}
	for _, p := range parks {
		v.Pending = append(v.Pending, Pending{Kind: p.Kind, ID: p.ID, Name: p.Name, Arguments: p.Arguments})
	}
	if len(v.Pending) > 0 {
		v.Status = StatusWaiting
	}
	return nil
}

// answerWait bounds how long an answer waits for the run to take an answer delivered before.
const answerWait = 5 * time.Second

// answer delivers an answer to the parked call id of kind, or finds it answered: same reports
// whether an earlier answer is this one.
func (rs *Runs) answer(ctx context.Context, owner loomtype.Identity, runID, kind, id string, payload json.RawMessage,
	same func(agent.Answered) bool) (View, error) {
	info, err := rs.owned(ctx, owner, runID)
	if err != nil {
		return View{}, err
	}
	look := func() (asked, answered bool, a agent.Answered, err error) {
		parks, done, err := rs.parked(ctx, info)
		if err != nil {
			return false, false, a, err
		}
		if a, ok := done[agent.AnswerKey(kind, id)]; ok {
			return true, true, a, nil
		}
		for _, p := range parks {
			if p.ID == id && p.Kind == kind {
				return true, false, a, nil
			}
		}
		return false, false, a, nil
	}
	asked, answered, a, err := look()
	if err != nil {
		return View{}, err
	}
	if !asked || !answered && info.State != kernel.StateOpen {
		return View{}, ErrNotPending
	}
	if !answered {
		name := agent.ApprovalSignal(id)
		if kind == agent.KindHuman {
			name = agent.HumanSignal(id)
		}
		delivered, err := rs.k.Signal(ctx, runID, name, "answer", payload)
		if errors.Is(err, loomtype.ErrClosed) {
			return View{}, ErrNotPending
		} else if err != nil {
			return View{}, err
		}
		// Wait (bounded) until the run has taken the answer, so the answer is judged against
		// the one that counts and the view shows the run past it.
		deadline := time.Now().Add(answerWait)
		for !answered && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return View{}, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
			if info, err = rs.k.Info(ctx, runID); err != nil {
				return View{}, err
			}
			if _, answered, a, err = look(); err != nil {
				return View{}, err
			}
			if info.State != kernel.StateOpen {
				break
			}
		}
		if !answered && !delivered {
			return View{}, ErrNotPending // an earlier answer is on its way, and not known to be this one
		}
	}
	if answered && !same(a) {
		return View{}, ErrNotPending
	}
	return rs.Get(ctx, owner, runID)
}

// Approve answers the approval gate of a waiting run: approved, the call runs; denied, it never
// runs and the model is told agent.NotApproved. Answering a gate again the same way changes
// nothing and answers the same.
//
// Errors: ErrNotFound (someone else's run too), ErrNotPending (the gate was never asked, was
// answered the other way, or the run has ended), kernel and store errors.
//
//	v, err := rs.Approve(ctx, alice, id, "t1-c0", true)
func (rs *Runs) Approve(ctx context.Context, owner loomtype.Identity, runID, gate string, approved bool) (View, error) {
	payload, _ := json.Marshal(agent.Approval{Approved: approved})
	return rs.answer(ctx, owner, runID, agent.KindApproval, gate, payload, func(a agent.Answered) bool { return a.Approved == approved })
}

// AnswerHuman answers the human call of a waiting run with result, the call's result. The
// answer is consumed once: answering again with the same result changes nothing.
//
// Errors: ErrNotFound, ErrNotPending (not asked, answered with another result, or the run has
// ended), kernel and store errors.
//
//	v, err := rs.AnswerHuman(ctx, alice, id, "t1-c0", json.RawMessage(`{"answer":"yes"}`))
func (rs *Runs) AnswerHuman(ctx context.Context, owner loomtype.Identity, runID, call string, result json.RawMessage) (View, error) {
	return rs.answer(ctx, owner, runID, agent.KindHuman, call, result, func(a agent.Answered) bool {
		return canonical(a.Result) == canonical(result)
	})
}

// canonical is raw re-encoded (object keys sorted), raw itself if it is not JSON.
func canonical(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
