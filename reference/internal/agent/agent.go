// Package agent is the canonical agent loop: ask the model, run the tools it asks for, feed
// their results (failures included) back, repeat until it answers.
//
// The loop runs inside a kernel execution. Every model response is a recorded decision, so a
// replay serves what the model said and never asks it again; every tool call is a journaled step,
// so a completed call is served from the log and a call that was in flight at a crash runs again
// with the same idempotency key, unless its tool is declared not idempotent: such a call is in
// doubt, never run again, and ends the run (indoubt.go). With a Signal configured, the loop checks it before every model
// call and every tool call through recorded decisions (abort checkpoints), and a signal that
// fires during a model call is recorded with the partial text, so a replay takes the same branch
// without any signal at all.
package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Outcome of a run.
const (
	Complete    = loomtype.StatusComplete
	Interrupted = loomtype.StatusInterrupted
	Failed      = loomtype.StatusFailed
)

// MaxErrorText bounds the text of a tool failure fed back to the model, in characters (Unicode
// code points, as ADR 0121 counts them): whatever the encoding, at most the first 2 000.
const MaxErrorText = 2000

// MaxResponseChars bounds the text of a recorded model response; past it the text is cut, the
// same way every time, and CutMarker appended. What is recorded is what a replay serves.
const MaxResponseChars = 256 << 10

// CutMarker ends a response text that was cut to MaxResponseChars.
const CutMarker = " [cut]"

// ToolRunner runs tools. Call returns the tool's JSON result, or an error: a *ToolError for a
// failure the model may read and react to, anything else is treated the same way but its text is
// bounded to MaxErrorText.
type ToolRunner interface {
	Call(ctx context.Context, name string, args json.RawMessage, idempotencyKey string) (json.RawMessage, error)
}

// ToolError is a failure a tool reported.
type ToolError struct {
	Status  int
	Message string
	// Failure is the typed failure the tool raised, when its answer carried one.
	Failure *Failure
}

func (e *ToolError) Error() string { return fmt.Sprintf("tool failed (%d): %s", e.Status, e.Message) }

// Config configures one run of the loop.
type Config struct {
	// LoopID prefixes every decision and step id of the run; two runs in one execution must not
	// share it.
	LoopID   string
	Provider model.Provider
	Model    string
	Tools    []model.Tool
	Runner   ToolRunner
	// Allowed reports whether the run's principal may call a tool. nil allows every tool. A
	// denied call fails the run with reason "denied"; it is never fed back to the model.
	Allowed func(tool string) bool
	// Grants, if set, are the tools the run's principal is granted; a call of any other is
	// denied as Allowed's are (Permitted checks both). nil: every tool.
	Grants        *Grants
	MaxIterations int
	// Parallel runs one response's tool calls concurrently.
	Parallel bool
	// MaxParallel bounds how many of one response's tool calls run at once when Parallel is
	// set (0: all of them).
	MaxParallel int
	// FailOnToolError ends the run Failed (reason ReasonToolFailed) on the first response
	// whose tool calls include a failure, with no further model call, instead of feeding the
	// failure back.
	FailOnToolError bool
	// Principal, if set, is who the run acts for: every tool call carries it (WithPrincipal).
	Principal *loomtype.Identity
	// TaintToolErrors records an ordinary failure as remote text and fences it as data in
	// the next model request (fencedContent), on every replay too.
	TaintToolErrors bool
	// Signal, if set, can interrupt the run (a barge-in). nil means no abort checkpoints.
	Signal *Signal
	// AbortDrain is how long a model call goes on reading after Signal fires before it is
	// cancelled, so that words the model sent before the abort and still waiting to be read
	// are kept in the partial text (0: DefaultAbortDrain; negative: cancel at once). Words
	// read in that time are kept but not passed to OnDelta; an answer that ends in that time
	// ended before the cancel and is recorded whole.
	AbortDrain time.Duration
	// OnDelta receives streamed text of live model calls (never of replayed ones).
	OnDelta func(text string)
	// OnLive is called before each live (not replayed) model call.
	OnLive func()
	// OnTool, if set, is told of each tool call as it starts and as it ends, live only (a
	// replayed call's recorded outcome is not announced again).
	OnTool func(ToolEvent)
	// OnError receives the real error of a failed model call, once, with the error id that the
	// record carries instead.
	OnError func(errorID string, err error)
	// TurnTimeout bounds each model call, and ToolTimeout each tool call, counted from the
	// call's first logged start (a recorded deadline), so a call a crash cut off resumes its
	// countdown. A model call out of time fails the run (Result.TimedOut); a tool call out of
	// time is the error result TimeoutText. 0: no bound, and no deadline recorded.
	TurnTimeout, ToolTimeout time.Duration
	// Now is the clock of the deadlines (nil: time.Now).
	Now func() time.Time

	turnDue time.Time // the deadline of the model call in progress
	// NeedsApproval reports whether a call waits for a person's approval before it runs
	// (approval.go). nil: no call does.
	NeedsApproval func(call model.ToolCall) bool
	// Human reports whether a tool is answered by a person (approval.go). nil: no tool is.
	Human func(tool string) bool
	// NotIdempotent reports whether a tool is declared idempotent: false: a call of it that a
	// crash cut off is in doubt and never runs again (indoubt.go). nil: no tool is.
	NotIdempotent func(tool string) bool
}

