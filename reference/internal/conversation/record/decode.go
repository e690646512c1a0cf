package record

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Value is the value of a transcript decision: the record, and the number of the newest accepted
// turn once it is written (so that a conversation's status reads it from its newest record
// alone). Its JSON is the on-disk shape of every journal already written.
type Value struct {
	Rec   Stored `json:"rec"`
	Turns *int64 `json:"turns,omitempty"`
}

// DecideRecord records the value fn returns as decision id, exactly once, and returns the value
// recorded (a replay decodes what was recorded and never calls fn), as Decide does.
//
//	v, err := record.DecideRecord(c, record.ReplyID(ord), func() (record.Value, error) { return record.Value{Rec: record.Of(e)}, nil })
func DecideRecord(c *kernel.Context, id string, fn func() (Value, error)) (Value, error) {
	return decideOnePass(c, id, fn, decodeValue)
}

// decideOnePass records fn's value as decision id, exactly once, and decodes the value recorded
// with decodeOnePass.
func decideOnePass[T any](c *kernel.Context, id string, fn func() (T, error), onePass func([]byte) (T, bool)) (T, error) {
	return decideWith(c.DecideValue, id, fn, onePass)
}

// decideWith is decideOnePass through decide (Context.DecideValue or DecideTaken).
func decideWith[T any](decide func(string, func() (any, error)) (json.RawMessage, error), id string, fn func() (T, error), onePass func([]byte) (T, bool)) (T, error) {
	raw, err := decide(id, func() (any, error) { return fn() })
	if err != nil {
		var zero T
		return zero, err
	}
	return decodeOnePass(raw, onePass)
}

// decodeOnePass decodes b with onePass when it reads b, and with encoding/json into an empty T
// otherwise.
func decodeOnePass[T any](b []byte, onePass func([]byte) (T, bool)) (T, error) {
	if v, ok := onePass(b); ok {
		return v, nil
	}
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// DecodeValue decodes a transcript decision's value exactly as json.Unmarshal decodes it into an
// empty Value: the same fields, the same values, an error where it fails. A value json.Marshal
// wrote (every value a journal holds) is read in one pass without reflection, which a turn does
// for each of its records twice, where the record is decided and for the streams' tail; anything
// else is decoded by encoding/json.
//
//	v, err := record.DecodeValue(d.Value)
func DecodeValue(b []byte) (Value, error) { return decodeOnePass(b, decodeValue) }

// storedKeys are Stored's JSON names in the order json.Marshal writes them, identityKeys
// loomtype.Identity's. A field added to Stored is added here and to field.
var (
	storedKeys = []string{"cursor", "ord", "turn", "role", "status", "text", "reason", "errorId", "messageId",
		"editOf", "editOfTurn", "asker", "time", "classes", "turnExecutionId", "in"}
	inboxRefKeys = []string{"seq", "sum", "noId"}
	identityKeys = []string{"tenant", "actor", "onBehalfOf"}
)

// decodeValue reads b when it is a Value as json.Marshal writes it: {"rec":...} or
// {"rec":...,"turns":N}, the record an object of Stored's keys in the order json.Marshal writes
// them (any of them left out), without whitespace, with strings as str reads them, integers
// without fraction or exponent, and no null; ok is false for anything else. Such a b is valid
// JSON of the right types, and what it reads is what encoding/json reads from it into an empty
// Value.
func decodeValue(b []byte) (v Value, ok bool) {
	p := scan{b: b}
	if !p.byte('{') || !p.key("rec") {
		return v, false
	}
	if v.Rec, ok = p.stored(); !ok {
		return v, false
	}
	if p.byte(',') {
		if !p.key("turns") {
			return v, false
		}
		if v.Turns, ok = p.intRef(); !ok {
			return v, false
		}
	}
	return v, p.byte('}') && p.end()
}

// key reads "name": when it comes next.
func (p *scan) key(name string) bool {
	k, ok := p.str()
	return ok && string(k) == name && p.byte(':')
}

// stored reads a record object (see decodeValue).
func (p *scan) stored() (s Stored, ok bool) {
	ok = p.object(storedKeys, func(i int) bool { return p.field(&s, storedKeys[i]) })
	return s, ok
}

// object reads an object whose keys are among keys, in their order, any of them left out: value
// reads the value of keys[i]. It gives up on anything else (another key, a key twice, keys out of
// order), which encoding/json then reads.
func (p *scan) object(keys []string, value func(i int) bool) bool {
	if !p.byte('{') {
		return false
	}
	if p.byte('}') {
		return true
	}
	next := 0 // keys[next:] may come
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') {
			return false
		}
		i := next
		for i < len(keys) && keys[i] != string(key) {
			i++
		}
		if i == len(keys) {
			return false
		}
		next = i + 1
		if !value(i) {
			return false
		}
		if p.byte('}') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}

