package oracle

import (
	"regexp"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A value is one parsed JSON value: exactly one of its fields describes it.
type value struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' true/false, 'z' null
	members []pair
	items   []value
	text    string // the decoded string, or the number exactly as written
}

type pair struct {
	key string
	val value
}

// decoder is a strict JSON reader (RFC 8259) that also refuses duplicate members and escapes of
// unpaired surrogates, as spec/envelopes.md §1.1 requires.
type decoder struct {
	b   []byte
	pos int
	err string
}

// decodeJSON parses b as exactly one JSON value with optional whitespace around it.
func decodeJSON(b []byte) (value, string) {
	if !utf8.Valid(b) {
		return value{}, "not valid UTF-8"
	}
	d := &decoder{b: b}
	d.space()
	v := d.value(0)
	if d.err != "" {
		return value{}, d.err
	}
	d.space()
	if d.pos != len(d.b) {
		return value{}, "data after the JSON value"
	}
	return v, ""
}

func (d *decoder) fail(why string) value {
	if d.err == "" {
		d.err = why + " at byte " + strconv.Itoa(d.pos)
	}
	return value{}
}

func (d *decoder) space() {
	for d.pos < len(d.b) && (d.b[d.pos] == ' ' || d.b[d.pos] == '\t' || d.b[d.pos] == '\n' || d.b[d.pos] == '\r') {
		d.pos++
	}
}

func (d *decoder) peek() byte {
	if d.pos < len(d.b) {
		return d.b[d.pos]
	}
	return 0
}

func (d *decoder) literal(word string) bool {
	if len(d.b)-d.pos >= len(word) && string(d.b[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return true
	}
	return false
}

func (d *decoder) value(depth int) value {
	if depth > 32 {
		return d.fail("nesting too deep")
	}
	switch c := d.peek(); {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, ok := d.string()
		if !ok {
			return d.fail("bad string")
		}
		return value{kind: 's', text: s}
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.literal("true"), d.literal("false"):
		return value{kind: 'b'}
	case d.literal("null"):
		return value{kind: 'z'}
	}
	return d.fail("unexpected character")
}

func (d *decoder) object(depth int) value {
	d.pos++ // {
	v := value{kind: 'o'}
	seen := map[string]bool{}
	d.space()
	if d.peek() == '}' {
		d.pos++
		return v
	}
	for {
		d.space()
		k, ok := d.string()
		if !ok {
			return d.fail("bad member name")
		}
		if seen[k] {
			return d.fail("member " + strconv.Quote(k) + " twice")
		}
		seen[k] = true
		d.space()
		if d.peek() != ':' {
			return d.fail("expected ':'")
		}
		d.pos++
		d.space()
		m := d.value(depth + 1)
		if d.err != "" {
			return value{}
		}
		v.members = append(v.members, pair{k, m})
		d.space()
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return v
		default:
			return d.fail("expected ',' or '}'")
		}
	}
}

func (d *decoder) array(depth int) value {
	d.pos++ // [
	v := value{kind: 'a'}
	d.space()
	if d.peek() == ']' {
		d.pos++
		return v
	}
	for {
		d.space()
		it := d.value(depth + 1)
		if d.err != "" {
			return value{}
		}
		v.items = append(v.items, it)
		d.space()
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return v
		default:
			return d.fail("expected ',' or ']'")
		}
	}
}

// number keeps the number as written; the grammar is RFC 8259's.
func (d *decoder) number() value {
	start := d.pos
	digits := func() int {
		n := 0
		for d.pos < len(d.b) && d.b[d.pos] >= '0' && d.b[d.pos] <= '9' {
			d.pos++
			n++
		}
		return n
	}
	if d.peek() == '-' {
		d.pos++
	}
	if d.peek() == '0' {
		d.pos++
	} else if digits() == 0 {
		return d.fail("bad number")
	}
	if d.peek() == '.' {
		d.pos++
		if digits() == 0 {
			return d.fail("bad number")
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.pos++
		if c := d.peek(); c == '+' || c == '-' {
			d.pos++
		}
		if digits() == 0 {
			return d.fail("bad number")
		}
	}
	return value{kind: 'n', text: string(d.b[start:d.pos])}
}

// string reads a string at d.pos and returns it decoded.
func (d *decoder) string() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	d.pos++
	var out []byte
	for d.pos < len(d.b) {
		c := d.b[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			d.pos++
			continue
		}
		d.pos++ // the backslash
		if d.pos >= len(d.b) {
			return "", false
		}
		esc := d.b[d.pos]
		d.pos++
		if r, ok := simpleEscapes[esc]; ok {
			out = append(out, r)
			continue
		}
		if esc != 'u' {
			return "", false
		}
		r, ok := d.hex()
		if !ok {
			return "", false
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return "", false // a low surrogate with no high one before it
		case r >= 0xD800 && r <= 0xDBFF:
			if !d.literal(`\u`) {
				return "", false
			}
			lo, ok := d.hex()
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return "", false
			}
			r = utf16.DecodeRune(r, lo)
		}
		out = utf8.AppendRune(out, r)
	}
	return "", false
}

var simpleEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func (d *decoder) hex() (rune, bool) {
	if len(d.b)-d.pos < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(d.b[d.pos:d.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	d.pos += 4
	return rune(n), true
}

var (
	conversationIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	integerPattern        = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
)

// safeInteger reads a number written as spec/envelopes.md §1.1 allows, in 0..2^53-1.
func safeInteger(v value) (int64, bool) {
	if v.kind != 'n' || !integerPattern.MatchString(v.text) || len(v.text) > 16 {
		return 0, false
	}
	n, err := strconv.ParseInt(v.text, 10, 64)
	return n, err == nil && n <= maxSafe
}

// validID is the envelope id rule: 1 to 128 bytes, each printable ASCII.
func validID(s string) bool {
	if len(s) == 0 || len(s) > maxIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7E {
			return false
		}
	}
	return true
}

// Parse decodes an envelope's wire form strictly (spec/envelopes.md §1.1) and checks every rule of
// the §1 table. It does not verify the signature. Any breach is a [*MalformedError]. An empty sig
// string parses (it is a signature that does not verify).
//
//	e, err := oracle.Parse(payload)
func Parse(raw []byte) (Envelope, error) {
	v, why := decodeJSON(raw)
	if why != "" {
		return Envelope{}, malformed("%s", why)
	}
	if v.kind != 'o' {
		return Envelope{}, malformed("not a JSON object")
	}
	var e Envelope
	has := map[string]bool{}
	for _, m := range v.members {
		has[m.key] = true
		switch m.key {
		case "conversationId", "kind", "id", "text", "sig":
			if m.val.kind != 's' {
				return Envelope{}, malformed("%s is not a string", m.key)
			}
			switch m.key {
			case "conversationId":
				e.ConversationID = m.val.text
			case "kind":
				e.Kind = m.val.text
			case "id":
				e.ID = m.val.text
			case "text":
				e.Text = m.val.text
			case "sig":
				e.Sig = m.val.text
			}
		case "iat", "editOf":
			n, ok := safeInteger(m.val)
			if !ok {
				return Envelope{}, malformed("%s is not an integer in 0..2^53-1", m.key)
			}
			if m.key == "iat" {
				e.IAT = n
			} else {
				e.EditOf = &n
			}
		case "asker":
			id, err := parseAsker(m.val)
			if err != nil {
				return Envelope{}, err
			}
			e.Asker = id
		default:
			return Envelope{}, malformed("unknown member %q", m.key)
		}
	}
	for _, k := range []string{"conversationId", "kind", "id", "iat", "asker", "sig"} {
		if !has[k] {
			return Envelope{}, malformed("no %s", k)
		}
	}
	switch {
	case !conversationIDPattern.MatchString(e.ConversationID):
		return Envelope{}, malformed("conversationId does not match the pattern")
	case e.Kind != KindUser && e.Kind != KindClose:
		return Envelope{}, malformed("unknown kind %q", e.Kind)
	case e.Kind == KindUser && !has["text"]:
		return Envelope{}, malformed("a user envelope without text")
	case !validID(e.ID):
		return Envelope{}, malformed("id is not 1 to 128 printable ASCII bytes")
	case e.EditOf != nil && e.Kind != KindUser:
		return Envelope{}, malformed("editOf on a %s envelope", e.Kind)
	case e.EditOf != nil && *e.EditOf < 1:
		return Envelope{}, malformed("editOf below 1")
	}
	return e, nil
}

func parseAsker(v value) (Identity, error) {
	if v.kind != 'o' {
		return Identity{}, malformed("asker is not an object")
	}
	var id Identity
	for _, m := range v.members {
		if m.val.kind != 's' {
			return Identity{}, malformed("asker.%s is not a string", m.key)
		}
		switch m.key {
		case "tenant":
			id.Tenant = m.val.text
		case "actor":
			id.Actor = m.val.text
		case "onBehalfOf":
			id.OnBehalfOf = m.val.text
		default:
			return Identity{}, malformed("unknown member asker.%s", m.key)
		}
	}
	if id.Actor == "" {
		return Identity{}, malformed("asker without an actor")
	}
	return id, nil
}