// Result is how a run ended.
type Result struct {
	Status loomtype.RecordStatus
	// Text is the answer (Complete) or the partial text of the interrupted generation.
	Text    string
	Reason  loomtype.Reason
	ErrorID string
	// Tools lists the tools the run called, in order (denied ones included).
	Tools []string
	// Calls is the tool-call log: every call that ran to an outcome, in the order the model
	// asked for them (one response's calls by their position in it, whichever ended first).
	Calls []Call
	// Iterations counts the model calls the run made (recorded ones included).
	Iterations int
	// TimedOut says a Failed run's last model call ran out of Config.TurnTimeout; its Reason is
	// then ReasonModelError.
	TimedOut bool
	// TooLarge says a Failed run's last model response held tool calls over the cap
	// (ResponseTooLargeError); its Reason is then ReasonModelError.
	TooLarge bool
	// Terminal names the terminal failure that ended the run (Reason ReasonToolTerminal).
	Terminal *TerminalStop
	// InDoubt names the call in doubt that ended the run (Reason ReasonEffectInDoubt).
	InDoubt *InDoubt
}

// Call is one entry of the tool-call log.
type Call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	OK        bool            `json:"ok"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// ReasonToolFailed is the reason of a run that Config.FailOnToolError ended.
const ReasonToolFailed loomtype.Reason = "tool-failed"

type response struct {
	Content     string           `json:"content,omitempty"`
	ToolCalls   []model.ToolCall `json:"toolCalls,omitempty"`
	Interrupted bool             `json:"interrupted,omitempty"`
	Partial     string           `json:"partial,omitempty"`
	Failed      bool             `json:"failed,omitempty"`
	TimedOut    bool             `json:"timedOut,omitempty"`
	ErrorID     string           `json:"errorId,omitempty"`
}

// ToolEvent is a tool call starting (Done false) or ending, as Config.OnTool is told of it.
type ToolEvent struct {
	Call, Tool string
	Done, OK   bool
	Output     json.RawMessage
	Error      string
}

type toolOutcome struct {
	OK      bool            `json:"ok"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   string          `json:"error,omitempty"`
	Denied  bool            `json:"denied,omitempty"`
	ErrorID string          `json:"errorId,omitempty"`
	// Terminal: the failure is terminal, never fed back; Tainted: the failure's text is
	// remote data, fenced when fed back; NotRun: the call did nothing, because the fail-fast
	// scope stopped it or because it was to start after the run was aborted.
	Terminal *TerminalStop `json:"terminal,omitempty"`
	Tainted  string        `json:"tainted,omitempty"`
	NotRun   bool          `json:"notRun,omitempty"`
	// InDoubt: the call was in flight at a crash and its tool is declared not idempotent; it
	// was not run again and ends the run.
	InDoubt *InDoubt `json:"inDoubt,omitempty"`
}

