package envelope

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
)

// Canonical returns the bytes an envelope's signature covers: [Domain], one 0x00 byte, then the
// JSON object
//
//	{"asker":{"actor":A,"onBehalfOf":O,"tenant":T},"conversationId":C,"editOf":E,"iat":I,"id":D,"kind":K,"text":X}
//
// with no whitespace, members in exactly this (byte-sorted) order, "editOf" only when EditOf is
// set, and each asker member only when its string is non-empty. Integers are plain decimal.
// Strings are escaped as RFC 8785 prescribes: `"` and `\` and the control characters U+0000..U+001F
// only (\b \t \n \f \r by name, the rest as \u00XX in lowercase hex); everything else, including
// U+2028, U+2029, U+007F and "/", is written as its UTF-8 bytes. Sig is not covered.
//
// Canonical never fails. A string that is not valid UTF-8 has each ill-formed byte written as
// U+FFFD; such an envelope is not valid and never passes [Verify].
//
//	b := envelope.Canonical(e) // "loom/conversation/envelope/v1\x00{\"asker\":{...},...}"
func Canonical(e Envelope) []byte {
	b := make([]byte, 0, len(Domain)+1+96+len(e.ConversationID)+len(e.ID)+len(e.Text)+
		len(e.Asker.Tenant)+len(e.Asker.Actor)+len(e.Asker.OnBehalfOf))
	b = append(b, Domain...)
	b = append(b, 0)
	b = append(b, `{"asker":{`...)
	sep := false
	for _, m := range [3]struct{ k, v string }{
		{"actor", e.Asker.Actor}, {"onBehalfOf", e.Asker.OnBehalfOf}, {"tenant", e.Asker.Tenant},
	} {
		if m.v == "" {
			continue
		}
		if sep {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.k...)
		b = append(b, `":`...)
		b = appendString(b, m.v)
		sep = true
	}
	b = append(b, `},"conversationId":`...)
	b = appendString(b, e.ConversationID)
	if e.EditOf != nil {
		b = append(b, `,"editOf":`...)
		b = strconv.AppendInt(b, *e.EditOf, 10)
	}
	b = append(b, `,"iat":`...)
	b = strconv.AppendInt(b, e.IAT, 10)
	b = append(b, `,"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"kind":`...)
	b = appendString(b, e.Kind)
	b = append(b, `,"text":`...)
	b = appendString(b, e.Text)
	b = append(b, '}')
	return b
}

// appendString appends s as a JSON string escaped per RFC 8785; ill-formed bytes become U+FFFD.
func appendString(b []byte, s string) []byte {
	const hexdigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b = append(b, '\\', '"')
			case c == '\\':
				b = append(b, '\\', '\\')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

func mac(key, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}

// Signature returns the signature of e under key: the unpadded base64url encoding (RFC 4648 §5)
// of HMAC-SHA-256(key, Canonical(e)), always 43 characters.
//
//	sig := envelope.Signature(key, e)
func Signature(key []byte, e Envelope) string {
	return base64.RawURLEncoding.EncodeToString(mac(key, Canonical(e)))
}

// Sign returns e with Sig set to [Signature](key, e). Sign with the current key only. Sign does
// not validate; call [Validate] first when the fields come from elsewhere, since an invalid
// envelope never passes [Check].
//
//	e = envelope.Sign(currentKey, e)
func Sign(key []byte, e Envelope) Envelope {
	e.Sig = Signature(key, e)
	return e
}

// Verify reports whether e.Sig is the signature of e under one of keys (the current key first,
// then the previous ones still accepted). It returns nil or [ErrUnauthenticated]. The comparison
// is constant-time per key and only the exact 43-character encoding matches. An empty key never
// verifies, nor does an envelope with a string that is not valid UTF-8. Safe for concurrent use.
//
//	if err := envelope.Verify([][]byte{current, previous}, e); err != nil { ... }
func Verify(keys [][]byte, e Envelope) error {
	if !utf8.ValidString(e.ConversationID) || !utf8.ValidString(e.Kind) || !utf8.ValidString(e.ID) ||
		!utf8.ValidString(e.Text) || !utf8.ValidString(e.Asker.Tenant) ||
		!utf8.ValidString(e.Asker.Actor) || !utf8.ValidString(e.Asker.OnBehalfOf) {
		return ErrUnauthenticated
	}
	body := Canonical(e)
	got := []byte(e.Sig)
	ok := 0
	for _, k := range keys {
		if len(k) == 0 {
			continue
		}
		want := []byte(base64.RawURLEncoding.EncodeToString(mac(k, body)))
		ok |= subtle.ConstantTimeCompare(want, got)
	}
	if ok != 1 {
		return ErrUnauthenticated
	}
	return nil
}

// TurnExecutionID returns the id of the execution that runs turn ord of a conversation:
//
//	"turn:" + conversationID + ":o" + decimal(ord) + ":" + hex24
//
// where hex24 is the first 24 lowercase hex characters (12 bytes) of
// HMAC-SHA-256(key, conversationID + "|" + decimal(ord)) and decimal is the shortest base-10 form
// (a leading "-" for a negative ord). It is deterministic, and cannot be predicted without the key.
// A key rotation changes the result, so callers record the id with the turn and reuse it.
//
//	id := envelope.TurnExecutionID(key, "c1", 7) // "turn:c1:o7:<24 hex>"
func TurnExecutionID(key []byte, conversationID string, ord int64) string {
	d := strconv.FormatInt(ord, 10)
	sum := mac(key, []byte(conversationID+"|"+d))
	return "turn:" + conversationID + ":o" + d + ":" + hex.EncodeToString(sum[:12])
}

// SenderKey returns the dedupe identity of a sent message: the lowercase hex SHA-256 of the
// canonical JSON array [tenant, actor, onBehalfOf, messageID] (no whitespace, strings escaped as
// in [Canonical], an absent field as ""). The result is 64 characters and a valid envelope ID.
//
//	id := envelope.SenderKey("", "alice", "", "msg-1")
func SenderKey(tenant, actor, onBehalfOf, messageID string) string {
	b := make([]byte, 0, 8+len(tenant)+len(actor)+len(onBehalfOf)+len(messageID))
	b = append(b, '[')
	b = appendString(b, tenant)
	b = append(b, ',')
	b = appendString(b, actor)
	b = append(b, ',')
	b = appendString(b, onBehalfOf)
	b = append(b, ',')
	b = appendString(b, messageID)
	b = append(b, ']')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
