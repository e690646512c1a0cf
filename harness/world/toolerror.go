package world

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Headers a system sends with every tool call to name the principal it acts for (spec/world.md,
// Tools). Each value is the field percent-encoded as UTF-8 (RFC 3986); an absent header is an
// absent field.
const (
	HeaderTenant     = "Loom-Tenant"
	HeaderActor      = "Loom-Actor"
	HeaderOnBehalfOf = "Loom-On-Behalf-Of"
)

// KindHuman is the Kind of a tool declared to be answered by a person (sutconfig.ToolDef.Kind).
const KindHuman = "human"

// MaxCauseDepth bounds how deep a ToolError's cause chain may be scripted; a deeper one is refused
// (ErrBadScript from LoadScript, ErrBadToolError from Enqueue and Define).
const MaxCauseDepth = 32

// CauseDepth is how deep the record follows a failure's cause chain when it classifies it: the
// failure itself is depth 0, its cause depth 1, and so on; depths 0 to CauseDepth are looked at.
const CauseDepth = 5

// Class names of typed tool failures that the record names as terminal (never fed back to the
// model). WrapperClass is an ordinary class the world wraps a failure in to bury it deeper.
const (
	ClassCapabilityDenied       = "CapabilityDeniedError"
	ClassCapabilityInvokeDenied = "CapabilityInvokeDeniedError"
	ClassEffectModeViolation    = "EffectModeViolationError"
	ClassSafetyViolation        = "SafetyViolationError"
	ClassKillSwitchEngaged      = "KillSwitchEngagedError"
	ClassQuotaExceeded          = "QuotaExceededError"
	ClassRateLimitExceeded      = "RateLimitExceededError"
	ClassExecutionCancelled     = "ExecutionCancelledError"
	ClassSuspend                = "SuspendError"
	ClassStaleFence             = "StaleFenceError"
	ClassExecutionSuperseded    = "ExecutionSupersededError"
	ClassEgressDenied           = "EgressDeniedError"
	ClassIdempotentToolRefused  = "IdempotentToolRefusedError"
	WrapperClass                = "Error"
)

// ClassEffectInDoubt is the class of a call of a tool declared idempotent: false that a crash cut
// off (spec/http.md, Runs: A call in doubt). A system raises it of its own; it is not one of
// TerminalClasses, which classify what a tool answers.
const ClassEffectInDoubt = "EffectInDoubtError"

// TerminalClasses lists the terminal class names above, by kind of stop: authority, safety and
// kill switch, quota and rate limit, cancellation, park, and the isolation and runner refusals.
var TerminalClasses = []string{
	ClassCapabilityDenied, ClassCapabilityInvokeDenied, ClassEffectModeViolation,
	ClassSafetyViolation, ClassKillSwitchEngaged,
	ClassQuotaExceeded, ClassRateLimitExceeded,
	ClassExecutionCancelled,
	ClassSuspend,
	ClassStaleFence, ClassExecutionSuperseded, ClassEgressDenied, ClassIdempotentToolRefused,
}

// ErrBadToolError is returned by Enqueue and Define for a behavior whose ToolError has no class or
// a cause chain deeper than MaxCauseDepth, or whose Fail has a status inside 2xx or a Body; and
// by Declare for an unknown Kind.
var ErrBadToolError = fmt.Errorf("world: bad typed tool failure")

// ToolError is a typed tool failure: what a tool throws, written down so a system can classify it.
// Class is the failure's own class name; Extends its ancestors' names, nearest first (a subclass
// that names only its parent is Class: "VendorStop", Extends: ["SafetyViolationError"]);
// Retryable, when set, is the failure's own verdict (false means "do not retry"); Cause is the
// failure it wraps. Its JSON form is the "failure" member of a tool's failed answer
// (spec/world.md, Tools).
//
//	deny := &world.ToolError{Class: world.ClassCapabilityDenied, Message: "not granted"}
//	_ = w.Tools().Enqueue("pay", world.Behavior{Error: world.WrapAt(deny, 6)})
type ToolError struct {
	Class     string     `json:"class"`
	Extends   []string   `json:"extends,omitempty"`
	Message   string     `json:"message,omitempty"`
	Retryable *bool      `json:"retryable,omitempty"`
	Cause     *ToolError `json:"cause,omitempty"`
}

// Depth is the length of the cause chain below e (0 for a failure with no cause, or for nil).
//
//	n := world.WrapAt(&world.ToolError{Class: "X"}, 5).Depth() // 5
func (e *ToolError) Depth() int {
	n := 0
	for c := e; c != nil && c.Cause != nil; c = c.Cause {
		n++
	}
	return n
}

// Terminal says whether the record classifies e as terminal: some failure at depth 0 to
// CauseDepth of its chain has a class or an ancestor in TerminalClasses, or declares Retryable
// false. Anything else (nil included) is ordinary, a failure fed back to the model.
//
//	world.WrapAt(&world.ToolError{Class: world.ClassQuotaExceeded}, 6).Terminal() // false
func (e *ToolError) Terminal() bool {
	terminal := map[string]bool{}
	for _, c := range TerminalClasses {
		terminal[c] = true
	}
	for c, d := e, 0; c != nil && d <= CauseDepth; c, d = c.Cause, d+1 {
		if terminal[c.Class] || c.Retryable != nil && !*c.Retryable {
			return true
		}
		for _, a := range c.Extends {
			if terminal[a] {
				return true
			}
		}
	}
	return false
}

// WrapAt returns inner wrapped in depth failures of class WrapperClass, so that inner sits at
// depth `depth` of the chain (depth 0 returns inner itself); the wrapper at depth d has the message
// "wrapper at depth d". inner is not changed.
//
//	e := world.WrapAt(&world.ToolError{Class: world.ClassSuspend}, 5) // e.Depth() == 5
func WrapAt(inner *ToolError, depth int) *ToolError {
	out := inner
	for i := depth; i > 0; i-- {
		out = &ToolError{Class: WrapperClass, Message: fmt.Sprintf("wrapper at depth %d", i-1), Cause: out}
	}
	return out
}

// Bool returns a pointer to v, for ToolError.Retryable and sutconfig.ToolDef.Idempotent.
//
//	e := &world.ToolError{Class: "VendorError", Retryable: world.Bool(false)}
func Bool(v bool) *bool { return &v }

func (e *ToolError) check() error {
	for c, d := e, 0; c != nil; c, d = c.Cause, d+1 {
		if d > MaxCauseDepth {
			return fmt.Errorf("%w: cause chain deeper than %d", ErrBadToolError, MaxCauseDepth)
		}
		if c.Class == "" {
			return fmt.Errorf("%w: a failure at depth %d has no class", ErrBadToolError, d)
		}
	}
	return nil
}

func (b Behavior) check() error {
	if b.Error == nil {
		return nil
	}
	if b.Fail != nil && b.Fail.Status/100 == 2 {
		return fmt.Errorf("%w: status %d is a success", ErrBadToolError, b.Fail.Status)
	}
	if b.Fail != nil && b.Fail.Body != "" {
		return fmt.Errorf("%w: a typed failure's body is written by the world, not given", ErrBadToolError)
	}
	return b.Error.check()
}

// typedFailureBody is the answer of a behavior with Error set: Fail's status (500 without it) and
// {"error": <message>, "failure": <the ToolError>}, the message being Fail's, else the error's own.
func typedFailureBody(b Behavior) toolAnswer {
	status, msg := http.StatusInternalServerError, b.Error.Message
	if b.Fail != nil {
		if b.Fail.Status != 0 {
			status = b.Fail.Status
		}
		if b.Fail.Message != "" {
			msg = b.Fail.Message
		}
	}
	if msg == "" {
		msg = b.Error.Class
	}
	body, _ := json.Marshal(map[string]any{"error": msg, "failure": b.Error})
	return toolAnswer{status, body}
}

// principalOf reads the principal headers of a tool call; ok is false for a value that is not
// percent-encoded UTF-8.
func principalOf(h http.Header) (p sutconfig.Principal, sent bool, ok bool) {
	read := func(name string, into *string) bool {
		vs := h.Values(name)
		if len(vs) == 0 {
			return true
		}
		if len(vs) > 1 {
			return false
		}
		v, err := url.PathUnescape(vs[0])
		if err != nil || !utf8.ValidString(v) {
			return false
		}
		*into = v
		return true
	}
	ok = read(HeaderTenant, &p.Tenant) && read(HeaderActor, &p.Actor) && read(HeaderOnBehalfOf, &p.OnBehalfOf)
	sent = len(h.Values(HeaderActor)) > 0
	return p, sent, ok
}

// PrincipalHeaders returns the headers that name p on a tool call, as a system sends them: each
// present field percent-encoded (spec/world.md, Tools).
//
//	h := world.PrincipalHeaders(sutconfig.Principal{Tenant: "acme", Actor: "alice"})
func PrincipalHeaders(p sutconfig.Principal) http.Header {
	h := http.Header{}
	for name, v := range map[string]string{HeaderTenant: p.Tenant, HeaderActor: p.Actor, HeaderOnBehalfOf: p.OnBehalfOf} {
		if v != "" {
			h.Set(name, url.PathEscape(v))
		}
	}
	return h
}

// rawPrincipal returns the principal headers of a tool call as they arrived, by header name
// (nil when none was sent).
func rawPrincipal(h http.Header) map[string]string {
	var out map[string]string
	for _, name := range []string{HeaderTenant, HeaderActor, HeaderOnBehalfOf} {
		if vs := h.Values(name); len(vs) > 0 {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = vs[0]
		}
	}
	return out
}
