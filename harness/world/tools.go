package world

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Behavior is how a tool answers one call. With Fail set the call is refused (see Failure), a
// failure the model is to be told about; with Error set it is refused with a typed failure, Fail's
// status (500 without Fail, never a 2xx) and {"error": message, "failure": Error} (see ToolError);
// otherwise it succeeds with 200 and the JSON encoding of Result ({} when Result is nil; a Result
// that cannot be encoded is answered 500). With Hold set the tool first waits at the hold; a client
// that goes away meanwhile gets no answer.
//
//	w.Tools().Define("lookup", world.Behavior{Result: map[string]any{"answer": 42}})
//	w.Tools().Enqueue("pay", world.Behavior{Error: &world.ToolError{Class: world.ClassQuotaExceeded}})
type Behavior struct {
	Result any
	Fail   *Failure
	Error  *ToolError
	Hold   *Hold
}

// Invocation is one recorded tool call. Index is its 0-based arrival number since the last Reset;
// Args is the request body (a JSON object). Status is the answer's status, set when the call ends
// (0 while it is held or when the World closed first); Aborted means the client went away first.
// Replayed means the answer was a replay of an earlier call with the same tool and
// Idempotency-Key. Attempt counts the calls of that tool with that Idempotency-Key so far, this one
// included (1 for the first; 0 for a call without a key): a tool declared idempotent: false runs
// every attempt, so Attempt 2 there is a second execution of one call. Principal is what the
// principal headers named (PrincipalSent: Loom-Actor was present); RawPrincipal holds those
// headers' values as they arrived, before decoding, by header name (nil when none was sent). Human means the tool is declared
// kind: human: the call was recorded and answered 202, the person's answer comes another way.
//
//	inv := w.Tools().CallsOf("pay")[0]
//	assert.Equal(t, inv.IdempotencyKey, w.Tools().CallsOf("pay")[1].IdempotencyKey)
type Invocation struct {
	Index          int
	Name           string
	Args           json.RawMessage
	IdempotencyKey string
	Arrived        time.Time
	Status         int
	Replayed       bool
	Aborted        bool
	Attempt        int
	Principal      sutconfig.Principal
	PrincipalSent  bool
	RawPrincipal   map[string]string
	Human          bool
}

type toolScript struct {
	queue      []Behavior
	def        Behavior
	hasDefault bool
}

type toolAnswer struct {
	status int
	body   []byte
}

// Tools is the tool server at POST /tools/{name}. Each tool answers from its queue of behaviors
// (Enqueue), then with its default behavior (Define); a tool with neither is unknown and answered
// 404 {"error":"unknown tool"}. A call with the Idempotency-Key of an earlier successful (2xx) call
// of the same tool gets that call's answer again without consuming a behavior; a failed call is not
// remembered, so a retry with the same key takes the next behavior. Declared tools (Declare)
// change that: one declared not idempotent neither replays nor remembers, one of kind human answers
// 202 pending; the declaration in force when a call arrives decides. A behavior with Error answers
// a typed failure (ToolError). Every call is recorded, unknown tools included, with the principal
// headers it carried. It is safe for concurrent use.
//
//	_ = w.Tools().Define("clock", world.Behavior{Result: map[string]string{"now": "noon"}})
//	err := w.Tools().WaitCallsOf(ctx, "clock", 1)
type Tools struct {
	w *World

	mu       sync.Mutex
	sig      signal
	scripts  map[string]*toolScript
	scripted int
	answers  map[string]toolAnswer // by name + "\x00" + key
	attempts map[string]int        // by name + "\x00" + key
	decls    map[string]sutconfig.ToolDef
	declared []string // names in declaration order
	log      *journal[Invocation]
}

func newTools(w *World) *Tools {
	return &Tools{w: w, scripts: map[string]*toolScript{}, answers: map[string]toolAnswer{}, attempts: map[string]int{},
		decls: map[string]sutconfig.ToolDef{}, log: newJournal[Invocation](w.opts)}
}

func (t *Tools) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.scripts, t.scripted = map[string]*toolScript{}, 0
	t.answers, t.attempts = map[string]toolAnswer{}, map[string]int{}
	t.decls, t.declared = map[string]sutconfig.ToolDef{}, nil
	t.log = newJournal[Invocation](t.w.opts)
	t.sig.fire()
}

func (t *Tools) script(name string) *toolScript {
	s := t.scripts[name]
	if s == nil {
		s = &toolScript{}
		t.scripts[name] = s
	}
	return s
}

