package steps

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// differenceContext is how many characters around the first difference a note shows.
const differenceContext = 24

// firstDifference is the line a failure comparing two long texts (or two rendered tables) adds so
// the reader need not find the change by eye: where the texts first differ (character, and the
// line and column in a text of several lines), each side around that point, and both lengths in
// characters when they differ. Texts that are equal give "".
//
//	firstDifference("abcdef", "abXdef") // first difference at character 3: got "abcdef", want "abXdef"
func firstDifference(got, want string) string {
	if got == want {
		return ""
	}
	g, w := []rune(got), []rune(want)
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	where := fmt.Sprintf("character %d", i+1)
	if strings.Contains(got, "\n") || strings.Contains(want, "\n") {
		prefix := string(w[:i])
		line := strings.Count(prefix, "\n") + 1
		col := utf8.RuneCountInString(prefix[strings.LastIndex(prefix, "\n")+1:]) + 1
		where += fmt.Sprintf(" (line %d, column %d)", line, col)
	}
	note := fmt.Sprintf("first difference at %s: got %s, want %s", where, around(g, i), around(w, i))
	if len(g) != len(w) {
		note += fmt.Sprintf("; got %d characters, want %d", len(g), len(w))
	}
	return note
}

// around quotes the characters of r near position i, marking with "…" what it leaves out.
func around(r []rune, i int) string {
	if i >= len(r) {
		if len(r) == 0 {
			return "the end (an empty text)"
		}
		from := max(0, len(r)-differenceContext)
		return fmt.Sprintf("the end (after %q)", string(r[from:]))
	}
	from, to := max(0, i-differenceContext/2), min(len(r), i+differenceContext)
	s := fmt.Sprintf("%q", string(r[from:to]))
	if from > 0 {
		s = "…" + s
	}
	if to < len(r) {
		s += "…"
	}
	return s
}

// lengthNote is the line a failure of a rule about a length adds: "quoted 499 characters, want
// 500", with what names what was counted.
func lengthNote(what string, got, want int) string {
	if got == want {
		return ""
	}
	return fmt.Sprintf("%s %d characters, want %d", what, got, want)
}
