// Package run is the agent run: one durable execution of the canonical agent loop
// (reference/internal/agent), started with its options, read back, aborted by its own signal or cancelled
// by the kernel.
//
// A run belongs to the identity that started it; every other identity is told it does not exist
// (loomtype.ErrNotFound), whichever field of the identity differs. A run started under an id its
// owner chose starts once: starting it again returns the run that exists.
//
// Abort is the run's signal: the loop looks at it at every checkpoint (before each model call
// and each tool call, and during a model call) through recorded decisions, so a replay takes
// the same branch; the execution itself ends normally, with status aborted and what the run had
// done. Cancel is the kernel's: the execution stops at its next frame and the step or decider in
// flight has its context cancelled.
package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// FlowName is the kernel flow of a run.
const FlowName = "agent.run"

// Statuses of a run.
const (
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusFailed    = "failed"
	StatusAborted   = "aborted"
	StatusCanceled  = "canceled"
)

// ToolErrors modes.
const (
	ToolErrorsFeedback = "feedback"
	ToolErrorsFail     = "fail"
)

// DefaultMaxIterations bounds the model calls of a run whose options set none.
const DefaultMaxIterations = 8

// abortSignal is the kernel signal name the run's abort is delivered under.
const abortSignal = "abort"

// loopID prefixes every decision and step of a run's loop.
const loopID = "run"

// Options are what a run is started with. Parallel is 0 (one call at a time), -1 (every call of
// a response at once) or a positive bound.
type Options struct {
	// ID is the caller's id for the run (empty: the system makes one).
	ID            string         `json:"id,omitempty"`
	Prompt        string         `json:"prompt"`
	History       []HistoryEntry `json:"history,omitempty"`
	Tools         []string       `json:"tools,omitempty"`
	Parallel      int            `json:"parallel,omitempty"`
	ToolErrors    string         `json:"toolErrors,omitempty"`
	MaxIterations int            `json:"maxIterations,omitempty"`
	WriteBack     *WriteBack     `json:"writeBack,omitempty"`
	// Recall recalls the owner's memory once, before the first model call (recall.go).
	Recall bool `json:"recall,omitempty"`
	// CacheScope is the partition of the response cache the run's model calls use (with the
	// run's owner); required when the system caches responses (Deps.Cache).
	CacheScope string `json:"cacheScope,omitempty"`
	// TurnTimeoutMs bounds each model call and ToolTimeoutMs each tool call, from the call's
	// first logged start (0: no bound).
	TurnTimeoutMs int64 `json:"turnTimeoutMs,omitempty"`
	ToolTimeoutMs int64 `json:"toolTimeoutMs,omitempty"`
	// Runner is RunnerLoop (also when empty) or the deprecated RunnerSingleFrame;
	// AcceptAtLeastOnce lets the single frame run tools declared idempotent: false.
	Runner            string `json:"runner,omitempty"`
	AcceptAtLeastOnce bool   `json:"acceptAtLeastOnce,omitempty"`
	// Approval is the run's effective approval rule (approval.go), whichever option spelled
	// it; RequireApproval says the deprecated spelling was used (not journaled).
	Approval        *ApprovalRule `json:"approval,omitempty"`
	RequireApproval bool          `json:"-"`
}

// HistoryEntry is one message before the prompt.
type HistoryEntry struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// View is what a run's owner reads.
type View struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Output is the final answer of a completed run.
	Output *string `json:"output,omitempty"`
	// ToolCalls is the tool-call log, in the model's order.
	ToolCalls []agent.Call `json:"toolCalls"`
	// Interrupted is what an aborted run had done.
	Interrupted *Interrupted    `json:"interrupted,omitempty"`
	Reason      loomtype.Reason `json:"reason,omitempty"`
	ErrorID     string          `json:"errorId,omitempty"`
	// Terminal names the terminal tool failure that ended a failed run.
	Terminal *agent.TerminalStop `json:"terminal,omitempty"`
	// InDoubt names the call in doubt that ended a failed run (reason "effect-in-doubt").
	InDoubt *agent.InDoubt `json:"inDoubt,omitempty"`
	// Pending are the calls a waiting run waits for a person on (approval.go).
	Pending []Pending `json:"pending,omitempty"`
	// Warnings are on the start answer only (approval.go).
	Warnings []Warning `json:"warnings,omitempty"`
}

