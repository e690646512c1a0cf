package envelope

import (
	"errors"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/internal/strictjson"
)

// Parse decodes the JSON wire form of an envelope strictly, as spec/envelopes.md requires, and
// validates it with the rules of [Validate]. It does not verify the signature.
//
// The payload must pass strictjson.Check (the JSON rules every body of the engine shares) and be
// one JSON object (surrounding whitespace allowed) with the members conversationId, kind, id, iat, asker and sig (any string: whether it verifies, and the
// empty string never does, is [Verify]'s question), text (optional on a close envelope, where
// absent means ""), and optionally editOf; no other member and no member twice. asker is an
// object with actor and optionally tenant and onBehalfOf, all strings (an empty string counts as
// absent). iat and editOf are integers written without fraction or exponent. Strings may not
// contain unpaired surrogate escapes. Any breach returns a [*MalformedError]. Parse is safe for
// concurrent use.
//
//	e, err := envelope.Parse(raw)
func Parse(raw []byte) (Envelope, error) {
	var e Envelope
	p := &reader{s: raw}
	if !utf8.Valid(raw) {
		return e, &MalformedError{}
	}
	seen := map[string]bool{}
	p.ws()
	ok := p.object(func(key string) bool {
		if seen[key] {
			p.field = key
			return false
		}
		seen[key] = true
		p.field = key
		var ok bool
		switch key {
		case "conversationId":
			e.ConversationID, ok = p.str()
		case "kind":
			e.Kind, ok = p.str()
		case "id":
			e.ID, ok = p.str()
		case "text":
			e.Text, ok = p.str()
		case "sig":
			e.Sig, ok = p.str()
		case "iat":
			e.IAT, ok = p.integer()
		case "editOf":
			var n int64
			n, ok = p.integer()
			e.EditOf = &n
		case "asker":
			e.Asker, ok = p.asker()
		}
		return ok
	})
	if !ok {
		return Envelope{}, &MalformedError{Field: p.field, Offset: p.i}
	}
	p.field = ""
	p.ws()
	if p.i != len(p.s) {
		return Envelope{}, &MalformedError{Offset: p.i}
	}
	// The JSON rules every body of the engine shares (UTF-8, paired surrogates, no member twice,
	// one value and nothing after it) are strictjson.Check's: the reader above applies them
	// member by member, and an envelope also passes Check, so the two can never disagree.
	if err := strictjson.Check(raw); err != nil {
		me := &MalformedError{}
		var se *strictjson.Error
		if errors.As(err, &se) {
			me.Field, me.Offset = se.Field, se.Offset
		}
		return Envelope{}, me
	}
	for _, k := range []string{"conversationId", "kind", "id", "iat", "asker", "sig"} {
		if !seen[k] {
			return Envelope{}, &MalformedError{Field: k, Offset: p.i}
		}
	}
	if !seen["text"] && e.Kind != KindClose {
		return Envelope{}, &MalformedError{Field: "text", Offset: p.i}
	}
	if err := Validate(e); err != nil {
		err.(*MalformedError).Offset = p.i
		return Envelope{}, err
	}
	return e, nil
}

// reader is a minimal strict JSON reader over a byte slice already known to be valid UTF-8.
type reader struct {
	s     []byte
	i     int
	field string // the member being read, for error reports
}

func (p *reader) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *reader) eat(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// object reads {"k": v, ...}; member is called with the reader positioned before each value and
// must consume it. It rejects keys member does not know by returning false from member.
func (p *reader) object(member func(key string) bool) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		return true
	}
	for {
		p.ws()
		p.field = ""
		key, ok := p.str()
		if !ok || !p.eat(':') {
			return false
		}
		p.ws()
		if !member(key) {
			return false
		}
		if p.eat(',') {
			continue
		}
		return p.eat('}')
	}
}

// array reads [v, ...]; elem is called with the reader positioned before each value.
func (p *reader) array(elem func() bool) bool {
	if !p.eat('[') {
		return false
	}
	if p.eat(']') {
		return true
	}
	for {
		p.ws()
		if !elem() {
			return false
		}
		if p.eat(',') {
			continue
		}
		return p.eat(']')
	}
}

func (p *reader) asker() (Identity, bool) {
	var id Identity
	seen := map[string]bool{}
	ok := p.object(func(key string) bool {
		if seen[key] {
			p.field = "asker." + key
			return false
		}
		seen[key] = true
		p.field = "asker." + key
		var ok bool
		switch key {
		case "tenant":
			id.Tenant, ok = p.str()
		case "actor":
			id.Actor, ok = p.str()
		case "onBehalfOf":
			id.OnBehalfOf, ok = p.str()
		}
		return ok
	})
	if ok {
		p.field = "asker"
	}
	return id, ok
}

// str reads a JSON string with the rules every body shares (strictjson.String): raw control
// characters, unknown escapes and unpaired surrogate escapes are refused.
func (p *reader) str() (string, bool) {
	v, next, ok := strictjson.String(p.s, p.i)
	p.i = next
	return v, ok
}

func (p *reader) integer() (int64, bool) {
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		return 0, false // negative values are never in range
	}
	var n int64
	digits := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		if digits == 16 {
			return 0, false // more than 16 digits exceeds MaxSafeInteger
		}
		n = n*10 + int64(p.s[p.i]-'0')
		digits++
		p.i++
	}
	if digits == 0 || (digits > 1 && p.s[start] == '0') || n > MaxSafeInteger {
		return 0, false
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}
