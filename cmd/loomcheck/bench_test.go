package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchPrintsTheTable: a quick run of one figure prints its table, with the command that
// made it, and writes the same to --out; --json prints every round's values instead.
func TestBenchPrintsTheTable(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.md")
	code, stdout, errOut := run(t, "bench", "--figures", "store-append", "--quick", "--rounds", "2", "--out", out)
	require.Equal(t, exitConformant, code, errOut)
	require.Contains(t, stdout, "with `loomcheck bench --figures store-append --quick --rounds 2 --out "+out+"`")
	require.Contains(t, stdout, "| figure | measure | measured | baseline | ratio min / median / max | goal | met |")
	require.Contains(t, stdout, "| store-append | single-event Update commits/s, synchronous FULL |")
	require.Contains(t, errOut, "store-append: round 2")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, stdout, string(b))

	code, stdout, errOut = run(t, "bench", "--figures", "store-append", "--quick", "--rounds", "1", "--json")
	require.Equal(t, exitConformant, code, errOut)
	var doc struct {
		Rounds int `json:"rounds"`
		Rows   []struct {
			Figure   string    `json:"figure"`
			Measured []float64 `json:"measured"`
			Baseline []float64 `json:"baseline"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc), stdout)
	require.Equal(t, 1, doc.Rounds)
	// FULL and NORMAL, each judged on the middle half of its turns and given over every turn.
	require.Len(t, doc.Rows, 4)
	for _, r := range doc.Rows {
		require.Equal(t, "store-append", r.Figure)
		require.Len(t, r.Measured, 1)
		require.Len(t, r.Baseline, 1)
	}
}

// TestBenchUsageErrors: an unknown figure, a round count below one and an argument are usage
// errors that measure nothing.
func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--figures", "store-append,nonsense"},
		{"bench", "--rounds", "0"},
		{"bench", "extra"},
	} {
		code, stdout, errOut := run(t, args...)
		require.Equal(t, exitUsage, code, strings.Join(args, " "))
		require.Empty(t, stdout)
		require.NotContains(t, errOut, "round 1", "measured nothing")
	}
}
