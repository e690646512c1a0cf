package world

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Viewer is who a clearance question is about.
//
//	v := w.Clearance().Calls()[0].Viewer // world.Viewer{Actor: "alice"}
type Viewer struct {
	Tenant     string `json:"tenant,omitempty"`
	Actor      string `json:"actor"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
}

// ClearanceCall is one recorded clearance question. Answer is the value sent as "cleared" (nil when
// the call was refused with a scripted Failure, whose status is then in Status).
//
//	for _, c := range w.Clearance().Calls() { t.Log(c.Viewer.Actor, c.Classes, string(c.Answer)) }
type ClearanceCall struct {
	Viewer  Viewer
	Classes []string
	Arrived time.Time
	Status  int
	Answer  json.RawMessage
}

type forced struct {
	raw  json.RawMessage
	fail *Failure
}

// Clearance is the clearance service at POST /clearance: {"viewer", "classes"} is answered
// {"cleared": true} when every class asked for (vacuously, none) is allowed for the viewer's actor,
// and {"cleared": false} otherwise, unless an answer was forced for that actor with AnswerWith or
// FailWith. It is safe for concurrent use.
//
//	_ = w.Clearance().Allow("alice", "finance")
//	_ = w.Clearance().AnswerWith("bob", json.RawMessage(`1`)) // not cleared, whatever is asked
type Clearance struct {
	w *World

	mu      sync.Mutex
	sig     signal
	allowed map[string]map[string]bool
	forced  map[string]forced
	log     *journal[ClearanceCall]
}

func newClearance(w *World) *Clearance {
	return &Clearance{w: w, allowed: map[string]map[string]bool{}, forced: map[string]forced{},
		log: newJournal[ClearanceCall](w.opts)}
}

func (c *Clearance) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.allowed, c.forced = map[string]map[string]bool{}, map[string]forced{}
	c.log = newJournal[ClearanceCall](c.w.opts)
	c.sig.fire()
}

// Allow clears actor for classes, in addition to what was allowed before. It fails with
// ErrScriptFull when more than Options.MaxScript actors or classes of one actor would be scripted.
//
//	_ = w.Clearance().Allow("alice", "finance", "hr")
func (c *Clearance) Allow(actor string, classes ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	set := c.allowed[actor]
	if set == nil {
		if len(c.allowed) >= c.w.opts.MaxScript {
			return ErrScriptFull
		}
		set = map[string]bool{}
	}
	if len(set)+len(classes) > c.w.opts.MaxScript {
		return ErrScriptFull
	}
	for _, cl := range classes {
		set[cl] = true
	}
	c.allowed[actor] = set
	return nil
}

// AnswerWith forces every answer about actor to be {"cleared": raw}, with raw sent exactly as
// given (it need not even be valid JSON), to check that a system treats anything but JSON true as
// not cleared. A nil raw removes the forced answer. It fails like Allow.
//
//	_ = w.Clearance().AnswerWith("alice", json.RawMessage(`"yes"`))
func (c *Clearance) AnswerWith(actor string, raw json.RawMessage) error {
	return c.force(actor, forced{raw: slices.Clone(raw)}, raw == nil)
}

// FailWith forces every answer about actor to be the refusal f. It fails like Allow.
//
//	_ = w.Clearance().FailWith("alice", world.Failure{Status: 503})
func (c *Clearance) FailWith(actor string, f Failure) error {
	return c.force(actor, forced{fail: &f}, false)
}

func (c *Clearance) force(actor string, f forced, remove bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if remove {
		delete(c.forced, actor)
		return nil
	}
	if _, ok := c.forced[actor]; !ok && len(c.forced) >= c.w.opts.MaxScript {
		return ErrScriptFull
	}
	c.forced[actor] = f
	return nil
}

// Calls returns a copy of the recorded questions, oldest first.
//
//	asked := w.Clearance().Calls()
func (c *Clearance) Calls() []ClearanceCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.snapshot()
}

// WaitCalls blocks until at least n questions have arrived. It returns a *WaitError wrapping
// ctx.Err() (or ErrClosed) when ctx ends (or the World closes) first.
//
//	err := w.Clearance().WaitCalls(ctx, 1)
func (c *Clearance) WaitCalls(ctx context.Context, n int) error {
	return waitUntil(ctx, &c.mu, &c.sig, c.w.closing, fmt.Sprintf("%d clearance call(s)", n),
		func() bool { return c.log.total >= n })
}

func (c *Clearance) serve(rw http.ResponseWriter, r *http.Request) {
	var req struct {
		Viewer  *Viewer   `json:"viewer"`
		Classes *[]string `json:"classes"`
	}
	body, ok := c.w.readBody(rw, r, &req)
	if !ok {
		return
	}
	if req.Viewer == nil || req.Classes == nil {
		c.w.reject(rw, r, http.StatusBadRequest, "viewer or classes missing")
		return
	}
	call := ClearanceCall{Viewer: *req.Viewer, Classes: *req.Classes, Arrived: time.Now()}

	c.mu.Lock()
	var status int
	var out []byte
	if f, ok := c.forced[call.Viewer.Actor]; ok {
		if f.fail != nil {
			status, out = failureBody(f.fail)
		} else {
			call.Answer = f.raw
			status = http.StatusOK
			out = append(append([]byte(`{"cleared":`), f.raw...), '}')
		}
	} else {
		cleared := true
		for _, cl := range call.Classes {
			if !c.allowed[call.Viewer.Actor][cl] {
				cleared = false
				break
			}
		}
		call.Answer = json.RawMessage("false")
		if cleared {
			call.Answer = json.RawMessage("true")
		}
		status = http.StatusOK
		out = append(append([]byte(`{"cleared":`), call.Answer...), '}')
	}
	call.Status = status
	c.log.add(call, int64(len(body)))
	c.sig.fire()
	c.mu.Unlock()
	_ = writeRaw(rw, status, out)
}
