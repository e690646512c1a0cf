// Package envelope defines the host-signed envelopes a conversation acts on, the rule that decides
// whether one is accepted, and the bounded replay set that rides along a conversation's carry.
//
// Every message sent into a conversation (a user turn or a close) travels as an [Envelope] signed
// by the host with HMAC-SHA-256 over a canonical byte form ([Canonical]). The conversation runs
// [Check] on the raw payload it received and acts only on a verdict that is OK. The normative
// description is spec/envelopes.md; fixtures/envelopes/vectors.json holds the test vectors.
//
// Everything here is pure: no I/O, no goroutines, no clocks (the current time is an argument).
//
//	e := envelope.Sign(key, envelope.Envelope{ConversationID: "c1", Kind: envelope.KindUser,
//		ID: "m1", IAT: nowMs, Text: "hello", Asker: envelope.Identity{Actor: "alice"}})
//	raw, _ := json.Marshal(e)
//	v := envelope.Check(envelope.CheckInput{Raw: raw, Keys: [][]byte{key}, ConversationID: "c1",
//		Voices: func(id envelope.Identity) bool { return id == owner }, Now: nowMs, Seen: seen})
//	if v.OK {
//		seen.Add(v.Envelope.ID, v.Envelope.IAT)
//	}
package envelope

import (
	"errors"
	"unicode/utf8"
)

// Domain is the domain-separation string that starts every canonical body, followed by one 0x00
// byte. A new canonical form would use a new domain.
const Domain = "loom/conversation/envelope/v1"

// The two kinds of envelope.
const (
	KindUser  = "user"  // a user turn; Text is the prompt
	KindClose = "close" // closes the conversation; Text is empty
)

// Limits on envelope fields.
const (
	// MaxIDBytes is the longest envelope ID, in bytes.
	MaxIDBytes = 128
	// MaxSafeInteger bounds IAT and EditOf: 2^53-1, the largest integer every JSON reader holds
	// exactly.
	MaxSafeInteger = 1<<53 - 1
)

// Defaults for [CheckInput]. Time values are milliseconds.
const (
	DefaultMaxAgeMs  = 600_000 // ten minutes
	DefaultMaxSkewMs = 60_000  // one minute
)

// Identity is who sent an envelope. An empty string means the field is absent; Actor is required
// in a valid envelope. Two identities are the same only if all three fields are equal, so it can
// be compared with ==.
//
//	isOwner := func(id envelope.Identity) bool { return id == envelope.Identity{Actor: "alice"} }
type Identity struct {
	Tenant     string `json:"tenant,omitempty"`
	Actor      string `json:"actor"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
}

// Envelope is one message into a conversation as the host signed it. The struct tags give its JSON
// wire form; parse received bytes with [Parse] or [Check], never with a lenient decoder.
//
// ID is the sender-bound idempotency key (for example [SenderKey] of the sender and its message
// id); IAT is the issue time in Unix milliseconds; EditOf, when set, is the positive number of the
// turn a user envelope edits. Text is the prompt of a user envelope; a close envelope may leave it
// empty (and omit it on the wire). Sig is the signature [Sign] sets.
//
//	e := envelope.Envelope{ConversationID: "c1", Kind: envelope.KindClose, ID: "close-1",
//		IAT: nowMs, Asker: envelope.Identity{Actor: "alice"}}
type Envelope struct {
	ConversationID string   `json:"conversationId"`
	Kind           string   `json:"kind"`
	ID             string   `json:"id"`
	IAT            int64    `json:"iat"`
	Text           string   `json:"text"`
	Asker          Identity `json:"asker"`
	EditOf         *int64   `json:"editOf,omitempty"`
	Sig            string   `json:"sig"`
}

// ErrUnauthenticated is returned by [Verify] when no key produces the envelope's signature.
//
//	if errors.Is(envelope.Verify(keys, e), envelope.ErrUnauthenticated) { ... }
var ErrUnauthenticated = errors.New("envelope: unauthenticated")

// ErrMalformed is matched (errors.Is) by every [*MalformedError].
//
//	if _, err := envelope.Parse(raw); errors.Is(err, envelope.ErrMalformed) { ... }
var ErrMalformed = errors.New("envelope: malformed")

// MalformedError says that an envelope or its JSON form breaks the rules of spec/envelopes.md.
// Field names the offending JSON member ("asker.actor", "editOf", ...) or is empty when the
// payload as a whole is not acceptable JSON; Offset is the byte offset where [Parse] stopped (0
// for [Validate]).
//
//	var me *envelope.MalformedError
//	if errors.As(err, &me) { log(me.Field) }
type MalformedError struct {
	Field  string
	Offset int
}

func (e *MalformedError) Error() string {
	if e.Field == "" {
		return "envelope: malformed payload"
	}
	return "envelope: malformed field " + e.Field
}

// Unwrap returns [ErrMalformed].
func (e *MalformedError) Unwrap() error { return ErrMalformed }

// ValidConversationID reports whether id may be an envelope's ConversationID: it matches
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (1 to 128 ASCII bytes).
//
//	envelope.ValidConversationID("conv-1") // true
func ValidConversationID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// ValidID reports whether id may be an envelope ID: 1 to [MaxIDBytes] bytes, each printable ASCII
// (0x20..0x7E).
//
//	envelope.ValidID("msg-1") // true
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > MaxIDBytes {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// Validate checks the field rules of spec/envelopes.md on an envelope about to be signed, or
// decoded by other means: [ValidConversationID] ConversationID; Kind "user" or "close";
// [ValidID] ID; 0 <= IAT <= [MaxSafeInteger]; Asker.Actor non-empty; EditOf nil or in
// 1..MaxSafeInteger and only on a user envelope; every string valid UTF-8. A close envelope's
// Text carries no meaning but is signed like any other. Sig is not examined. It returns nil or a
// [*MalformedError].
//
//	err := envelope.Validate(e)
//	if errors.Is(err, envelope.ErrMalformed) { ... }
func Validate(e Envelope) error {
	bad := func(f string) error { return &MalformedError{Field: f} }
	switch {
	case !ValidConversationID(e.ConversationID):
		return bad("conversationId")
	case e.Kind != KindUser && e.Kind != KindClose:
		return bad("kind")
	case !ValidID(e.ID):
		return bad("id")
	case e.IAT < 0 || e.IAT > MaxSafeInteger:
		return bad("iat")
	case !utf8.ValidString(e.Text):
		return bad("text")
	case e.Asker.Actor == "" || !utf8.ValidString(e.Asker.Actor):
		return bad("asker.actor")
	case !utf8.ValidString(e.Asker.Tenant):
		return bad("asker.tenant")
	case !utf8.ValidString(e.Asker.OnBehalfOf):
		return bad("asker.onBehalfOf")
	case e.EditOf != nil && (*e.EditOf < 1 || *e.EditOf > MaxSafeInteger || e.Kind != KindUser):
		return bad("editOf")
	}
	return nil
}
