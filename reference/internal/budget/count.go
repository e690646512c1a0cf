// Package budget counts tokens without a tokenizer and fits a conversation's context into a
// model's window.
//
// Everything here is pure: no I/O, no goroutines, no clocks. The normative description of every
// number this package produces is spec/token-counting.md; fixtures/tokens/ holds the test vectors
// a second implementation must reproduce.
//
// The two entry points are [Heuristic.Count], which estimates the tokens of a text, and [Fit],
// which decides how many of the newest turns can be sent beside the system prompt, the summary,
// the tools and the new prompt:
//
//	c := budget.Heuristic{}
//	r := budget.Fit(budget.FitInput{ContextWindow: 8192, ReserveOutputTokens: 1024,
//		Prompt: "hello", Turns: turns, Counter: c})
//	if !r.OK {
//		// reject the prompt with r.Reason
//	}
//	window := turns[len(turns)-r.Keep:]
package budget

import "unicode/utf8"

// DefaultPerMessage is the per-message overhead, in tokens, that [Heuristic] uses when its
// PerMessageOverhead is zero. It stands for the role marker and separators a chat format wraps
// around every message.
const DefaultPerMessage = 4

// Counter estimates tokens.
//
// Count returns the tokens of a text on its own; PerMessage returns the fixed overhead added for
// every message. Implementations must be deterministic and safe for concurrent use. [TrimSummary]
// additionally relies on Count being monotone over prefixes: if p is a prefix of s then
// Count(p) <= Count(s).
//
//	var c budget.Counter = budget.Heuristic{PerMessageOverhead: 3}
//	cost := c.Count("hi there") + c.PerMessage() // 2 + 3
type Counter interface {
	Count(text string) int
	PerMessage() int
}

// Heuristic is the default [Counter]. It needs no tokenizer and errs on the side of
// overestimating text that is not ASCII.
//
// The text is decoded as UTF-8 (see [Units]). Every ASCII code point (U+0000..U+007F) is worth a
// quarter token and the ASCII total is rounded up once, for the whole text; every other code
// point, and every byte that is not part of a well-formed UTF-8 sequence, is worth one whole
// token:
//
//	Count(s) = ceil(ascii / 4) + other
//
// A flat "characters / 4" rule would count four CJK characters or four emoji as one token, where
// real tokenizers spend roughly one token (or more) on each; this rule counts four.
//
// PerMessageOverhead is the per-message overhead: zero selects [DefaultPerMessage], a negative
// value means no overhead. The zero value is ready to use and safe for concurrent use.
//
//	h := budget.Heuristic{}
//	h.Count("hello")   // 2: five ASCII code points, ceil(5/4)
//	h.Count("日本語")   // 3: three non-ASCII code points
//	h.PerMessage()     // 4
type Heuristic struct {
	PerMessageOverhead int
}

// Count returns ceil(ascii/4) + other for text, as described on [Heuristic].
func (h Heuristic) Count(text string) int {
	ascii, other := Units(text)
	return (ascii+3)/4 + other
}

// PerMessage returns the per-message overhead: PerMessageOverhead if it is positive,
// [DefaultPerMessage] if it is zero, and 0 if it is negative.
func (h Heuristic) PerMessage() int {
	switch {
	case h.PerMessageOverhead > 0:
		return h.PerMessageOverhead
	case h.PerMessageOverhead == 0:
		return DefaultPerMessage
	default:
		return 0
	}
}

// Units splits text into the two classes [Heuristic] counts: ascii is the number of code points
// in U+0000..U+007F, other is the number of all remaining decoding units.
//
// Decoding walks the bytes from the start. Where the bytes form a well-formed UTF-8 sequence
// (Unicode, Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF) the whole
// sequence is one code point. Otherwise exactly one byte is consumed and counted as one "other"
// unit, and decoding resumes at the next byte. So the three bytes E2 82 41 are two invalid units
// and one ASCII code point. A well-formed U+FFFD in the input is an ordinary non-ASCII code point.
//
//	a, o := budget.Units("añ") // a == 1, o == 1
func Units(text string) (ascii, other int) {
	for i := 0; i < len(text); {
		b := text[i]
		if b < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		// An ill-formed sequence decodes as (RuneError, 1): one byte, one unit.
		other++
		i += size
	}
	return ascii, other
}

// MessageCost returns the cost of one message with the given text: c.Count(text) +
// c.PerMessage(). A nil c means Heuristic{}.
//
//	budget.MessageCost(nil, "hello") // 2 + 4 = 6
func MessageCost(c Counter, text string) int {
	if c == nil {
		c = Heuristic{}
	}
	return c.Count(text) + c.PerMessage()
}

// unitSize is the length in bytes of the decoding unit at the start of a non-empty s.
func unitSize(s string) int {
	if s[0] < utf8.RuneSelf {
		return 1
	}
	_, size := utf8.DecodeRuneInString(s)
	return size
}