// field reads the value of Stored's field named key into s.
func (p *scan) field(s *Stored, key string) bool {
	var ok bool
	switch key {
	case "cursor":
		s.Cursor, ok = p.text()
	case "ord":
		s.Ord, ok = p.int()
	case "turn":
		s.Turn, ok = p.int()
	case "role":
		var v string
		v, ok = p.text()
		s.Role = loomtype.Role(v)
	case "status":
		var v string
		v, ok = p.text()
		s.Status = loomtype.RecordStatus(v)
	case "text":
		var v string
		if v, ok = p.text(); ok {
			s.Text = &v
		}
	case "reason":
		var v string
		v, ok = p.text()
		s.Reason = loomtype.Reason(v)
	case "errorId":
		s.ErrorID, ok = p.text()
	case "messageId":
		s.MessageID, ok = p.text()
	case "editOf":
		s.EditOf, ok = p.int()
	case "editOfTurn":
		s.EditOfTurn, ok = p.int()
	case "asker":
		var id loomtype.Identity
		if id, ok = p.identity(); ok {
			s.Asker = &id
		}
	case "time":
		start := p.i
		if _, ok = p.str(); ok {
			ok = s.Time.UnmarshalJSON(p.b[start:p.i]) == nil // what encoding/json calls
		}
	case "classes":
		s.Classes, ok = p.strings()
	case "turnExecutionId":
		s.TurnExecutionID, ok = p.text()
	case "in":
		var r InboxRef
		if r, ok = p.inboxRef(); ok {
			s.In = &r
		}
	}
	return ok
}

// inboxRef reads an InboxRef object of inboxRefKeys.
func (p *scan) inboxRef() (r InboxRef, ok bool) {
	ok = p.object(inboxRefKeys, func(i int) bool {
		var read bool
		switch i {
		case 0:
			r.Seq, read = p.int()
		case 1:
			r.Sum, read = p.text()
		default:
			r.NoID, read = p.bool()
		}
		return read
	})
	return r, ok
}

// scan reads b from i on.
type scan struct {
	b []byte
	i int
}

// byte consumes c if it comes next.
func (p *scan) byte(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether all of b was read.
func (p *scan) end() bool { return p.i == len(p.b) }

// str reads a string and returns its value: the bytes between the quotes, which must be valid
// UTF-8 without a control character, with the escapes json.Marshal writes undone (\", \\, \/,
// \b, \f, \n, \r, \t and \u of a character that is not a surrogate; a surrogate, which
// encoding/json pairs or replaces, is not read here).
func (p *scan) str() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	var out []byte // the value up to start, once an escape was met
	escaped := false
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			v := p.b[start:p.i]
			if escaped {
				v = append(out, v...)
			}
			p.i++
			return v, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			escaped = true
			out = append(out, p.b[start:p.i]...)
			r, n := unescape(p.b[p.i:])
			if n == 0 {
				return nil, false
			}
			out = utf8.AppendRune(out, r)
			p.i += n
			start = p.i
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, n := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false
			}
			p.i += n
		}
	}
	return nil, false
}

// unescape reads the escape b begins with and returns its character and length (0: not one
// str reads).
func unescape(b []byte) (rune, int) {
	if len(b) < 2 {
		return 0, 0
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		if len(b) < 6 {
			return 0, 0
		}
		v, err := strconv.ParseUint(string(b[2:6]), 16, 16)
		if err != nil || utf16.IsSurrogate(rune(v)) {
			return 0, 0
		}
		return rune(v), 6
	}
	return 0, 0
}

// text is str as a string.
func (p *scan) text() (string, bool) {
	v, ok := p.str()
	return string(v), ok
}

// int reads an integer as JSON writes it (no leading zero) that fits in an int64.
func (p *scan) int() (int64, bool) {
	start := p.i
	p.byte('-')
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i-digits > 1 && p.b[digits] == '0' {
		// JSON has no leading zeros. ParseInt refuses a number without digits, and the caller
		// what follows the digits: a fraction, an exponent.
		return 0, false
	}
	v, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return v, err == nil
}

// intRef reads an integer into a new variable.
func (p *scan) intRef() (*int64, bool) {
	n, ok := p.int()
	if !ok {
		return nil, false
	}
	return &n, true
}

// identity reads an identity object of the keys tenant, actor and onBehalfOf, in that order, any
// of them left out.
func (p *scan) identity() (id loomtype.Identity, ok bool) {
	ok = p.object(identityKeys, func(i int) bool {
		v, ok := p.text()
		switch i {
		case 0:
			id.Tenant = v
		case 1:
			id.Actor = v
		default:
			id.OnBehalfOf = v
		}
		return ok
	})
	return id, ok
}

// strings reads an array of strings ([] is an empty, non-nil slice, as encoding/json makes it).
func (p *scan) strings() ([]string, bool) {
	if !p.byte('[') {
		return nil, false
	}
	out := []string{}
	if p.byte(']') {
		return out, true
	}
	for {
		v, ok := p.text()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if p.byte(']') {
			return out, true
		}
		if !p.byte(',') {
			return nil, false
		}
	}
}
