package world

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// ErrorReport is one error a system reported to the error hook.
//
//	r := w.ErrorHook().Errors()[0] // r.ErrorID matches the errorId of the 500 answer
type ErrorReport struct {
	ErrorID        string    `json:"errorId"`
	Error          string    `json:"error"`
	ConversationID string    `json:"conversationId"`
	Turn           int       `json:"turn"`
	Arrived        time.Time `json:"-"`
}

// ErrorHook is the error hook at POST /errors: {"errorId", "error", "conversationId", "turn"} is
// recorded and answered 204. A report without an errorId is refused with 400. It is safe for
// concurrent use.
//
//	if err := w.ErrorHook().WaitErrors(ctx, 1); err != nil { t.Fatal(err) }
type ErrorHook struct {
	w *World

	mu  sync.Mutex
	sig signal
	log *journal[ErrorReport]
}

func newErrorHook(w *World) *ErrorHook {
	return &ErrorHook{w: w, log: newJournal[ErrorReport](w.opts)}
}

func (e *ErrorHook) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = newJournal[ErrorReport](e.w.opts)
	e.sig.fire()
}

// Errors returns a copy of the recorded reports, oldest first.
//
//	for _, r := range w.ErrorHook().Errors() { t.Log(r.ErrorID, r.Error) }
func (e *ErrorHook) Errors() []ErrorReport {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.snapshot()
}

// WaitErrors blocks until at least n reports have arrived. It returns a *WaitError wrapping
// ctx.Err() (or ErrClosed) when ctx ends (or the World closes) first.
//
//	err := w.ErrorHook().WaitErrors(ctx, 1)
func (e *ErrorHook) WaitErrors(ctx context.Context, n int) error {
	return waitUntil(ctx, &e.mu, &e.sig, e.w.closing, fmt.Sprintf("%d error report(s)", n),
		func() bool { return e.log.total >= n })
}

func (e *ErrorHook) serve(rw http.ResponseWriter, r *http.Request) {
	var rep ErrorReport
	body, ok := e.w.readBody(rw, r, &rep)
	if !ok {
		return
	}
	if rep.ErrorID == "" {
		e.w.reject(rw, r, http.StatusBadRequest, "errorId missing")
		return
	}
	rep.Arrived = time.Now()
	e.mu.Lock()
	e.log.add(rep, int64(len(body)))
	e.sig.fire()
	e.mu.Unlock()
	rw.WriteHeader(http.StatusNoContent)
}