// Interrupted is the payload of an aborted run.
type Interrupted struct {
	Content        string       `json:"content"`
	Iterations     int          `json:"iterations"`
	CompletedCalls []agent.Call `json:"completedCalls"`
}

// Deps connect runs to the world.
type Deps struct {
	Provider model.Provider
	Model    string
	// Tools are the tools the system knows; a run may name a subset.
	Tools  []model.Tool
	Runner agent.ToolRunner
	// Allowed reports whether who may call tool (nil: every tool). A run asks it for each
	// configured tool when it starts and keeps the answers (grants.go).
	Allowed func(who loomtype.Identity, tool string) bool
	// MaxIterations is the most model calls a run may ask for (0:
	// DefaultMaxIterationsCeiling); more is a 400 naming maxIterations.
	MaxIterations int
	// OnError receives the real error behind a failed model call, with its errorId.
	OnError func(errorID string, err error)
	// Memory is the agent memory a run's write-back writes to and its recall asks (nil: none,
	// and writeBack and recall are refused).
	Memory hostio.Memory
	// Cache, if set, keeps model responses per owner and cacheScope; every run must then name
	// its cacheScope.
	Cache Cache
	// NotIdempotent names the tools declared idempotent: false: the single-frame runner refuses
	// them, and the canonical loop never calls one twice for a call a crash cut off.
	NotIdempotent []string
	// Human names the tools a person answers (kind human, approval.go).
	Human []string
}

// Runs is the run client and its flow. Register Flows on the kernel, then Bind the kernel.
// Safe for concurrent use after Bind.
type Runs struct {
	deps   Deps
	k      *kernel.Kernel
	warned atomic.Bool // the requireApproval warning was given (approval.go)
}

// New returns the runs over deps.
//
//	rs := run.New(run.Deps{Provider: p, Tools: tools, Runner: runner})
//	k, _ := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows()})
//	rs.Bind(k)
func New(deps Deps) *Runs {
	if deps.Provider == nil {
		deps.Provider = model.Builtin()
	}
	return &Runs{deps: deps}
}

// UseCache puts c in the place of the cache New was given (Deps.Cache): call it only when that
// was set, before Bind, for a cache that can only be opened once the store is (StoredCache).
func (rs *Runs) UseCache(c Cache) {
	if rs.deps.Cache != nil && c != nil {
		rs.deps.Cache = c
	}
}

// Flows returns the kernel flow of a run; it reaches the kernel through its Context, so a run the
// kernel recovers while it opens needs nothing bound yet.
//
//	k, err := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows()})
func (rs *Runs) Flows() map[string]kernel.Flow { return map[string]kernel.Flow{FlowName: rs.flow} }

// Bind gives the client the kernel the flow is registered on; call it once, before Start, Get,
// Abort or Cancel (kernel.Options.BeforeRecovery is a good place).
//
//	k, err := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows(), BeforeRecovery: rs.Bind})
func (rs *Runs) Bind(k *kernel.Kernel) { rs.k = k }

// Errors of the runs.
var (
	// ErrNotFound: no run of the caller's under that id (also every run of someone else's).
	ErrNotFound = loomtype.ErrNotFound
	// ErrEnded: the run has ended; it cannot be aborted or cancelled (loomtype.ErrClosed).
	ErrEnded = loomtype.ErrClosed
)

// ValidID reports whether id may be a run id a caller chooses: 1 to 96 characters, letters,
// digits, '.', '_' and '-', the first a letter or a digit.
func ValidID(id string) bool { return loomtype.ValidName(id, 96) }

