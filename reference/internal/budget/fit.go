package budget

// ReasonPromptTooLarge is [FitResult.Reason] when the parts that can never be dropped (system
// prompt, tools and the new prompt) exceed the budget on their own.
const ReasonPromptTooLarge = "prompt-too-large"

// ToolText is the text of one tool definition as the model sees it. Each field is counted on its
// own; Parameters is the parameter schema rendered as text by the caller (it may be empty).
//
//	t := budget.ToolText{Name: "search", Description: "Find pages", Parameters: `{"type":"object"}`}
type ToolText struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Parameters  string `json:"parameters,omitempty"`
}

// Turn is one past turn of the conversation: the texts of its messages (the user's prompt and the
// assistant's reply, in that order; any number is allowed) and, optionally, its cost from an
// earlier call.
//
// Ord identifies the turn to the caller; Fit only echoes it in [FitResult.Counted]. Tokens is the
// cached cost: a positive value is used as is, zero or negative means "not yet counted".
//
//	t := budget.Turn{Ord: 3, Messages: []string{"question", "answer"}, Tokens: cached[3]}
type Turn struct {
	Ord      int64    `json:"ord"`
	Messages []string `json:"messages"`
	Tokens   int      `json:"tokens,omitempty"`
}

// TurnCount is the cost of one turn that [Fit] had to count, for the caller to cache.
//
//	for _, c := range r.Counted { cached[c.Ord] = c.Tokens }
type TurnCount struct {
	Ord    int64 `json:"ord"`
	Tokens int   `json:"tokens"`
}

// FitInput is everything [Fit] weighs. Turns run oldest first. A nil Counter means Heuristic{}.
// The JSON tags give the form used by fixtures/tokens/fit-vectors.json; Counter is not serialized.
//
//	in := budget.FitInput{ContextWindow: 8192, ReserveOutputTokens: 1024, System: sys,
//		Prompt: prompt, Turns: turns, Counter: budget.Heuristic{PerMessageOverhead: cfg.PerMessage}}
type FitInput struct {
	ContextWindow       int    `json:"contextWindow"`
	ReserveOutputTokens int    `json:"reserveOutputTokens"`
	System              string `json:"system,omitempty"`
	Summary             string `json:"summary,omitempty"`
	// SummaryAck is the short assistant acknowledgement sent after the summary (so that roles
	// alternate). It is counted as one more message whenever the summary is, and dropped with it.
	SummaryAck string     `json:"summaryAck,omitempty"`
	Tools      []ToolText `json:"tools,omitempty"`
	Prompt     string     `json:"prompt"`
	Turns      []Turn     `json:"turns,omitempty"`
	Counter    Counter    `json:"-"`
}

// FitResult is the outcome of [Fit].
//
// OK is false only when the prompt cannot be sent at all; Reason is then [ReasonPromptTooLarge]
// and Tokens is the cost of the parts that cannot be dropped. When OK is true, the caller sends the
// system prompt, the summary unless DroppedSummary, the tools, the Keep newest turns and the
// prompt; Tokens is their total cost. Counted lists, newest first, the cost of every turn Fit had
// to count because it carried no cached cost, including the first turn that did not fit.
//
//	if r := budget.Fit(in); r.OK {
//		window := in.Turns[len(in.Turns)-r.Keep:]
//	}
type FitResult struct {
	OK             bool        `json:"ok"`
	Keep           int         `json:"keep"`
	Tokens         int         `json:"tokens"`
	Counted        []TurnCount `json:"counted"`
	Reason         string      `json:"reason"`
	DroppedSummary bool        `json:"droppedSummary"`
}

// ToolsCost returns the estimate of a tools block: the sum, over the tools, of
// c.Count(Name) + c.Count(Description) + c.Count(Parameters) + c.PerMessage(). No tools cost 0. A
// nil c means Heuristic{}.
//
//	budget.ToolsCost(nil, []budget.ToolText{{Name: "search", Description: "Find pages"}}) // 2+3+0+4
func ToolsCost(c Counter, tools []ToolText) int {
	if c == nil {
		c = Heuristic{}
	}
	total := 0
	for _, t := range tools {
		total += c.Count(t.Name) + c.Count(t.Description) + c.Count(t.Parameters) + c.PerMessage()
	}
	return total
}

// TurnCost returns the cost of a turn's messages: the sum of [MessageCost] over them, ignoring
// any cached Tokens. A nil c means Heuristic{}.
//
//	budget.TurnCost(nil, budget.Turn{Messages: []string{"hi", "hello"}}) // (1+4) + (2+4)
func TurnCost(c Counter, t Turn) int {
	total := 0
	for _, m := range t.Messages {
		total += MessageCost(c, m)
	}
	return total
}

