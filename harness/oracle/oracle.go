// Package oracle computes, from spec/ alone, every value the kit must know byte for byte to judge
// a system: the canonical form and signature of an envelope (spec/envelopes.md §3, §4), the strict
// parse of its wire form and the acceptance rule (§1.1, §5), the replay set and its carry (§6),
// turn execution ids (§7), sender keys (§8), and the token counts, context fit and summary trim of
// spec/token-counting.md.
//
// The package is the kit's second, independent implementation of those definitions: it never
// imports the reference engine, so a reference whose canonical form forgets a field, or whose MAC
// forgets its domain, disagrees with the kit and fails. Both implementations are checked against
// the vectors in fixtures/.
//
// Everything here is pure (no I/O, no clocks, no goroutines) and safe for concurrent use.
//
//	key, _ := base64.StdEncoding.DecodeString(cfg.Signing.Key)
//	e := oracle.Sign(key, oracle.Envelope{ConversationID: "conv-1", Kind: oracle.KindUser,
//		ID: "m1", IAT: nowMs, Text: "hello", Asker: oracle.Identity{Tenant: "acme", Actor: "alice"}})
//	payload := e.Wire() // the JSON the host puts into the inbox
package oracle

import (
	"errors"
	"fmt"
)

// Domain is the domain-separation string of spec/envelopes.md §3, followed in the canonical bytes
// by one 0x00 byte.
const Domain = "loom/conversation/envelope/v1"

// The kinds of envelope (spec/envelopes.md §1).
const (
	KindUser  = "user"
	KindClose = "close"
)

// Reasons of spec/envelopes.md §5, as a rejected record carries them.
const (
	ReasonMalformed       = "malformed"
	ReasonUnauthenticated = "unauthenticated"
	ReasonReplayed        = "replayed"
	ReasonStale           = "stale"
)

// Defaults of spec/envelopes.md §5 and §6.
const (
	DefaultMaxAgeMs    = 600_000
	DefaultMaxSkewMs   = 60_000
	DefaultReplayLimit = 1024
	maxSafe            = 1<<53 - 1
	maxIDBytes         = 128
)

// ErrUnauthenticated is returned by [Verify] when no key makes the envelope's signature.
var ErrUnauthenticated = errors.New("oracle: the signature does not verify")

// MalformedError is returned by [Parse] for a payload that is not an envelope; Why says which
// rule of spec/envelopes.md §1.1 it breaks.
//
//	var me *oracle.MalformedError
//	if errors.As(err, &me) { log.Print(me.Why) }
type MalformedError struct{ Why string }

func (e *MalformedError) Error() string { return "oracle: malformed envelope: " + e.Why }

func malformed(format string, a ...any) error {
	return &MalformedError{Why: fmt.Sprintf(format, a...)}
}

// Identity is who speaks in an envelope. An empty string is an absent member; two identities are
// the same only when all three members are equal, so Identity compares with ==.
//
//	owner := oracle.Identity{Tenant: "acme", Actor: "alice"}
type Identity struct {
	Tenant     string
	Actor      string
	OnBehalfOf string
}

// Envelope is one envelope's fields (spec/envelopes.md §1). EditOf is nil when absent. Sig is the
// signature as sent; [Canonical] does not cover it.
//
//	e := oracle.Envelope{ConversationID: "c1", Kind: oracle.KindUser, ID: "m1", IAT: 1, Text: "hi",
//		Asker: oracle.Identity{Actor: "alice"}}
type Envelope struct {
	ConversationID string
	Kind           string
	ID             string
	IAT            int64
	Text           string
	Asker          Identity
	EditOf         *int64
	Sig            string
}
