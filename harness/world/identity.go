package world

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Lookup is one recorded token introspection. Known says whether the token resolved.
//
//	n := len(w.Identity().Lookups()) // the system asks on every request
type Lookup struct {
	Token   string
	Known   bool
	Arrived time.Time
}

// Identity is the token introspection service at POST /identity: {"token"} is answered 200 with
// the sutconfig.Principal added for the token, or 401 {"error":"unauthenticated"} for an unknown or
// revoked one. It is safe for concurrent use.
//
//	_ = w.Identity().Add("tok", sutconfig.Principal{Actor: "alice"})
//	w.Identity().Revoke("tok")
type Identity struct {
	w *World

	mu     sync.Mutex
	sig    signal
	tokens map[string]sutconfig.Principal
	broken map[string]Failure
	holds  map[string]*Hold
	// abandoned counts the held introspections whose caller went away before the answer.
	abandoned int
	log       *journal[Lookup]
}

func newIdentity(w *World) *Identity {
	return &Identity{w: w, tokens: map[string]sutconfig.Principal{}, log: newJournal[Lookup](w.opts)}
}

func (id *Identity) reset() {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.tokens = map[string]sutconfig.Principal{}
	id.broken = nil
	id.holds = nil
	id.abandoned = 0
	id.log = newJournal[Lookup](id.w.opts)
	id.sig.fire()
}

// Add makes token speak for p (replacing what it spoke for before). It fails with ErrScriptFull
// when more than Options.MaxScript tokens would be known.
//
//	_ = w.Identity().Add("tok-alice", sutconfig.Principal{Tenant: "acme", Actor: "alice"})
func (id *Identity) Add(token string, p sutconfig.Principal) error {
	id.mu.Lock()
	defer id.mu.Unlock()
	if _, ok := id.tokens[token]; !ok && len(id.tokens) >= id.w.opts.MaxScript {
		return ErrScriptFull
	}
	p.Grants = slices.Clone(p.Grants)
	id.tokens[token] = p
	return nil
}

// Revoke forgets token: from now on it is answered 401.
//
//	w.Identity().Revoke("tok-alice")
func (id *Identity) Revoke(token string) {
	id.mu.Lock()
	defer id.mu.Unlock()
	delete(id.tokens, token)
}

// FailWith makes the introspection of token fail with f (a broken identity service), until
// Reset. The token's principal, if any, is kept for afterwards.
//
//	w.Identity().FailWith("tok-alice", world.Failure{Status: 500, Message: "ldap down at 10.0.0.7"})
func (id *Identity) FailWith(token string, f Failure) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.broken == nil {
		id.broken = map[string]Failure{}
	}
	id.broken[token] = f
}

// HoldFor makes every introspection of token wait at h before it is answered, until Reset. An
// introspection whose caller goes away while it waits is counted (Abandoned) and not answered.
//
//	h := w.NewHold()
//	w.Identity().HoldFor("tok-alice", h)
//	_ = h.WaitReached(ctx) // the system is asking
func (id *Identity) HoldFor(token string, h *Hold) {
	id.mu.Lock()
	defer id.mu.Unlock()
	if id.holds == nil {
		id.holds = map[string]*Hold{}
	}
	id.holds[token] = h
}

// Abandoned is the number of held introspections whose caller went away before the answer.
//
//	n := w.Identity().Abandoned()
func (id *Identity) Abandoned() int {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.abandoned
}

// WaitAbandoned blocks until at least n held introspections were abandoned by their caller. It
// returns a *WaitError wrapping ctx.Err() (or ErrClosed) when ctx ends (or the World closes)
// first.
//
//	err := w.Identity().WaitAbandoned(ctx, 1)
func (id *Identity) WaitAbandoned(ctx context.Context, n int) error {
	return waitUntil(ctx, &id.mu, &id.sig, id.w.closing, fmt.Sprintf("%d abandoned identity lookup(s)", n),
		func() bool { return id.abandoned >= n })
}

// Principals returns a copy of the known tokens and whom they speak for, suitable for
// sutconfig.IdentityConfig.Principals. A system given these statically does not see later revocations.
//
//	cfg.Identity.Principals = w.Identity().Principals()
func (id *Identity) Principals() map[string]sutconfig.Principal {
	id.mu.Lock()
	defer id.mu.Unlock()
	out := maps.Clone(id.tokens)
	for k, p := range out {
		p.Grants = slices.Clone(p.Grants)
		out[k] = p
	}
	return out
}

// Lookups returns a copy of the recorded introspections, oldest first.
//
//	n := len(w.Identity().Lookups())
func (id *Identity) Lookups() []Lookup {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.log.snapshot()
}

// WaitLookups blocks until at least n introspections have arrived. It returns a *WaitError
// wrapping ctx.Err() (or ErrClosed) when ctx ends (or the World closes) first.
//
//	err := w.Identity().WaitLookups(ctx, 1)
func (id *Identity) WaitLookups(ctx context.Context, n int) error {
	return waitUntil(ctx, &id.mu, &id.sig, id.w.closing, fmt.Sprintf("%d identity lookup(s)", n),
		func() bool { return id.log.total >= n })
}

func (id *Identity) serve(rw http.ResponseWriter, r *http.Request) {
	var req struct {
		Token *string `json:"token"`
	}
	if _, ok := id.w.readBody(rw, r, &req); !ok {
		return
	}
	if req.Token == nil {
		id.w.reject(rw, r, http.StatusBadRequest, "token missing")
		return
	}
	id.mu.Lock()
	p, known := id.tokens[*req.Token]
	f, broken := id.broken[*req.Token]
	p.Grants = slices.Clone(p.Grants)
	hold := id.holds[*req.Token]
	id.log.add(Lookup{Token: *req.Token, Known: known, Arrived: time.Now()}, int64(len(*req.Token)))
	id.sig.fire()
	id.mu.Unlock()
	if hold != nil {
		switch hold.wait(r.Context()) {
		case holdClientGone:
			id.mu.Lock()
			id.abandoned++
			id.sig.fire()
			id.mu.Unlock()
			return
		case holdClosed:
			return
		}
	}
	if broken {
		status, body := failureBody(&f)
		_ = writeRaw(rw, status, body)
		return
	}
	if !known {
		_ = writeJSON(rw, http.StatusUnauthorized, map[string]string{"error": "unauthenticated"})
		return
	}
	_ = writeJSON(rw, http.StatusOK, p)
}