// runID is the run id of the caller-chosen id under owner: the chosen id and a digest over the
// whole identity, so identities that differ in any field never share a run; the ':' keeps run
// ids apart from conversation ids, which hold none.
func runID(owner loomtype.Identity, chosen string) string {
	b, _ := json.Marshal(owner)
	h := sha256.Sum256(append(append(b, 0), chosen...))
	return "run:" + chosen + ":" + hex.EncodeToString(h[:12])
}

// ChosenID is the id of the run owner starts under the chosen id chosen (a ValidID), so that a
// node can tell the run's partition before it starts.
func ChosenID(owner loomtype.Identity, chosen string) string { return runID(owner, chosen) }

type input struct {
	Owner   loomtype.Identity `json:"owner"`
	Options Options           `json:"options"`
	// Grants are the tools the owner was granted when the run started (nil: every tool).
	Grants *agent.Grants `json:"grants,omitempty"`
}

// Start starts a run, or returns the run that already exists under the same chosen id of the
// same owner (created false). Options are checked first.
//
// Errors: loomtype.ErrUnauthenticated for an invalid owner, a *loomtype.BadRequestError naming
// the option that is wrong (an id outside ValidID is the option "id": spec/openapi.yaml answers
// every refusal of a run request as bad request), kernel and store errors.
//
//	v, created, err := rs.Start(ctx, alice, run.Options{Prompt: "check pump 3"})
func (rs *Runs) Start(ctx context.Context, owner loomtype.Identity, opt Options) (View, bool, error) {
	if !owner.Valid() {
		return View{}, false, loomtype.ErrUnauthenticated
	}
	if err := rs.check(opt); err != nil {
		return View{}, false, err
	}
	grants := rs.grantsOf(owner)
	if err := checkGranted(grants, opt); err != nil {
		return View{}, false, err
	}
	var id string
	if opt.ID == "" {
		id = rs.k.Mint(func() string { return "run:" + loomtype.NewErrorID()[4:] }) // in this engine's partition
	} else if !ValidID(opt.ID) {
		return View{}, false, loomtype.BadRequest("id", "")
	} else {
		id = runID(owner, opt.ID)
	}
	in, _ := json.Marshal(input{Owner: owner, Options: opt, Grants: grants})
	_, err := rs.k.Start(ctx, kernel.StartRequest{ID: id, Flow: FlowName, Input: in, Principal: owner})
	created := true
	if errors.Is(err, loomtype.ErrAlreadyStarted) {
		created = false
	} else if err != nil {
		return View{}, false, err
	}
	v, err := rs.Get(ctx, owner, id)
	if err == nil {
		v.Warnings = rs.warnings(opt)
	}
	return v, created, err
}

func (rs *Runs) check(opt Options) error {
	if opt.Prompt == "" {
		return loomtype.BadRequest("prompt", "")
	}
	for _, h := range opt.History {
		if h.Role != model.RoleUser && h.Role != model.RoleAssistant {
			return loomtype.BadRequest("history", "")
		}
	}
	for _, name := range opt.Tools {
		if !rs.knows(name) {
			return loomtype.BadRequest("tools", "")
		}
	}
	if opt.Parallel < -1 {
		return loomtype.BadRequest("parallelTools", "")
	}
	switch opt.ToolErrors {
	case "", ToolErrorsFeedback, ToolErrorsFail:
	default:
		return loomtype.BadRequest("toolErrors", "")
	}
	if err := rs.checkMaxIterations(opt); err != nil {
		return err
	}
	if err := rs.checkWriteBack(opt.WriteBack); err != nil {
		return err
	}
	if err := rs.checkRecall(opt); err != nil {
		return err
	}
	if err := rs.checkCacheScope(opt); err != nil {
		return err
	}
	if err := checkTimeouts(opt); err != nil {
		return err
	}
	if err := checkRunner(opt); err != nil {
		return err
	}
	return rs.checkApproval(opt)
}

