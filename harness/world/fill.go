package world

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// FillChunk is the size, in characters, of the chunks a filled reply text is streamed in.
const FillChunk = 4096

// fillPattern repeats in filler text; its position in the text is readable from the text itself.
const fillPattern = "0123456789"

// FillText returns text followed by filler so that it is exactly n characters (Unicode code
// points) long; text already n characters or longer is returned as it is. The filler is
// fillPattern ("0123456789") repeated and cut, so the same call always gives the same text.
//
//	long := world.FillText("start:", 300000) // 300000 characters, "start:0123..."
func FillText(text string, n int) string {
	have := utf8.RuneCountInString(text)
	if have >= n {
		return text
	}
	need := n - have
	var b strings.Builder
	b.Grow(len(text) + need)
	b.WriteString(text)
	for need > 0 {
		p := fillPattern
		if need < len(p) {
			p = p[:need]
		}
		b.WriteString(p)
		need -= len(p)
	}
	return b.String()
}

// FillArguments returns the JSON object args (empty means "{}") with one more member, "fill", a
// string of filler, so that the arguments text is exactly n characters long. It fails when args is
// not a JSON object, already holds "fill", or is too long to grow to n.
//
//	args, err := world.FillArguments(`{"q":"x"}`, 300000) // {"q":"x","fill":"0123..."}
func FillArguments(args string, n int) (string, error) {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return "", fmt.Errorf("world: arguments to fill are not a JSON object")
	}
	if _, ok := obj["fill"]; ok {
		return "", fmt.Errorf("world: arguments to fill already hold \"fill\"")
	}
	trimmed := bytes.TrimSpace([]byte(args))
	inner := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
	head := "{"
	if len(inner) > 0 {
		head += string(inner) + ","
	}
	head += `"fill":"`
	const tail = `"}`
	pad := n - utf8.RuneCountInString(head) - len(tail)
	if pad < 0 {
		return "", fmt.Errorf("world: arguments are longer than %d characters before filling", n)
	}
	return head + FillText("", pad) + tail, nil
}

// chunked cuts s into pieces of at most size characters.
func chunked(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		i, n := 0, 0
		for i < len(s) && n < size {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			n++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
