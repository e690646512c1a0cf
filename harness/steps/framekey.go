package steps

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

// errFrameArgs: a tool call's arguments are not one JSON object.
var errFrameArgs = errors.New("arguments are not one JSON object")

// frameKey is the idempotency key spec/http.md (Runs: the single-frame runner) defines for a
// tool call inside the single-frame runner: <outer>:t<turn>:c<position>:<hash>, the hash being
// the first 16 hex digits of SHA-256 over the tool name followed by the canonical JSON of the
// arguments ({} when empty). The kit computes it on its own, from the spec.
func frameKey(outer string, turn, position int, tool, args string) (string, error) {
	if args == "" {
		args = "{}"
	}
	canon, err := frameCanonical(args)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(tool + canon))
	return fmt.Sprintf("%s:t%d:c%d:%s", outer, turn, position, hex.EncodeToString(sum[:8])), nil
}

// frameCanonical is the canonical JSON of spec/http.md: no whitespace, members sorted by key as
// UTF-8 bytes (a repeated key keeps its last value), numbers as written, strings escaping only
// `"`, `\` and control characters (\b \t \n \f \r, else \u00xx).
func frameCanonical(text string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", errFrameArgs
	}
	if _, err := dec.Token(); err == nil {
		return "", errFrameArgs
	}
	if _, ok := v.(map[string]any); !ok {
		return "", errFrameArgs
	}
	return string(appendCanonical(nil, v)), nil
}

// appendCanonical appends v (as encoding/json decodes with UseNumber) in the canonical form:
// object keys sorted, no space, numbers as written.
func appendCanonical(out []byte, v any) []byte {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out = append(out, '{')
		for i, k := range keys {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendCanonicalString(out, k)
			out = append(out, ':')
			out = appendCanonical(out, x[k])
		}
		return append(out, '}')
	case []any:
		out = append(out, '[')
		for i, e := range x {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendCanonical(out, e)
		}
		return append(out, ']')
	case string:
		return appendCanonicalString(out, x)
	case json.Number:
		return append(out, x...)
	case bool:
		return strconv.AppendBool(out, x)
	}
	return append(out, "null"...)
}

// appendCanonicalString appends s as a JSON string: the short escapes where JSON has them,
// \u00XX for the other control characters, every other character as itself.
func appendCanonicalString(out []byte, s string) []byte {
	out = append(out, '"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			out = append(out, '\\', byte(r))
		case '\b':
			out = append(out, `\b`...)
		case '\t':
			out = append(out, `\t`...)
		case '\n':
			out = append(out, `\n`...)
		case '\f':
			out = append(out, `\f`...)
		case '\r':
			out = append(out, `\r`...)
		default:
			if r < 0x20 {
				out = append(out, fmt.Sprintf(`\u%04x`, r)...)
			} else {
				out = utf8.AppendRune(out, r)
			}
		}
	}
	return append(out, '"')
}