func (rs *Runs) knows(name string) bool {
	for _, t := range rs.deps.Tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// NotFoundFloor is the least time a refusal of a run takes, counted from when it began, whichever
// path refused (no such run, another flow's execution, someone else's run): the same floor as a
// conversation's (conversation.NotFoundFloor). What makes the paths cost the same is that both
// read and decode the execution record from the store; the floor only evens out what is left.
const NotFoundFloor = 200 * time.Microsecond

// owned returns the run's record if owner owns it, else ErrNotFound (the same for a run that
// does not exist, another flow's execution, and someone else's run). Whatever the kernel holds in
// memory, it reads the record from the store (a missing one is decoded all the same, as a
// stand-in), and a refusal takes at least NotFoundFloor: a run that exists and is not the
// caller's costs what one that does not exist costs.
func (rs *Runs) owned(ctx context.Context, owner loomtype.Identity, id string) (kernel.Info, error) {
	start := time.Now()
	stored, err := rs.k.StoredInfo(ctx, id)
	if err != nil && !errors.Is(err, loomtype.ErrNotFound) && !errors.Is(err, kernel.ErrUnreadable) {
		return kernel.Info{}, err
	}
	if err != nil || stored.Flow != FlowName || !owner.Valid() || !stored.Principal.Equal(owner) {
		notFoundFloor(ctx, start)
		return kernel.Info{}, ErrNotFound
	}
	info, err := rs.k.Info(ctx, id) // the live record: its state may be newer than the stored one
	if errors.Is(err, loomtype.ErrNotFound) {
		notFoundFloor(ctx, start)
		return kernel.Info{}, ErrNotFound
	}
	return info, err
}

// notFoundFloor waits until NotFoundFloor has passed since start, or ctx ends.
func notFoundFloor(ctx context.Context, start time.Time) {
	if d := time.Until(start.Add(NotFoundFloor)); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// Get reads a run.
//
// Errors: ErrNotFound, kernel and store errors.
//
//	v, err := rs.Get(ctx, alice, id)
func (rs *Runs) Get(ctx context.Context, owner loomtype.Identity, id string) (View, error) {
	info, err := rs.owned(ctx, owner, id)
	if err != nil {
		return View{}, err
	}
	v := View{ID: id, Status: StatusRunning, ToolCalls: []agent.Call{}}
	switch info.State {
	case kernel.StateOpen:
		if err := rs.pendingView(ctx, info, &v); err != nil {
			return View{}, err
		}
	case kernel.StateCompleted:
		var out View
		if err := json.Unmarshal(info.Output, &out); err != nil {
			return View{}, fmt.Errorf("run: %s: output: %w", id, err)
		}
		out.ID = id
		if out.ToolCalls == nil {
			out.ToolCalls = []agent.Call{}
		}
		v = out
	case kernel.StateCanceled:
		v.Status = StatusCanceled
	default:
		v.Status, v.Reason = StatusFailed, loomtype.ReasonTurnFailed
	}
	return v, nil
}

// Abort fires the run's signal: the loop stops at its next checkpoint and the run ends aborted.
// Aborting again changes nothing.
//
// Errors: ErrNotFound, ErrEnded for a run that has ended, kernel and store errors.
//
//	err := rs.Abort(ctx, alice, id)
func (rs *Runs) Abort(ctx context.Context, owner loomtype.Identity, id string) error {
	info, err := rs.owned(ctx, owner, id)
	if err != nil {
		return err
	}
	if info.State != kernel.StateOpen {
		return ErrEnded
	}
	_, err = rs.k.Signal(ctx, id, abortSignal, "abort", nil)
	if errors.Is(err, loomtype.ErrClosed) {
		return ErrEnded
	}
	return err
}

// Cancel cancels the run's execution (kernel.Kernel.Cancel).
//
// Errors: ErrNotFound, ErrEnded for a run that has ended, kernel and store errors.
//
//	err := rs.Cancel(ctx, alice, id)
func (rs *Runs) Cancel(ctx context.Context, owner loomtype.Identity, id string) error {
	info, err := rs.owned(ctx, owner, id)
	if err != nil {
		return err
	}
	if info.State != kernel.StateOpen {
		return ErrEnded
	}
	err = rs.k.Cancel(ctx, id, "canceled by its owner")
	if errors.Is(err, loomtype.ErrClosed) {
		return ErrEnded
	}
	return err
}

// flow is the body of a run: the loop with the run's options and its abort signal.
func (rs *Runs) flow(c *kernel.Context, raw json.RawMessage) (json.RawMessage, error) {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("run: input: %w", err)
	}
	opt := in.Options
	msgs := make([]model.Message, 0, len(opt.History)+1)
	for _, h := range opt.History {
		msgs = append(msgs, model.Message{Role: h.Role, Content: h.Content})
	}
	msgs = append(msgs, model.Message{Role: model.RoleUser, Content: opt.Prompt})
	tools := rs.deps.Tools
	if opt.Tools != nil {
		tools = nil
		for _, t := range rs.deps.Tools {
			for _, name := range opt.Tools {
				if t.Name == name {
					tools = append(tools, t)
				}
			}
		}
	}
	sig := abortWatch(c)
	defer sig.Disarm()
	owner := in.Owner
	cfg := agent.Config{LoopID: loopID, Provider: rs.provider(owner, opt), Model: rs.deps.Model, Tools: tools,
		Runner: rs.deps.Runner, MaxIterations: rs.maxIterations(opt), Parallel: opt.Parallel != 0, Signal: sig,
		FailOnToolError: opt.ToolErrors == ToolErrorsFail, OnError: rs.deps.OnError,
		NotIdempotent: func(tool string) bool { return slices.Contains(rs.deps.NotIdempotent, tool) }}
	if opt.Parallel > 0 {
		cfg.MaxParallel = opt.Parallel
	}
	cfg.TurnTimeout, cfg.ToolTimeout = timeouts(opt)
	rs.parkingConfig(&cfg, opt)
	rs.grantsConfig(&cfg, owner, in)
	cfg.Principal, cfg.TaintToolErrors = &owner, true
	msgs, err := rs.recall(c, owner, opt, msgs)
	if err != nil {
		return nil, err
	}
	res, err := rs.runLoop(c, cfg, opt, msgs)
	if err != nil {
		return nil, err
	}
	if err := rs.writeBack(c, cfg, owner, opt, &res); err != nil {
		return nil, err
	}
	return json.Marshal(viewOf(res))
}

// abortWatch is the signal that stops the run in flow context c: it fires once the run's abort
// signal is pending, whether it was before the run started or comes while it runs.
func abortWatch(c *kernel.Context) *agent.Signal {
	return agent.NewSignal(func(s *agent.Signal) {
		pending := func() bool {
			_, ok, err := c.PendingSignal(abortSignal)
			return err == nil && ok
		}
		s.SetProbe(pending)
		ch, stop := c.WatchSignal(abortSignal)
		done := make(chan struct{})
		s.OnDisarm(func() { close(done); stop() })
		if pending() {
			s.Fire()
			return
		}
		go func() {
			for {
				select {
				case <-ch:
					if pending() {
						s.Fire()
						return
					}
				case <-done:
					return
				}
			}
		}()
	})
}

// viewOf is the view of a run that ended with res.
func viewOf(res agent.Result) View {
	v := View{ToolCalls: res.Calls, Reason: reasonOf(res), ErrorID: res.ErrorID, Terminal: res.Terminal, InDoubt: res.InDoubt}
	if v.ToolCalls == nil {
		v.ToolCalls = []agent.Call{}
	}
	switch res.Status {
	case agent.Complete:
		v.Status = StatusCompleted
		text := res.Text
		v.Output = &text
	case agent.Interrupted:
		v.Status = StatusAborted
		v.Interrupted = &Interrupted{Content: res.Text, Iterations: res.Iterations, CompletedCalls: v.ToolCalls}
	default:
		v.Status = StatusFailed
	}
	return v
}