// Run runs the loop on messages (the system prompt, the history and the prompt, already
// composed). It returns an error only when the execution cannot go on (the kernel stopped, the
// replay diverged, the store failed); every outcome of the turn itself is in the Result.
//
//	res, err := agent.Run(c, agent.Config{LoopID: "conv#o3", Provider: p}, msgs)
//	if err != nil { return err }
//	fmt.Println(res.Status, res.Text)
func Run(c *kernel.Context, cfg Config, messages []model.Message) (Result, error) {
	if cfg.MaxIterations <= 0 {
		cfg.MaxIterations = 8
	}
	// The loop appends to its own messages; clipped, the first append copies them, and the
	// caller's slice is never written.
	msgs := messages[:len(messages):len(messages)]
	var res Result
	for i := 1; i <= cfg.MaxIterations; i++ {
		if stop, err := checkpoint(c, cfg, abortTurnID(cfg.LoopID, i)); err != nil {
			return res, err
		} else if stop {
			res.Status = Interrupted
			return res, nil
		}
		due, err := deadline(c, cfg, fmt.Sprintf(idTurnDeadline, cfg.LoopID, i), cfg.TurnTimeout)
		if err != nil {
			return res, err
		}
		cfg.turnDue = due
		raw, err := c.Decide(responseID(cfg.LoopID, i), func() (json.RawMessage, error) {
			return callModel(c, cfg, msgs)
		})
		if tooLarge(cfg, err, &res) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		res.Iterations = i
		var r response
		if err := json.Unmarshal(raw, &r); err != nil {
			return res, fmt.Errorf("agent: recorded response: %w", err)
		}
		switch {
		case r.Interrupted:
			res.Status, res.Text = Interrupted, r.Partial
			return res, nil
		case r.Failed:
			res.Status, res.Reason, res.ErrorID, res.TimedOut = Failed, loomtype.ReasonModelError, r.ErrorID, r.TimedOut
			return res, nil
		case len(r.ToolCalls) == 0:
			res.Status, res.Text = Complete, r.Content
			return res, nil
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: r.Content, ToolCalls: r.ToolCalls})
		outs, stopped, err := runTools(c, cfg, i, r.ToolCalls, &res)
		if err != nil {
			return res, err
		}
		if endInDoubt(r.ToolCalls, outs, &res) || endOnFailure(cfg, r.ToolCalls, outs, &res) {
			return res, nil
		}
		failed := false
		for j, o := range outs {
			if o.NotRun {
				stopped = true
				continue
			}
			if o.Denied {
				res.Status, res.Reason, res.ErrorID = Failed, loomtype.ReasonDenied, o.ErrorID
				return res, nil
			}
			res.Calls = append(res.Calls, logEntry(r.ToolCalls[j], o))
			failed = failed || !o.OK
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: r.ToolCalls[j].ID, Content: toolContent(o)})
		}
		if failed && cfg.FailOnToolError {
			res.Status, res.Reason = Failed, ReasonToolFailed
			return res, nil
		}
		if stopped {
			res.Status, res.Text = Interrupted, r.Content
			return res, nil
		}
	}
	return outOfIterations(c, cfg, res), nil
}

// outOfIterations fails a run that used every iteration, with an incident id derived from the
// loop, so a replay names the same incident.
func outOfIterations(c *kernel.Context, cfg Config, res Result) Result {
	res.Status, res.Reason = Failed, loomtype.ReasonTurnFailed
	res.ErrorID = "err_" + idempotencyKey(c.ID(), cfg.LoopID, model.ToolCall{Name: maxIterName})[:24]
	return res
}

// checkpoint records whether the signal has fired. Without a signal it records nothing.
func checkpoint(c *kernel.Context, cfg Config, id string) (bool, error) {
	if cfg.Signal == nil {
		return false, nil
	}
	raw, err := c.Decide(id, func() (json.RawMessage, error) {
		cfg.Signal.Arm()
		return json.Marshal(cfg.Signal.Check())
	})
	if err != nil {
		return false, err
	}
	var b bool
	_ = json.Unmarshal(raw, &b)
	return b, nil
}

func callModel(c *kernel.Context, cfg Config, msgs []model.Message) (json.RawMessage, error) {
	if cfg.OnLive != nil {
		cfg.OnLive()
	}
	dctx, dcancel := withTurnDeadline(c.Ctx(), cfg.turnDue)
	defer dcancel()
	ctx, cancel := context.WithCancel(dctx)
	defer cancel()
	if cfg.Signal != nil {
		cfg.Signal.Arm()
		stop := context.AfterFunc(ctx, func() {})
		defer stop()
		go func() {
			select {
			case <-cfg.Signal.Done():
				drainThenCancel(ctx, cfg.abortDrain(), cancel)
			case <-ctx.Done():
			}
		}()
	}
	var mu sync.Mutex
	var partial strings.Builder
	onDelta := func(t string) {
		mu.Lock()
		partial.WriteString(t)
		mu.Unlock()
		if cfg.OnDelta != nil && (cfg.Signal == nil || !cfg.Signal.Fired()) {
			cfg.OnDelta(t)
		}
	}
	resp, err := cfg.Provider.Complete(ctx, model.Request{Model: cfg.Model, Messages: msgs, Tools: cfg.Tools}, onDelta)
	if c.Ctx().Err() != nil {
		return nil, kernel.ErrStopped // the process is going away: record nothing
	}
	mu.Lock()
	text := partial.String()
	mu.Unlock()
	if err != nil && cfg.Signal != nil && cfg.Signal.Fired() {
		if text == "" {
			text = resp.Content
		}
		return json.Marshal(response{Interrupted: true, Partial: cutText(text)})
	}
	if err != nil {
		id := NewErrorID()
		timedOut := dctx.Err() != nil
		if cfg.OnError != nil {
			if timedOut {
				err = fmt.Errorf("the model did not answer in time: %w", err)
			}
			cfg.OnError(id, err)
		}
		return json.Marshal(response{Failed: true, TimedOut: timedOut, ErrorID: id})
	}
	if err := checkToolCalls(resp.ToolCalls); err != nil {
		return nil, err // nothing is recorded: a resume asks again
	}
	return json.Marshal(response{Content: cutText(resp.Content), ToolCalls: resp.ToolCalls})
}

