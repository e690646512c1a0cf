package budget_test

import (
	"fmt"

	"github.com/loomcheck/loomcheck/reference/internal/budget"
)

func ExampleHeuristic() {
	h := budget.Heuristic{}
	fmt.Println(h.Count("hello"))    // five ASCII code points: ceil(5/4)
	fmt.Println(h.Count("日本語"))      // three non-ASCII code points
	fmt.Println(h.Count("Tokyo 東京")) // ceil(6/4) + 2
	fmt.Println(h.PerMessage())
	// Output:
	// 2
	// 3
	// 4
	// 4
}

func ExampleFit() {
	turns := []budget.Turn{
		{Ord: 1, Messages: []string{"What is the capital of France?", "Paris."}},
		{Ord: 2, Messages: []string{"And of Spain?", "Madrid."}},
	}
	r := budget.Fit(budget.FitInput{
		ContextWindow:       60,
		ReserveOutputTokens: 20,
		System:              "Be brief.",
		Prompt:              "And of Italy?",
		Turns:               turns,
	})
	fmt.Println(r.OK, r.Keep, r.Tokens, r.DroppedSummary)
	for _, c := range r.Counted {
		fmt.Printf("turn %d costs %d\n", c.Ord, c.Tokens) // cache these in Turn.Tokens
	}
	// Output:
	// true 1 29 false
	// turn 2 costs 14
	// turn 1 costs 18
}

func ExampleFit_promptTooLarge() {
	r := budget.Fit(budget.FitInput{ContextWindow: 10, Prompt: "a prompt far too long for the window"})
	fmt.Println(r.OK, r.Reason)
	// Output: false prompt-too-large
}

func ExampleTrimSummary() {
	fmt.Printf("%q\n", budget.TrimSummary("abcdefghij", 2, nil))
	fmt.Printf("%q\n", budget.TrimSummary("日本語", 2, nil))
	// Output:
	// "abcdefgh"
	// "日本"
}
