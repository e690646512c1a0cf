package oracle

// unit returns the length of the decoding unit at the start of b (spec/token-counting.md §1) and
// whether it is a well-formed code point: the well-formed sequences of Unicode table 3-7, or one
// ill-formed byte.
func unit(b string) (int, bool) {
	c := b[0]
	if c < 0x80 {
		return 1, true
	}
	// second-byte range and length by lead byte (table 3-7)
	var lo, hi byte = 0x80, 0xBF
	n := 0
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c == 0xE0:
		n, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		n = 3
	case c == 0xED:
		n, hi = 3, 0x9F
	case c == 0xF0:
		n, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		n = 4
	case c == 0xF4:
		n, hi = 4, 0x8F
	default:
		return 1, false
	}
	if len(b) < n || b[1] < lo || b[1] > hi {
		return 1, false
	}
	for i := 2; i < n; i++ {
		if b[i] < 0x80 || b[i] > 0xBF {
			return 1, false
		}
	}
	return n, true
}

// Units returns how many ASCII and other decoding units text holds (spec/token-counting.md §1):
// an ASCII unit is a code point below U+0080; every other code point and every ill-formed byte is
// other.
//
//	ascii, other := oracle.Units("Tokyo 東京") // 6, 2
func Units(text string) (ascii, other int) {
	for i := 0; i < len(text); {
		n, _ := unit(text[i:])
		if n == 1 && text[i] < 0x80 {
			ascii++
		} else {
			other++
		}
		i += n
	}
	return ascii, other
}

// Tokens is the heuristic count of spec/token-counting.md §2: ceil(ascii/4) + other.
//
//	n := oracle.Tokens("abcde") // 2
func Tokens(text string) int {
	a, o := Units(text)
	return (a+3)/4 + o
}

// Counter is the heuristic counter with a per-message overhead (spec/token-counting.md §3):
// PerMessage 0 means the default 4, a negative value means none.
//
//	c := oracle.Counter{PerMessage: cfg.Budget.PerMessage}
type Counter struct{ PerMessage int }

func (c Counter) overhead() int {
	switch {
	case c.PerMessage == 0:
		return 4
	case c.PerMessage < 0:
		return 0
	}
	return c.PerMessage
}

// Message is the cost of one message: its tokens plus the overhead.
//
//	cost := oracle.Counter{}.Message("hi") // 1 + 4
func (c Counter) Message(text string) int { return Tokens(text) + c.overhead() }

// Tool is one tool definition as the model sees it (spec/token-counting.md §4); each string is
// counted on its own.
//
//	t := oracle.Tool{Name: "search", Description: "Find pages", Parameters: `{"type":"object"}`}
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Parameters  string `json:"parameters,omitempty"`
}

// FitTurn is one past turn: its messages and its cached cost (0 or less: not cached). Ord only
// names it.
//
//	t := oracle.FitTurn{Ord: 3, Messages: []string{"question", "answer"}}
type FitTurn struct {
	Ord      int64    `json:"ord"`
	Messages []string `json:"messages"`
	Tokens   int      `json:"tokens,omitempty"`
}

// FitInput is the input of [Counter.Fit] (spec/token-counting.md §5); Turns run oldest first.
// Summary is the summary message as sent (fenced) and SummaryAck the acknowledgement after it.
//
//	in := oracle.FitInput{ContextWindow: 400, Prompt: "next", Turns: turns}
type FitInput struct {
	ContextWindow       int       `json:"contextWindow"`
	ReserveOutputTokens int       `json:"reserveOutputTokens"`
	System              string    `json:"system,omitempty"`
	Summary             string    `json:"summary,omitempty"`
	SummaryAck          string    `json:"summaryAck,omitempty"`
	Tools               []Tool    `json:"tools,omitempty"`
	Prompt              string    `json:"prompt"`
	Turns               []FitTurn `json:"turns,omitempty"`
}

// Counted is the cost of one turn the fit had to count (it had no cached cost).
//
//	for _, c := range r.Counted { cache[c.Ord] = c.Tokens }
type Counted struct {
	Ord    int64 `json:"ord"`
	Tokens int   `json:"tokens"`
}

// FitResult is the outcome of [Counter.Fit], in the form of fixtures/tokens/fit-vectors.json. OK
// is false only for a prompt that cannot fit ("prompt-too-large" in Reason); Keep is the number of
// newest turns kept; Counted runs newest first.
//
//	if r := c.Fit(in); !r.OK { /* reject the prompt */ }
type FitResult struct {
	OK             bool      `json:"ok"`
	Keep           int       `json:"keep"`
	Tokens         int       `json:"tokens"`
	Counted        []Counted `json:"counted"`
	Reason         string    `json:"reason"`
	DroppedSummary bool      `json:"droppedSummary"`
}

// Fit decides which newest turns fit beside the fixed parts of a request, as
// spec/token-counting.md §5 defines, and returns the result its vectors hold.
//
//	r := oracle.Counter{}.Fit(oracle.FitInput{ContextWindow: 100, Prompt: "hi"})
func (c Counter) Fit(in FitInput) FitResult {
	budget := in.ContextWindow - in.ReserveOutputTokens
	base := c.Message(in.Prompt)
	if in.System != "" {
		base += c.Message(in.System)
	}
	for _, t := range in.Tools {
		base += Tokens(t.Name) + Tokens(t.Description) + Tokens(t.Parameters) + c.overhead()
	}
	r := FitResult{Counted: []Counted{}}
	if base > budget {
		r.Tokens, r.Reason = base, "prompt-too-large"
		return r
	}
	r.OK = true
	used := base
	if in.Summary != "" {
		s := c.Message(in.Summary)
		if in.SummaryAck != "" {
			s += c.Message(in.SummaryAck)
		}
		if base+s > budget {
			r.DroppedSummary = true
		} else {
			used += s
		}
	}
	for i := len(in.Turns) - 1; i >= 0; i-- {
		t := in.Turns[i]
		cost := t.Tokens
		if cost <= 0 {
			cost = 0
			for _, m := range t.Messages {
				cost += c.Message(m)
			}
			r.Counted = append(r.Counted, Counted{Ord: t.Ord, Tokens: cost})
		}
		if used+cost > budget {
			break
		}
		used += cost
		r.Keep++
	}
	r.Tokens = used
	return r
}

// TrimSummary returns the longest prefix of summary, ending on a decoding-unit boundary, whose
// [Tokens] is at most max; "" when max <= 0 (spec/token-counting.md §6).
//
//	s := oracle.TrimSummary(summary, 20)
func TrimSummary(summary string, max int) string {
	if max <= 0 {
		return ""
	}
	ascii, other, end := 0, 0, 0
	for end < len(summary) {
		n, _ := unit(summary[end:])
		a, o := ascii, other
		if n == 1 && summary[end] < 0x80 {
			a++
		} else {
			o++
		}
		if (a+3)/4+o > max {
			break
		}
		ascii, other, end = a, o, end+n
	}
	return summary[:end]
}