// DefaultAbortDrain is Config.AbortDrain when it is left zero. It is long enough for a reader
// that a busy machine keeps waiting for its turn, and short against a person's wait.
const DefaultAbortDrain = 50 * time.Millisecond

func (cfg Config) abortDrain() time.Duration {
	if cfg.AbortDrain == 0 {
		return DefaultAbortDrain
	}
	return cfg.AbortDrain
}

// drainThenCancel cancels a model call that an abort interrupted once d has passed (at once when
// d <= 0), or does nothing if the call ends first.
//
// An abort cancels the call, and a cancelled call loses what its connection had received but not
// yet handed on. The model's first words may have reached the engine's socket before the abort
// arrived and still be unread because the reader had no processor yet. The drain lets the reader
// take them.
func drainThenCancel(ctx context.Context, d time.Duration, cancel func()) {
	if d <= 0 {
		cancel()
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		cancel()
	case <-ctx.Done():
	}
}

// cutText bounds a response text to MaxResponseChars characters.
func cutText(s string) string {
	if len(s) <= MaxResponseChars {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxResponseChars {
			return s[:i] + CutMarker
		}
		n++
	}
	return s
}

func runTools(c *kernel.Context, cfg Config, turn int, calls []model.ToolCall, res *Result) ([]toolOutcome, bool, error) {
	outs := make([]toolOutcome, 0, len(calls))
	scope := newBatchScope() // the fail-fast scope of a parallel batch
	step := func(j int, call model.ToolCall) kernel.StepFunc {
		id := toolStepID(cfg.LoopID, turn, j)
		key := idempotencyKey(c.ID(), id, call)
		return func(ctx context.Context) (json.RawMessage, error) {
			outer := ctx
			ctx, leave := scope.join(ctx)
			defer leave()
			if cfg.Parallel && cfg.Signal != nil && cfg.Signal.Check() {
				// A branch that wakes after the stop is not run; its step records that.
				return json.Marshal(toolOutcome{NotRun: true})
			}
			if scope.isStopped() {
				return json.Marshal(toolOutcome{NotRun: true})
			}
			if cfg.OnTool != nil {
				cfg.OnTool(ToolEvent{Call: call.ID, Tool: call.Name})
			}
			o := callTool(ctx, cfg, call, key)
			if cfg.OnTool != nil {
				cfg.OnTool(ToolEvent{Call: call.ID, Tool: call.Name, Done: true, OK: o.OK, Output: o.Output, Error: o.Error})
			}
			if scope.isStopped() && ctx.Err() != nil && outer.Err() == nil {
				o = toolOutcome{NotRun: true} // aborted in flight by the scope
			} else if stopsBatch(cfg, o) {
				scope.stop()
			}
			return json.Marshal(o)
		}
	}
	stepID := func(j int) string { return toolStepID(cfg.LoopID, turn, j) }
	if cfg.NeedsApproval != nil || cfg.Human != nil {
		return runParking(c, cfg, turn, calls, res, step)
	}
	if cfg.Parallel && len(calls) > 1 {
		if stop, err := checkpoint(c, cfg, abortToolsID(cfg.LoopID, turn)); err != nil || stop {
			return nil, stop, err
		}
		ids := make([]string, len(calls))
		fns := make([]kernel.StepFunc, len(calls))
		for j, call := range calls {
			fn, err := toolStep(c, cfg, turn, j, call, step(j, call))
			if err != nil {
				return nil, false, err
			}
			ids[j], fns[j] = stepID(j), fn
			res.Tools = append(res.Tools, call.Name)
		}
		// Under a bound the calls start in the model's order (kernel.Context.ExecuteAllLimit).
		for _, r := range c.ExecuteAllLimit(ids, fns, cfg.MaxParallel) {
			o, err := decodeOutcome(r)
			if err != nil {
				return nil, false, err
			}
			outs = append(outs, o)
		}
		return outs, false, nil
	}
	for j, call := range calls {
		if stop, err := checkpoint(c, cfg, abortToolID(cfg.LoopID, turn, j)); err != nil {
			return nil, false, err
		} else if stop {
			return outs, true, nil
		}
		res.Tools = append(res.Tools, call.Name)
		o, err := runCall(c, cfg, turn, j, call, step(j, call))
		if err != nil {
			return nil, false, err
		}
		outs = append(outs, o)
		if stopsBatch(cfg, o) {
			return outs, false, nil
		}
	}
	return outs, false, nil
}

