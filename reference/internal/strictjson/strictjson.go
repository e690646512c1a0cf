// Package strictjson is the one JSON decoder of every body the reference engine takes: request
// bodies of the HTTP surface and the envelopes of spec/envelopes.md. It accepts a body only when
// it is exactly one JSON value under rules stricter than encoding/json's:
//
//   - the bytes are valid UTF-8, and no \u escape leaves a surrogate unpaired;
//   - no object names a member twice (compared after unescaping);
//   - nothing but white space follows the value, and nothing but white space precedes it;
//   - (Decode only) every member is named exactly as the Go type names it, in its case; every
//     member the type requires is present; no member the type gives a value is null.
//
// It imports nothing of the engine, so any package may depend on it.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Check accepts.
const MaxDepth = 1000

// ErrInvalid is matched (errors.Is) by every *Error.
//
//	if errors.Is(strictjson.Check(raw), strictjson.ErrInvalid) { ... }
var ErrInvalid = errors.New("strictjson: invalid body")

// Error says why a body was refused. Field is the dotted path of the offending member
// ("identity.actor", "payload.a"; array positions are not part of it), empty when the body as a
// whole is at fault (not JSON, trailing data, invalid UTF-8 outside any member, null body).
// Offset is the byte offset where the check stopped (0 when the shape check found the fault).
//
//	var e *strictjson.Error
//	if errors.As(err, &e) { reply400(e.Field) }
type Error struct {
	Field  string
	Offset int
}

func (e *Error) Error() string {
	if e.Field == "" {
		return "strictjson: invalid body"
	}
	return "strictjson: invalid member " + e.Field
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Check reports whether raw is exactly one strict JSON value (see the package comment); it does
// not look at what the value means. The error is an *Error. Safe for concurrent use.
//
//	if err := strictjson.Check(body); err != nil { ... }
func Check(raw []byte) error {
	if !utf8.Valid(raw) {
		// Name the member holding the bad byte when there is one: scan with the invalid byte
		// tolerated only to find the path.
		s := &scanner{s: raw}
		s.ws()
		s.value(0, "")
		return &Error{Field: s.badUTF8Field, Offset: s.badUTF8At}
	}
	s := &scanner{s: raw, strictUTF8: true}
	s.ws()
	if !s.value(0, "") {
		return &Error{Field: s.field, Offset: s.i}
	}
	s.ws()
	if s.i != len(s.s) {
		return &Error{Offset: s.i}
	}
	return nil
}

// scanner is a strict JSON reader over a byte slice.
type scanner struct {
	s          []byte
	i          int
	field      string // the member path where the scan stopped
	strictUTF8 bool

	badUTF8Field string
	badUTF8At    int
	sawBadUTF8   bool
}

func (p *scanner) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// value reads one value at p.i; path is the member it belongs to.
func (p *scanner) value(depth int, path string) bool {
	p.field = path
	if p.i >= len(p.s) {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth+1, path)
	case c == '[':
		return p.array(depth+1, path)
	case c == '"':
		_, ok := p.str(path)
		return ok
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	}
	return false
}

func (p *scanner) lit(w string) bool {
	if !bytes.HasPrefix(p.s[p.i:], []byte(w)) {
		return false
	}
	p.i += len(w)
	return true
}

func (p *scanner) object(depth int, path string) bool {
	if depth > MaxDepth {
		return false
	}
	p.i++ // {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return true
	}
	seen := map[string]bool{}
	for {
		p.ws()
		p.field = path
		key, ok := p.str(path)
		if !ok {
			return false
		}
		member := join(path, key)
		if seen[key] {
			p.field = member
			return false
		}
		seen[key] = true
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			p.field = member
			return false
		}
		p.i++
		p.ws()
		if !p.value(depth, member) {
			return false
		}
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			p.field = path
			return true
		}
		p.field = path
		return false
	}
}

func (p *scanner) array(depth int, path string) bool {
	if depth > MaxDepth {
		return false
	}
	p.i++ // [
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return true
	}
	for {
		p.ws()
		if !p.value(depth, path) {
			return false
		}
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			p.field = path
			return true
		}
		p.field = path
		return false
	}
}

func hexval(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

func (p *scanner) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for k := range 4 {
		v := hexval(p.s[p.i+k])
		if v < 0 {
			return 0, false
		}
		r = r<<4 | v
	}
	p.i += 4
	return r, true
}

