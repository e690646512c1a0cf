package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"unicode/utf8"
)

// ErrNotJSONObject: a tool call's arguments are not one JSON object.
var ErrNotJSONObject = errors.New("agent: arguments are not a JSON object")

// FrameKey is the idempotency key of a tool call made inside the single-frame runner's one
// journaled step (spec/http.md, Runs: the single-frame runner):
//
//	<outer>:t<turn>:c<position>:<hash>
//
// outer is the outer step's key (a run's id), turn the model call the call came from (1 for the
// first), position its index in that response (0 for the first), and hash the first 16 hex
// digits of SHA-256 over the tool's name followed at once by CanonicalJSON of its arguments
// (empty arguments are {}). The same call at the same place gets the same key on every re-run;
// another tool or input, or the same call at another place, gets another.
//
// Errors: ErrNotJSONObject for arguments that are not a JSON object.
//
//	key, err := agent.FrameKey("run:abc", 1, 0, "lookup", `{"pump": 3}`)
func FrameKey(outer string, turn, position int, tool, args string) (string, error) {
	if args == "" {
		args = "{}"
	}
	canon, err := CanonicalJSON([]byte(args))
	if err != nil {
		return "", err
	}
	if len(canon) == 0 || canon[0] != '{' {
		return "", ErrNotJSONObject
	}
	h := sha256.Sum256(append([]byte(tool), canon...))
	return fmt.Sprintf("%s:t%d:c%d:%s", outer, turn, position, hex.EncodeToString(h[:])[:16]), nil
}

// CanonicalJSON re-encodes one JSON text (spec/http.md, Runs: the single-frame runner): no
// whitespace; object members sorted by key, compared as UTF-8 bytes, a repeated key keeping
// its last value; numbers as written; strings with only `"`, `\` and the control characters
// escaped (\b \t \n \f \r, the others as \u00xx), every other character as itself.
//
// Errors: ErrNotJSONObject wrapping the parse error for text that is not one JSON value.
//
//	b, _ := agent.CanonicalJSON([]byte(`{"b": 1, "a": [true, "x"]}`)) // {"a":[true,"x"],"b":1}
func CanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSONObject, err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("%w: more than one value", ErrNotJSONObject)
	}
	var b bytes.Buffer
	writeCanonical(&b, v)
	return b.Bytes(), nil
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			writeCanonical(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case string:
		writeString(b, x)
	case json.Number:
		b.WriteString(x.String())
	case bool:
		b.WriteString(strconv.FormatBool(x))
	default:
		b.WriteString("null")
	}
}

func writeString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
}