// runCall runs call j of model call turn as its journaled step, bounded by the tool timeout,
// and returns its outcome (a failure of the tool included); err is the kernel's or the store's.
func runCall(c *kernel.Context, cfg Config, turn, j int, call model.ToolCall, fn kernel.StepFunc) (toolOutcome, error) {
	fn, err := toolStep(c, cfg, turn, j, call, fn)
	if err != nil {
		return toolOutcome{}, err
	}
	v, err := c.Execute(toolStepID(cfg.LoopID, turn, j), fn)
	return decodeOutcome(kernel.StepResult{Value: v, Err: err})
}

// logEntry is the tool-call log's entry of call and its outcome.
func logEntry(call model.ToolCall, o toolOutcome) Call {
	args := json.RawMessage(call.Arguments)
	switch {
	case len(args) == 0:
		args = json.RawMessage("{}") // what the tool was called with
	case !json.Valid(args):
		args, _ = json.Marshal(call.Arguments) // the text the model wrote, as a string
	}
	return Call{Name: call.Name, Arguments: args, OK: o.OK, Output: o.Output, Error: o.Error}
}

func decodeOutcome(r kernel.StepResult) (toolOutcome, error) {
	var se *kernel.StepError
	if errors.As(r.Err, &se) {
		return toolOutcome{Error: bound(se.Message)}, nil
	}
	if r.Err != nil {
		return toolOutcome{}, r.Err
	}
	var o toolOutcome
	if err := json.Unmarshal(r.Value, &o); err != nil {
		return toolOutcome{}, fmt.Errorf("agent: recorded tool outcome: %w", err)
	}
	return o, nil
}

func callTool(ctx context.Context, cfg Config, call model.ToolCall, key string) toolOutcome {
	known := false
	for _, t := range cfg.Tools {
		if t.Name == call.Name {
			known = true
		}
	}
	if !known || cfg.Runner == nil {
		return toolOutcome{Error: "unknown tool: " + bound(call.Name)}
	}
	if err := Authorize(cfg, call.Name); err != nil {
		id := NewErrorID()
		if cfg.OnError != nil {
			cfg.OnError(id, err)
		}
		return toolOutcome{Denied: true, Error: "denied", ErrorID: id}
	}
	args := json.RawMessage(call.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return toolOutcome{Error: "arguments are not JSON"}
	}
	if cfg.Principal != nil {
		ctx = WithPrincipal(ctx, *cfg.Principal)
	}
	out, err := cfg.Runner.Call(ctx, call.Name, args, key)
	if err != nil {
		var te *ToolError
		if errors.As(err, &te) {
			return classify(cfg, call.Name, toolOutcome{Error: bound(te.Message)}, te.Failure)
		}
		return classify(cfg, call.Name, toolOutcome{Error: bound(err.Error())}, nil)
	}
	if len(out) == 0 || !json.Valid(out) {
		out = json.RawMessage("null")
	}
	return toolOutcome{OK: true, Output: out}
}

func toolContent(o toolOutcome) string {
	if o.OK {
		return string(o.Output)
	}
	if o.Tainted != "" {
		return fencedContent(o)
	}
	b, _ := json.Marshal(map[string]string{"error": o.Error})
	return string(b)
}

// bound keeps the first MaxErrorText characters of s. A byte that is not part of a well-formed
// character counts as one (the JSON the model reads holds it as one U+FFFD).
func bound(s string) string {
	n := 0
	for i := range s {
		if n == MaxErrorText {
			return s[:i]
		}
		n++
	}
	return s
}

// idempotencyKey is the same for every attempt of one call at one position, and differs for a
// different call or position.
func idempotencyKey(execID, stepID string, call model.ToolCall) string {
	h := sha256.Sum256([]byte(execID + "\x00" + stepID + "\x00" + call.Name + "\x00" + call.Arguments))
	return hex.EncodeToString(h[:16])
}

// NewErrorID returns a random id for an error report: loomtype.NewErrorID.
func NewErrorID() string { return loomtype.NewErrorID() }