// Define sets the default behavior of tool name, used once its queue is empty. It fails with
// ErrScriptFull when more than Options.MaxScript tools would be scripted.
//
//	_ = w.Tools().Define("clock", world.Behavior{Result: map[string]string{"now": "noon"}})
func (t *Tools) Define(name string, b Behavior) error {
	if err := b.check(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.scripts[name] == nil && len(t.scripts) >= t.w.opts.MaxScript {
		return ErrScriptFull
	}
	s := t.script(name)
	s.def, s.hasDefault = b, true
	return nil
}

// Enqueue appends behaviors to the queue of tool name; each call takes the next one. It fails with
// ErrScriptFull when the queued behaviors would exceed Options.MaxScript (then nothing is added).
//
//	_ = w.Tools().Enqueue("pay", world.Behavior{Fail: &world.Failure{Status: 502, Message: "bank down"}})
func (t *Tools) Enqueue(name string, bs ...Behavior) error {
	for _, b := range bs {
		if err := b.check(); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.scripted+len(bs) > t.w.opts.MaxScript || t.scripts[name] == nil && len(t.scripts) >= t.w.opts.MaxScript {
		return ErrScriptFull
	}
	s := t.script(name)
	s.queue = append(s.queue, bs...)
	t.scripted += len(bs)
	return nil
}

// Declare records what a system is told about a tool (sutconfig.ToolDef: Idempotent, Kind, ...) and
// makes the tool server keep it: a tool declared Idempotent false runs every call, a repeated
// Idempotency-Key included (no replay), and a tool of Kind KindHuman answers every call
// 202 {"pending": "human"} without taking a behavior. A second Declare of a name replaces the
// first. It fails with ErrScriptFull past Options.MaxScript declarations and with ErrBadToolError
// for a Kind other than "" and KindHuman.
//
//	_ = w.Tools().Declare(sutconfig.ToolDef{Name: "pay", Idempotent: world.Bool(false)})
//	cfg.Tools.Definitions = w.Tools().Definitions()
func (t *Tools) Declare(defs ...sutconfig.ToolDef) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.declared)
	for _, d := range defs {
		if d.Kind != "" && d.Kind != KindHuman {
			return fmt.Errorf("%w: tool %q has kind %q", ErrBadToolError, d.Name, d.Kind)
		}
		if _, ok := t.decls[d.Name]; !ok {
			n++
		}
	}
	if n > t.w.opts.MaxScript {
		return ErrScriptFull
	}
	for _, d := range defs {
		if _, ok := t.decls[d.Name]; !ok {
			t.declared = append(t.declared, d.Name)
		}
		t.decls[d.Name] = d
	}
	return nil
}

// Definitions returns the declared tools in the order they were first declared, ready for
// sutconfig.SUTConfig.Tools.Definitions.
//
//	cfg.Tools.Definitions = append(cfg.Tools.Definitions, w.Tools().Definitions()...)
func (t *Tools) Definitions() []sutconfig.ToolDef {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]sutconfig.ToolDef, 0, len(t.declared))
	for _, n := range t.declared {
		out = append(out, t.decls[n])
	}
	return out
}

// Calls returns a copy of the recorded calls, oldest first.
//
//	for _, c := range w.Tools().Calls() { t.Log(c.Name, string(c.Args)) }
func (t *Tools) Calls() []Invocation {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.log.snapshot()
}

