package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/explore"
)

func TestExploreWritesItsReport(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := run(t, "explore", "--dialogue", "barge-in", "--every", "4", "--out", dir)
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "barge-in: ")
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	var rep explore.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Dialogues, 1)
	d := rep.Dialogues[0]
	require.Equal(t, "barge-in", d.Name)
	require.Equal(t, int64(1), d.Points[0])
	require.Equal(t, d.Writes, d.Points[len(d.Points)-1], "the last write is always explored")
	require.Less(t, len(d.Points), int(d.Writes), "--every 4 explores fewer points than writes")
	_, err = os.Stat(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
}

func TestExploreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"explore", "--dialogue", "no-such-dialogue", "--out", t.TempDir()},
		{"explore", "--every", "0"},
		{"explore", "--max-points", "-1"},
		{"explore", "stray"},
		{"explore", "--points", "3,x"},
		{"explore", "--points", "0"},
		{"explore", "--then", "-2"},
	} {
		code, _, errOut := run(t, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
	}
}