// Fit decides which of the newest turns fit into the context window beside the fixed parts.
//
// With budget = ContextWindow - ReserveOutputTokens and a message costing Count(text) +
// PerMessage():
//
//  1. base = the system prompt as one message (0 if empty) + [ToolsCost] + the prompt as one
//     message (always, even if empty). If base > budget, the result is OK=false,
//     Reason=[ReasonPromptTooLarge], Keep=0, Tokens=base.
//  2. fixed = base + the summary as one message (0 if empty), plus SummaryAck as one more message
//     when both are set. If fixed > budget, the summary (and its acknowledgement) is dropped:
//     fixed = base and DroppedSummary = true. A summary never causes a rejection.
//  3. Walking the turns from newest to oldest, each turn costs its cached Tokens if positive,
//     otherwise [TurnCost] (recorded in Counted). A turn is kept while fixed + the kept turns +
//     its cost <= budget; the walk stops at the first turn that does not fit, even if an older,
//     smaller one would. Kept turns are therefore always the newest, contiguous and whole.
//
// Fit counts at most Keep+1 turns, so a long history costs only what is kept. It is pure and safe
// for concurrent use if the Counter is.
//
//	r := budget.Fit(budget.FitInput{ContextWindow: 100, Prompt: "next question",
//		Turns: []budget.Turn{{Ord: 1, Messages: []string{"q", "a"}}}})
//	// r.OK, r.Keep == 1, r.Tokens == 4+4 + 1+4+1+4
func Fit(in FitInput) FitResult {
	c := in.Counter
	if c == nil {
		c = Heuristic{}
	}
	budget := in.ContextWindow - in.ReserveOutputTokens

	base := MessageCost(c, in.Prompt) + ToolsCost(c, in.Tools)
	if in.System != "" {
		base += MessageCost(c, in.System)
	}
	if base > budget {
		return FitResult{Tokens: base, Reason: ReasonPromptTooLarge, Counted: []TurnCount{}}
	}

	res := FitResult{OK: true, Counted: []TurnCount{}}
	fixed := base
	if in.Summary != "" {
		withSummary := base + MessageCost(c, in.Summary)
		if in.SummaryAck != "" {
			withSummary += MessageCost(c, in.SummaryAck)
		}
		if withSummary > budget {
			res.DroppedSummary = true
		} else {
			fixed = withSummary
		}
	}

	used := fixed
	for i := len(in.Turns) - 1; i >= 0; i-- {
		t := in.Turns[i]
		cost := t.Tokens
		if cost <= 0 {
			cost = TurnCost(c, t)
			res.Counted = append(res.Counted, TurnCount{Ord: t.Ord, Tokens: cost})
		}
		if cost > budget-used {
			break
		}
		used += cost
		res.Keep++
	}
	res.Tokens = used
	return res
}

// TrimSummary cuts summary to at most maxTokens by c.Count.
//
// The result is the longest prefix of summary that ends on a decoding-unit boundary (see
// [Units]: after a whole code point or after a single ill-formed byte) and whose Count is at most
// maxTokens. If the whole summary fits it is returned unchanged; if maxTokens <= 0 the result is
// "". Nothing is appended. The per-message overhead is not part of the comparison. A nil c means
// Heuristic{}. For a general Counter the search assumes Count is monotone over prefixes.
//
//	budget.TrimSummary("abcdefghij", 2, nil) // "abcdefgh": ceil(8/4) = 2
//	budget.TrimSummary("日本語", 2, nil)      // "日本"
func TrimSummary(summary string, maxTokens int, c Counter) string {
	if maxTokens <= 0 {
		return ""
	}
	if c == nil {
		c = Heuristic{}
	}
	if h, ok := c.(Heuristic); ok {
		return trimHeuristic(summary, maxTokens, h)
	}
	if c.Count(summary) <= maxTokens {
		return summary
	}
	bounds := boundaries(summary)
	// bounds[0] == 0 and Count("") is taken to fit; find the largest index whose prefix fits.
	lo, hi := 0, len(bounds)-1 // invariant: prefix bounds[lo] fits, bounds[hi] is known not to or unknown
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if c.Count(summary[:bounds[mid]]) <= maxTokens {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return summary[:bounds[lo]]
}

// trimHeuristic is TrimSummary for Heuristic in one forward pass.
func trimHeuristic(s string, maxTokens int, h Heuristic) string {
	ascii, other := 0, 0
	end := 0
	for i := 0; i < len(s); {
		size := 1
		if s[i] < 0x80 {
			ascii++
		} else {
			size = unitSize(s[i:])
			other++
		}
		if (ascii+3)/4+other > maxTokens {
			return s[:end]
		}
		i += size
		end = i
	}
	return s
}

// boundaries lists every decoding-unit boundary of s, from 0 to len(s) inclusive.
func boundaries(s string) []int {
	b := []int{0}
	for i := 0; i < len(s); {
		i += unitSize(s[i:])
		b = append(b, i)
	}
	return b
}
