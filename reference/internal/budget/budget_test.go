package budget

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func fixture(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "tokens", name))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// input returns the bytes a vector names: bytesBase64 when present, otherwise text.
func input(t *testing.T, text *string, b64 string) string {
	t.Helper()
	if b64 != "" {
		raw, err := base64.StdEncoding.DecodeString(b64)
		require.NoError(t, err)
		return string(raw)
	}
	require.NotNil(t, text, "vector has neither text nor bytesBase64")
	return *text
}

func TestCountVectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			Name         string  `json:"name"`
			Text         *string `json:"text"`
			BytesBase64  string  `json:"bytesBase64"`
			ASCII        int     `json:"ascii"`
			Other        int     `json:"other"`
			Tokens       int     `json:"tokens"`
			FlatEstimate int     `json:"flatEstimate"`
		} `json:"vectors"`
	}
	fixture(t, "vectors.json", &file)
	require.NotEmpty(t, file.Vectors)
	sawUndercount := false
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			s := input(t, v.Text, v.BytesBase64)
			if v.BytesBase64 != "" {
				assert.False(t, utf8.ValidString(s), "bytesBase64 vectors are for ill-formed input")
			}
			a, o := Units(s)
			assert.Equal(t, v.ASCII, a, "ascii")
			assert.Equal(t, v.Other, o, "other")
			assert.Equal(t, v.Tokens, Heuristic{}.Count(s), "tokens")
			assert.Equal(t, v.FlatEstimate, (a+o+3)/4, "flatEstimate")
		})
		if v.Tokens >= 4*v.FlatEstimate && v.FlatEstimate > 0 {
			sawUndercount = true
		}
	}
	assert.True(t, sawUndercount, "the vectors must show a case the flat rule undercounts fourfold")
}

func TestTrimVectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			Name          string  `json:"name"`
			Summary       *string `json:"summary"`
			SummaryBase64 string  `json:"summaryBase64"`
			MaxTokens     int     `json:"maxTokens"`
			Result        *string `json:"result"`
			ResultBase64  string  `json:"resultBase64"`
		} `json:"vectors"`
	}
	fixture(t, "trim-vectors.json", &file)
	require.NotEmpty(t, file.Vectors)
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			in := input(t, v.Summary, v.SummaryBase64)
			want := input(t, v.Result, v.ResultBase64)
			assert.Equal(t, want, TrimSummary(in, v.MaxTokens, Heuristic{}))
			// The generic (binary search) path must agree with the heuristic fast path.
			assert.Equal(t, want, TrimSummary(in, v.MaxTokens, wrapped{Heuristic{}}))
		})
	}
}

func TestFitVectors(t *testing.T) {
	var file struct {
		Vectors []struct {
			Name       string    `json:"name"`
			PerMessage int       `json:"perMessage"`
			Input      FitInput  `json:"input"`
			Output     FitResult `json:"output"`
		} `json:"vectors"`
	}
	fixture(t, "fit-vectors.json", &file)
	require.NotEmpty(t, file.Vectors)
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			in := v.Input
			in.Counter = Heuristic{PerMessageOverhead: v.PerMessage}
			assert.Equal(t, v.Output, Fit(in))
		})
	}
}

// wrapped hides the concrete Heuristic type so TrimSummary takes its generic path.
type wrapped struct{ h Heuristic }

func (w wrapped) Count(s string) int { return w.h.Count(s) }
func (w wrapped) PerMessage() int    { return w.h.PerMessage() }

func TestPerMessage(t *testing.T) {
	assert.Equal(t, DefaultPerMessage, Heuristic{}.PerMessage())
	assert.Equal(t, 7, Heuristic{PerMessageOverhead: 7}.PerMessage())
	assert.Equal(t, 0, Heuristic{PerMessageOverhead: -1}.PerMessage())
	assert.Equal(t, 6, MessageCost(nil, "hello"))
}