// CallsOf returns a copy of the recorded calls of tool name, oldest first.
//
//	keys := w.Tools().CallsOf("pay")
func (t *Tools) CallsOf(name string) []Invocation {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Invocation
	for _, c := range t.log.items {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// WaitCalls blocks until at least n calls have arrived. It returns a *WaitError wrapping ctx.Err()
// (or ErrClosed) when ctx ends (or the World closes) first.
//
//	err := w.Tools().WaitCalls(ctx, 1)
func (t *Tools) WaitCalls(ctx context.Context, n int) error {
	return waitUntil(ctx, &t.mu, &t.sig, t.w.closing, fmt.Sprintf("%d tool call(s)", n),
		func() bool { return t.log.total >= n })
}

// WaitCallsOf blocks until at least n recorded calls of tool name have arrived. It fails like
// WaitCalls.
//
//	err := w.Tools().WaitCallsOf(ctx, "pay", 2)
func (t *Tools) WaitCallsOf(ctx context.Context, name string, n int) error {
	return waitUntil(ctx, &t.mu, &t.sig, t.w.closing, fmt.Sprintf("%d call(s) of tool %q", n, name),
		func() bool {
			c := 0
			for _, inv := range t.log.items {
				if inv.Name == name {
					c++
				}
			}
			return c >= n
		})
}

// WaitDone blocks until call i (0-based) has ended, answered or aborted, and returns its record.
// It fails like WaitCalls.
//
//	inv, err := w.Tools().WaitDone(ctx, 0)
func (t *Tools) WaitDone(ctx context.Context, i int) (Invocation, error) {
	var out Invocation
	err := waitUntil(ctx, &t.mu, &t.sig, t.w.closing, fmt.Sprintf("tool call %d to end", i),
		func() bool {
			inv := t.log.at(i)
			if inv != nil && (inv.Status != 0 || inv.Aborted) {
				out = *inv
				return true
			}
			return false
		})
	return out, err
}

// take records a call and decides its answer: a replay, a human's pending answer, a behavior, or
// unknown.
func (t *Tools) take(inv Invocation) (b Behavior, known bool, replay *toolAnswer, log *journal[Invocation], i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	log = t.log
	inv.Index = log.total
	d, declared := t.decls[inv.Name]
	if inv.IdempotencyKey != "" {
		k := inv.Name + "\x00" + inv.IdempotencyKey
		if _, seen := t.attempts[k]; seen || len(t.attempts) < t.w.opts.MaxRecords {
			t.attempts[k]++
			inv.Attempt = t.attempts[k]
		}
	}
	if declared && d.Kind == KindHuman {
		inv.Human = true
		replay = &toolAnswer{http.StatusAccepted, []byte(`{"pending":"human"}`)}
	} else if inv.IdempotencyKey != "" && !(declared && d.Idempotent != nil && !*d.Idempotent) {
		if a, ok := t.answers[inv.Name+"\x00"+inv.IdempotencyKey]; ok {
			inv.Replayed = true
			replay = &a
		}
	}
	if replay == nil {
		if s := t.scripts[inv.Name]; s != nil {
			switch {
			case len(s.queue) > 0:
				b, s.queue = s.queue[0], s.queue[1:]
				t.scripted--
				known = true
			case s.hasDefault:
				b, known = s.def, true
			}
		}
	}
	i, _ = log.add(inv, int64(len(inv.Args)))
	t.sig.fire()
	return b, known, replay, log, i
}

// end records how call i ended and remembers a delivered success for its idempotency key.
func (t *Tools) end(log *journal[Invocation], i int, name, key string, a *toolAnswer, aborted bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if inv := log.at(i); inv != nil {
		if a != nil {
			inv.Status = a.status
		}
		inv.Aborted = aborted
	}
	if d, ok := t.decls[name]; ok && (d.Kind == KindHuman || d.Idempotent != nil && !*d.Idempotent) {
		key = "" // neither remembered nor replayed
	}
	if a != nil && !aborted && a.status/100 == 2 && key != "" && log == t.log && len(t.answers) < t.w.opts.MaxRecords {
		k := name + "\x00" + key
		if _, ok := t.answers[k]; !ok {
			t.answers[k] = *a
		}
	}
	t.sig.fire()
}

func (t *Tools) serve(rw http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var args map[string]json.RawMessage
	body, ok := t.w.readBody(rw, r, &args)
	if !ok {
		return
	}
	if args == nil {
		t.w.reject(rw, r, http.StatusBadRequest, "tool arguments are not a JSON object")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	p, sent, ok := principalOf(r.Header)
	if !ok {
		t.w.reject(rw, r, http.StatusBadRequest, "a principal header is not one percent-encoded UTF-8 value")
		return
	}
	b, known, replay, log, i := t.take(Invocation{Name: name, Args: json.RawMessage(bytes.Clone(body)),
		IdempotencyKey: key, Arrived: time.Now(), Principal: p, PrincipalSent: sent, RawPrincipal: rawPrincipal(r.Header)})

	var a toolAnswer
	switch {
	case replay != nil:
		a = *replay
	case !known:
		a = toolAnswer{http.StatusNotFound, []byte(`{"error":"unknown tool"}`)}
	default:
		if b.Hold != nil {
			switch b.Hold.wait(r.Context()) {
			case holdClientGone:
				t.end(log, i, name, key, nil, true)
				return
			case holdClosed:
				t.end(log, i, name, key, nil, false)
				return
			}
		}
		a = behaviorAnswer(b)
	}
	if r.Context().Err() != nil {
		t.end(log, i, name, key, nil, true)
		return
	}
	err := writeRaw(rw, a.status, a.body)
	t.end(log, i, name, key, &a, err != nil)
}

func behaviorAnswer(b Behavior) toolAnswer {
	if b.Error != nil {
		return typedFailureBody(b)
	}
	if b.Fail != nil {
		status, body := failureBody(b.Fail)
		return toolAnswer{status, body}
	}
	if b.Result == nil {
		return toolAnswer{http.StatusOK, []byte("{}")}
	}
	body, err := json.Marshal(b.Result)
	if err != nil {
		return toolAnswer{http.StatusInternalServerError, []byte(`{"error":"scripted result is not JSON"}`)}
	}
	return toolAnswer{http.StatusOK, body}
}