// str reads a JSON string and returns it unescaped. Raw control characters, unknown escapes and
// unpaired surrogate escapes are refused; invalid UTF-8 is refused in strict mode and otherwise
// only noted (with the member it is in) for Check's report.
func (p *scanner) str(path string) (string, bool) {
	if p.i >= len(p.s) || p.s[p.i] != '"' {
		return "", false
	}
	p.i++
	var out []byte
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			out = append(out, p.s[start:p.i]...)
			p.i++
			return string(out), true
		case c < 0x20:
			return "", false
		case c == '\\':
			out = append(out, p.s[start:p.i]...)
			p.i++
			if p.i >= len(p.s) {
				return "", false
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xdc00 || p.i+2 > len(p.s) || p.s[p.i] != '\\' || p.s[p.i+1] != 'u' {
						return "", false
					}
					p.i += 2
					lo, ok := p.hex4()
					if !ok || lo < 0xdc00 || lo > 0xdfff {
						return "", false
					}
					r = utf16.DecodeRune(r, lo)
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", false
			}
			start = p.i
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, n := utf8.DecodeRune(p.s[p.i:])
			if r == utf8.RuneError && n == 1 {
				if p.strictUTF8 {
					return "", false
				}
				if !p.sawBadUTF8 {
					p.sawBadUTF8, p.badUTF8Field, p.badUTF8At = true, path, p.i
				}
			}
			p.i += n
		}
	}
	return "", false
}

// String reads the JSON string that starts at b[i] (its opening quote) and returns it unescaped,
// with the index just past its closing quote. Raw control characters, unknown escapes, unpaired
// surrogate escapes and invalid UTF-8 are refused (ok false; next is where the read stopped).
// Other strict readers of the engine (the envelope parser) read their strings with it, so that
// every reader agrees on what a string is. Safe for concurrent use.
//
//	s, next, ok := strictjson.String([]byte(`"a\u00e9"`), 0) // "aé", 9, true
func String(b []byte, i int) (s string, next int, ok bool) {
	p := &scanner{s: b, i: i, strictUTF8: true}
	s, ok = p.str("")
	return s, p.i, ok
}

func (p *scanner) digits() int {
	n := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *scanner) number() bool {
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if p.digits() == 0 {
		return false
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return false
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

// Decode checks raw (Check), then its shape against v's Go type, then decodes it into v, which
// must be a non-nil pointer. The shape rules: every member of an object decoded into a struct is
// named exactly as a field's json tag names it (no other member, no case folding); a field whose
// tag has no omitempty is required; no member is null unless its field is a json.RawMessage or an
// interface (those take any value as it is, still under Check's rules); a null body is refused.
// A member whose value has the wrong type is named too. Every refusal is an *Error.
//
//	var b struct {
//		Text      *string `json:"text"`
//		MessageID *string `json:"messageId,omitempty"`
//	}
//	if err := strictjson.Decode(body, &b); err != nil { ... }
func Decode(raw []byte, v any) error {
	if err := Check(raw); err != nil {
		return err
	}
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return &Error{}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if f, ok := shape(dec, t.Elem(), ""); !ok {
		return &Error{Field: f}
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Error{Field: fieldOf(err)}
	}
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

type member struct {
	t        reflect.Type
	required bool
}

// fields lists the members a struct type names, with whether each is required.
func fields(t reflect.Type) map[string]member {
	out := map[string]member{}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" || !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			omit = omit || o == "omitempty" || o == "omitzero"
		}
		out[name] = member{t: sf.Type, required: !omit}
	}
	return out
}

// shape walks one JSON value (already known to pass Check) along the Go type it will decode into
// and reports the path of the first member the type does not name exactly, a required member
// that is absent, or a null where the type wants a value.
func shape(dec *json.Decoder, t reflect.Type, path string) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	free := t == rawMessageType || t.Kind() == reflect.Interface
	tok, err := dec.Token()
	if err != nil {
		return path, false
	}
	if free {
		return path, skipRest(dec, tok)
	}
	switch tok {
	case nil:
		return path, false
	case json.Delim('{'):
		var fs map[string]member
		if t.Kind() == reflect.Struct {
			fs = fields(t)
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return path, false
			}
			k, _ := kt.(string)
			p := join(path, k)
			ft := t
			switch {
			case fs != nil:
				m, ok := fs[k]
				if !ok {
					return p, false
				}
				ft = m.t
			case t.Kind() == reflect.Map:
				ft = t.Elem()
			default:
				return path, false // an object where the type wants something else
			}
			seen[k] = true
			if f, ok := shape(dec, ft, p); !ok {
				return f, false
			}
		}
		if _, err := dec.Token(); err != nil {
			return path, false
		}
		for name, m := range fs {
			if m.required && !seen[name] {
				return join(path, name), false
			}
		}
		return path, true
	case json.Delim('['):
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return path, false
		}
		for dec.More() {
			if f, ok := shape(dec, t.Elem(), path); !ok {
				return f, false
			}
		}
		_, err := dec.Token()
		return path, err == nil
	}
	return path, true
}

// skipRest consumes the rest of a value whose first token was tok.
func skipRest(dec *json.Decoder, tok json.Token) bool {
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		for depth := 1; depth > 0; {
			t, err := dec.Token()
			if err != nil {
				return false
			}
			switch t {
			case json.Delim('{'), json.Delim('['):
				depth++
			case json.Delim('}'), json.Delim(']'):
				depth--
			}
		}
	}
	return true
}

// fieldOf names the member an encoding/json error is about ("" for the body).
func fieldOf(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field
	}
	if s := err.Error(); strings.HasPrefix(s, "json: unknown field ") {
		return strings.Trim(strings.TrimPrefix(s, "json: unknown field "), `"`)
	}
	return ""
}