func TestFlatRuleUndercountsNonASCII(t *testing.T) {
	cjk := strings.Repeat("語", 400)
	assert.Equal(t, 400, Heuristic{}.Count(cjk))
	assert.Equal(t, 100, Heuristic{}.Count(strings.Repeat("a", 400)))
}

// counting records how often Count is called, to check Fit only counts what it needs.
type counting struct {
	Heuristic
	calls *int
}

func (c counting) Count(s string) int { *c.calls++; return c.Heuristic.Count(s) }

func TestFitCountsOnlyKeptTurns(t *testing.T) {
	turns := make([]Turn, 1000)
	for i := range turns {
		turns[i] = Turn{Ord: int64(i + 1), Messages: []string{"question", "answer"}}
	}
	calls := 0
	r := Fit(FitInput{ContextWindow: 5 + 3*12, Prompt: "hi", Turns: turns,
		Counter: counting{calls: &calls}})
	require.True(t, r.OK)
	assert.Equal(t, 3, r.Keep)
	// One call for the prompt, two per counted turn; the fourth turn is counted and does not fit.
	assert.Equal(t, 1+2*4, calls)
	require.Len(t, r.Counted, 4)
	assert.Equal(t, int64(1000), r.Counted[0].Ord)
	assert.Equal(t, int64(997), r.Counted[3].Ord)
}

func TestFitUsesCachedCosts(t *testing.T) {
	turns := []Turn{{Ord: 1, Messages: []string{"ignored"}, Tokens: 3}}
	calls := 0
	r := Fit(FitInput{ContextWindow: 100, Prompt: "", Turns: turns, Counter: counting{calls: &calls}})
	assert.Equal(t, 1, r.Keep)
	assert.Equal(t, 4+3, r.Tokens)
	assert.Empty(t, r.Counted)
	assert.Equal(t, 1, calls, "only the prompt is counted")
}

func TestFitNeverDropsPromptForSummary(t *testing.T) {
	long := strings.Repeat("s", 4000)
	r := Fit(FitInput{ContextWindow: 50, Summary: long, Prompt: "hello"})
	assert.True(t, r.OK)
	assert.True(t, r.DroppedSummary)
	assert.Equal(t, 6, r.Tokens)
	assert.Empty(t, r.Reason)
}

func TestFitNilCounterIsHeuristic(t *testing.T) {
	in := FitInput{ContextWindow: 30, System: "sys", Prompt: "p", Turns: []Turn{{Ord: 1, Messages: []string{"a"}}}}
	a := Fit(in)
	in.Counter = Heuristic{}
	assert.Equal(t, Fit(in), a)
}

func TestTrimSummaryProperties(t *testing.T) {
	texts := []string{"", "plain ascii text that goes on", "日本語のテキスト", "mixé 👩🏽‍💻 text", "a\xffb\xe2\x82c"}
	for _, s := range texts {
		for max := -1; max <= 12; max++ {
			got := TrimSummary(s, max, nil)
			assert.True(t, strings.HasPrefix(s, got))
			if max > 0 {
				assert.LessOrEqual(t, Heuristic{}.Count(got), max)
			}
			if len(got) < len(s) {
				// The next unit would not have fitted.
				next := got + s[len(got):len(got)+unitSize(s[len(got):])]
				assert.Greater(t, Heuristic{}.Count(next), max)
			}
			if utf8.ValidString(s) {
				assert.True(t, utf8.ValidString(got))
			}
		}
	}
}

func TestUnitsAgreesWithRuneCountOnValidText(t *testing.T) {
	for _, s := range []string{"héllo", "👩🏽‍💻", "\u2028", "日本"} {
		a, o := Units(s)
		assert.Equal(t, utf8.RuneCountInString(s), a+o)
	}
}

func TestToolsCost(t *testing.T) {
	assert.Equal(t, 0, ToolsCost(nil, nil))
	assert.Equal(t, 2+3+0+4, ToolsCost(nil, []ToolText{{Name: "search", Description: "Find pages"}}))
	assert.Equal(t, (1+4)+(2+4), TurnCost(nil, Turn{Messages: []string{"hi", "hello"}}))
}
