package agent

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Failure is a typed tool failure: the error a tool raised, as the tool server writes it in the
// "failure" member of a failed answer (spec/world.md, Tools). Class is the error's own class
// name, Extends its ancestors' names (nearest first), Retryable its own verdict (false: do not
// retry) and Cause the error it wraps.
//
//	f := &agent.Failure{Class: "VendorStop", Extends: []string{"SafetyViolationError"}}
//	stop, ok := f.Terminal() // stop.Class == "SafetyViolationError", stop.Depth == 0
type Failure struct {
	Class     string   `json:"class"`
	Extends   []string `json:"extends,omitempty"`
	Message   string   `json:"message,omitempty"`
	Retryable *bool    `json:"retryable,omitempty"`
	Cause     *Failure `json:"cause,omitempty"`
}

// TerminalCauseDepth is the deepest place of a failure's cause chain the classification looks
// at: the failure itself is depth 0, its cause depth 1, and so on. A terminal error wrapped
// deeper than this is an ordinary failure.
const TerminalCauseDepth = 5

// TerminalClasses are the classes of failure that are never fed back to the model: a park, an
// authority denial, a safety or kill-switch stop, a quota or rate limit, a cancellation, and the
// isolation and runner refusals. A class whose ancestors include one of them is terminal too.
var TerminalClasses = []string{
	"SuspendError",
	"CapabilityDeniedError", "CapabilityInvokeDeniedError", "EffectModeViolationError",
	"SafetyViolationError", "KillSwitchEngagedError",
	"QuotaExceededError", "RateLimitExceededError",
	"ExecutionCancelledError",
	"StaleFenceError", "ExecutionSupersededError", "EgressDeniedError",
	ClassIdempotentToolRefused,
}

// ClassIdempotentToolRefused is the class of the single-frame runner's refusal of a tool
// declared idempotent: false.
const ClassIdempotentToolRefused = "IdempotentToolRefusedError"

// RetryableFalse is the Class a TerminalStop names when the failure that made it terminal is
// an ordinary class that declared retryable: false (its own class is in TerminalStop.Failure).
const RetryableFalse = "retryable:false"

// ReasonToolTerminal is the reason of a run a terminal tool failure ended.
const ReasonToolTerminal loomtype.Reason = "tool-terminal"

// TerminalStop says which failure ended a run: the tool, the class that made the failure
// terminal (a class of TerminalClasses, reached by the failure's own class or through its
// ancestors, or RetryableFalse), the class of the failure at that place of the chain, and its
// depth in the cause chain.
//
//	if res.Reason == agent.ReasonToolTerminal { log.Printf("%s raised %s", res.Terminal.Tool, res.Terminal.Class) }
type TerminalStop struct {
	Tool    string `json:"tool"`
	Class   string `json:"class"`
	Failure string `json:"failure"`
	Depth   int    `json:"depth"`
}

var terminalSet = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range TerminalClasses {
		m[c] = true
	}
	return m
}()

// Terminal classifies f: ok is true when some failure at depth 0 to TerminalCauseDepth of its
// chain has a terminal class or ancestor, or declares retryable false; stop names the first
// (shallowest) such failure. A nil failure is ordinary.
//
//	_, ok := (&agent.Failure{Class: "QuotaExceededError"}).Terminal() // true
func (f *Failure) Terminal() (TerminalStop, bool) {
	for c, d := f, 0; c != nil && d <= TerminalCauseDepth; c, d = c.Cause, d+1 {
		if terminalSet[c.Class] {
			return TerminalStop{Class: c.Class, Failure: c.Class, Depth: d}, true
		}
		for _, a := range c.Extends {
			if terminalSet[a] {
				return TerminalStop{Class: a, Failure: c.Class, Depth: d}, true
			}
		}
		if c.Retryable != nil && !*c.Retryable {
			return TerminalStop{Class: RetryableFalse, Failure: c.Class, Depth: d}, true
		}
	}
	return TerminalStop{}, false
}

// stopsBatch reports whether o ends the run before the rest of its response's calls: a denial,
// a terminal failure, a call in doubt, or any failure when the run fails on tool errors.
func stopsBatch(cfg Config, o toolOutcome) bool {
	if o.InDoubt != nil {
		return true
	}
	return o.Denied || o.Terminal != nil || cfg.FailOnToolError && !o.OK && !o.NotRun
}

// classify turns a tool's failure into its outcome: terminal (never fed back) or an ordinary
// failure, tainted as remote text when the run fences tool errors.
func classify(cfg Config, call string, o toolOutcome, f *Failure) toolOutcome {
	if stop, ok := f.Terminal(); ok {
		stop.Tool = call
		o.Terminal = &stop
		return o
	}
	if cfg.TaintToolErrors {
		o.Tainted = "tool-error:" + call
	}
	return o
}

// endOnFailure ends the run when a call of the response was terminal, or failed while the run
// fails on tool errors: the calls of the response that ran to an outcome are logged in the
// model's order, the run is Failed with its reason, and no further model call is made. A denial
// met first is left to the caller.
func endOnFailure(cfg Config, calls []model.ToolCall, outs []toolOutcome, res *Result) bool {
	var stop *TerminalStop
	failed := false
	for _, o := range outs {
		if o.Denied {
			return false
		}
		if o.Terminal != nil && stop == nil {
			stop = o.Terminal
		}
		failed = failed || !o.OK && !o.NotRun
	}
	if stop == nil && !(failed && cfg.FailOnToolError) {
		return false
	}
	for j, o := range outs {
		if !o.NotRun {
			res.Calls = append(res.Calls, logEntry(calls[j], o))
		}
	}
	res.Status, res.Reason = Failed, ReasonToolFailed
	if stop != nil {
		res.Reason, res.Terminal = ReasonToolTerminal, stop
	}
	return true
}

// fencedContent is the tool message of a tainted failure: the failure as data, marked with
// where it came from (spec/http.md, Runs: tool failures).
func fencedContent(o toolOutcome) string {
	b, _ := json.Marshal(map[string]any{"untrusted": map[string]any{
		"source": o.Tainted, "data": map[string]string{"error": o.Error}}})
	return string(b)
}

// batchScope is the fail-fast scope of one response's parallel calls: once a call stops the
// batch, calls not yet started are not started and calls in flight have their context
// cancelled; both are recorded as not run.
type batchScope struct {
	mu      sync.Mutex
	stopped bool
	ctx     context.Context
	cancel  context.CancelFunc
}

func newBatchScope() *batchScope {
	ctx, cancel := context.WithCancel(context.Background())
	return &batchScope{ctx: ctx, cancel: cancel}
}

// join returns ctx that is also cancelled when the scope stops.
func (b *batchScope) join(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (b *batchScope) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.cancel()
}

func (b *batchScope) isStopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}
