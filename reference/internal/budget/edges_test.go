package budget

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The summary's acknowledgement counts with it: a summary that fits alone but not with its
// acknowledgement is dropped, and kept when both fit exactly.
func TestFitCountsTheSummaryAcknowledgement(t *testing.T) {
	// prompt "" costs 0+4; summary "ssss" 1+4; acknowledgement "aaaa" 1+4: 14 in all.
	in := FitInput{ContextWindow: 13, Summary: "ssss", SummaryAck: "aaaa", Prompt: ""}
	assert.Equal(t, FitResult{OK: true, Tokens: 4, Counted: []TurnCount{}, DroppedSummary: true}, Fit(in), "one token short")
	in.ContextWindow = 14
	assert.Equal(t, FitResult{OK: true, Tokens: 14, Counted: []TurnCount{}}, Fit(in), "exactly enough")
	in.SummaryAck = ""
	in.ContextWindow = 9
	assert.Equal(t, FitResult{OK: true, Tokens: 9, Counted: []TurnCount{}}, Fit(in), "no acknowledgement: the summary alone")
}

// A cached cost of 1 is a cost: the turn is not counted again (only a cost <= 0 means unknown).
func TestFitTakesACachedCostOfOne(t *testing.T) {
	long := strings.Repeat("word ", 100)
	for _, c := range []struct {
		tokens, wantTokens int
		counted            []TurnCount
	}{
		{1, 4 + 1, []TurnCount{}},
		{0, 4 + TurnCost(nil, Turn{Messages: []string{long}}), []TurnCount{{Ord: 1, Tokens: TurnCost(nil, Turn{Messages: []string{long}})}}},
	} {
		r := Fit(FitInput{ContextWindow: 1000, Prompt: "", Turns: []Turn{{Ord: 1, Messages: []string{long}, Tokens: c.tokens}}})
		assert.Equal(t, FitResult{OK: true, Keep: 1, Tokens: c.wantTokens, Counted: c.counted}, r, "cached tokens %d", c.tokens)
	}
}

// double counts two tokens per byte, so that no single unit fits a budget of one.
type double struct{}

func (double) Count(s string) int { return 2 * len(s) }
func (double) PerMessage() int    { return 0 }

// With a general counter, a summary of which not even the first unit fits is trimmed to nothing,
// and one whose prefixes fit is cut at the last unit that fits.
func TestTrimSummaryGenericPathEdges(t *testing.T) {
	assert.Equal(t, "", TrimSummary("abc", 1, double{}), "no unit fits")
	assert.Equal(t, "a", TrimSummary("abc", 2, double{}))
	assert.Equal(t, "ab", TrimSummary("abc", 5, double{}))
	assert.Equal(t, "abc", TrimSummary("abc", 6, double{}))
	assert.Equal(t, "日", TrimSummary("日本", 6, double{}), "whole code points only")
	assert.Equal(t, "", TrimSummary("日本", 5, double{}))
}

// The boundaries of a text are every decoding unit's end, starting at 0.
func TestBoundaries(t *testing.T) {
	assert.Equal(t, []int{0}, boundaries(""))
	assert.Equal(t, []int{0, 1, 4, 5, 6}, boundaries("a日\x80b"))
}

// unitSize at RuneSelf (0x80, a lone continuation byte) is 1 either way: the ASCII shortcut and
// the decoder agree there, so the shortcut's bound is not observable at that byte.
func TestUnitSizeAtTheASCIIBound(t *testing.T) {
	require.Equal(t, utf8.RuneSelf, 0x80)
	_, size := utf8.DecodeRuneInString("\x80")
	assert.Equal(t, 1, size)
	assert.Equal(t, 1, unitSize("\x80z"))
	assert.Equal(t, 1, unitSize("\x7f"))
	assert.Equal(t, 3, unitSize("日"))
}
