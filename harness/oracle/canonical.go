package oracle

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// quote writes s as a JSON string the way spec/envelopes.md §3 prescribes (RFC 8785): only `"`,
// `\` and U+0000..U+001F are escaped, five of those by name and the rest as \u00xx in lowercase
// hex; every other code point is its UTF-8 bytes. A byte that is not part of valid UTF-8 is written
// as U+FFFD (such a string never verifies, see [Verify]).
func quote(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s { // ranging a string yields U+FFFD for each ill-formed byte
		switch {
		case r == '"':
			sb.WriteString(`\"`)
		case r == '\\':
			sb.WriteString(`\\`)
		case r < 0x20:
			if named, ok := namedEscapes[r]; ok {
				sb.WriteString(named)
			} else {
				sb.WriteString(`\u00`)
				sb.WriteByte("0123456789abcdef"[r>>4])
				sb.WriteByte("0123456789abcdef"[r&15])
			}
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
}

var namedEscapes = map[rune]string{'\b': `\b`, '\t': `\t`, '\n': `\n`, '\f': `\f`, '\r': `\r`}

// member is one "key":value pair of a canonical object; value is already encoded.
type member struct{ key, value string }

func object(ms []member) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			sb.WriteByte(',')
		}
		quote(&sb, m.key)
		sb.WriteByte(':')
		sb.WriteString(m.value)
	}
	sb.WriteByte('}')
	return sb.String()
}

func str(s string) string {
	var sb strings.Builder
	quote(&sb, s)
	return sb.String()
}

func integer(n int64) string { return strconv.FormatInt(n, 10) }

// askerObject is the canonical asker: actor, onBehalfOf, tenant, each only when non-empty.
func askerObject(id Identity) string {
	var ms []member
	for _, m := range []member{{"actor", id.Actor}, {"onBehalfOf", id.OnBehalfOf}, {"tenant", id.Tenant}} {
		if m.value != "" {
			ms = append(ms, member{m.key, str(m.value)})
		}
	}
	return object(ms)
}

// Body returns the JSON object part of the canonical bytes (spec/envelopes.md §3 item 3): the
// members asker, conversationId, editOf (when set), iat, id, kind and text in that order, with no
// whitespace. Sig is not covered. [Canonical] prefixes it with the domain; a MAC over Body alone is
// what a host that forgets the domain would make.
//
//	b := oracle.Body(e) // {"asker":{"actor":"alice"},"conversationId":"c1",...}
func Body(e Envelope) []byte {
	ms := []member{{"asker", askerObject(e.Asker)}, {"conversationId", str(e.ConversationID)}}
	if e.EditOf != nil {
		ms = append(ms, member{"editOf", integer(*e.EditOf)})
	}
	ms = append(ms, member{"iat", integer(e.IAT)}, member{"id", str(e.ID)}, member{"kind", str(e.Kind)},
		member{"text", str(e.Text)})
	return []byte(object(ms))
}

// Canonical returns the bytes an envelope's signature covers: the 29 bytes of [Domain], one 0x00
// byte, then [Body]. It never fails.
//
//	c := oracle.Canonical(e) // "loom/conversation/envelope/v1\x00{...}"
func Canonical(e Envelope) []byte {
	return append([]byte(Domain+"\x00"), Body(e)...)
}

// MAC returns base64url without padding (RFC 4648 §5) of HMAC-SHA-256(key, msg): 43 characters.
// [Signature] is MAC over [Canonical]; MAC over anything else is a signature no receiver may accept.
//
//	forged := oracle.MAC(key, oracle.Body(e)) // signed without the domain
func MAC(key, msg []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// Signature returns the signature of e under key (spec/envelopes.md §4).
//
//	sig := oracle.Signature(key, e)
func Signature(key []byte, e Envelope) string { return MAC(key, Canonical(e)) }

// Sign returns e with Sig set to [Signature](key, e). It does not validate e.
//
//	e = oracle.Sign(key, e)
func Sign(key []byte, e Envelope) Envelope {
	e.Sig = Signature(key, e)
	return e
}

// Verify returns nil when e.Sig is exactly the signature of e under one of keys, and
// [ErrUnauthenticated] otherwise: for any other string (truncated, empty, padded, the standard
// alphabet), for an empty key, and for an envelope with a string that is not valid UTF-8. Each
// comparison is constant-time.
//
//	err := oracle.Verify([][]byte{current, previous}, e)
func Verify(keys [][]byte, e Envelope) error {
	for _, s := range []string{e.ConversationID, e.Kind, e.ID, e.Text, e.Asker.Tenant, e.Asker.Actor, e.Asker.OnBehalfOf} {
		if !utf8.ValidString(s) {
			return ErrUnauthenticated
		}
	}
	c := Canonical(e)
	match := 0
	for _, k := range keys {
		if len(k) > 0 {
			match |= subtle.ConstantTimeCompare([]byte(MAC(k, c)), []byte(e.Sig))
		}
	}
	if match == 0 {
		return ErrUnauthenticated
	}
	return nil
}

// Wire returns the envelope's JSON wire form (spec/envelopes.md §1): every member, editOf only
// when set, and sig always (even when empty). Strings are written as in [Canonical]; member order
// is free on the wire, and this one is conversationId, kind, id, iat, text, asker, editOf, sig.
//
//	payload := oracle.Sign(key, e).Wire()
func (e Envelope) Wire() []byte { return e.wire(true) }

// WireUnsigned is [Envelope.Wire] without the sig member: a payload that is not an envelope.
//
//	payload := e.WireUnsigned() // refused as malformed
func (e Envelope) WireUnsigned() []byte { return e.wire(false) }

func (e Envelope) wire(signed bool) []byte {
	ms := []member{{"conversationId", str(e.ConversationID)}, {"kind", str(e.Kind)}, {"id", str(e.ID)},
		{"iat", integer(e.IAT)}, {"text", str(e.Text)}, {"asker", askerObject(e.Asker)}}
	if e.EditOf != nil {
		ms = append(ms, member{"editOf", integer(*e.EditOf)})
	}
	if signed {
		ms = append(ms, member{"sig", str(e.Sig)})
	}
	return []byte(object(ms))
}

// TurnExecutionID returns the id of the execution that runs the turn of a conversation whose
// record ordinal is ord (spec/envelopes.md §7): "turn:" + conversationID + ":o" + D + ":" + the
// first 24 lowercase hex characters of HMAC-SHA-256(key, conversationID + "|" + D), D the decimal
// ord. The MAC has no domain.
//
//	id := oracle.TurnExecutionID(key, "conv-1", 1) // "turn:conv-1:o1:8349779601b6628f150ce111"
func TurnExecutionID(key []byte, conversationID string, ord int64) string {
	d := integer(ord)
	h := hmac.New(sha256.New, key)
	h.Write([]byte(conversationID + "|" + d))
	return "turn:" + conversationID + ":o" + d + ":" + hex.EncodeToString(h.Sum(nil))[:24]
}

// SenderKey returns the dedupe identity of a sent message (spec/envelopes.md §8): lowercase hex
// SHA-256 of the JSON array [tenant, actor, onBehalfOf, messageID], strings written as in
// [Canonical], an absent member as "".
//
//	k := oracle.SenderKey("", "alice", "", "msg-1") // "561b5acf…"
func SenderKey(tenant, actor, onBehalfOf, messageID string) string {
	a := "[" + str(tenant) + "," + str(actor) + "," + str(onBehalfOf) + "," + str(messageID) + "]"
	sum := sha256.Sum256([]byte(a))
	return hex.EncodeToString(sum[:])
}
