package perf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/perf"
)

// Nothing here judges a duration: the machine may be as slow and as busy as it likes. The
// tests check the arithmetic, the table, and that a tiny run of every figure measures something.

func TestSummarize(t *testing.T) {
	in := []float64{3, 1, 2}
	require.Equal(t, perf.Summary{Min: 1, Median: 2, Max: 3}, perf.Summarize(in))
	require.Equal(t, []float64{3, 1, 2}, in, "the input is not changed")
	require.Equal(t, perf.Summary{Min: 1, Median: 2.5, Max: 4}, perf.Summarize([]float64{4, 1, 3, 2}))
	require.Equal(t, perf.Summary{Min: 7, Median: 7, Max: 7}, perf.Summarize([]float64{7}))
	s := perf.Summarize(nil)
	require.True(t, math.IsNaN(s.Min) && math.IsNaN(s.Median) && math.IsNaN(s.Max))
}

func TestMedian(t *testing.T) {
	require.Equal(t, 2.0, perf.Median([]float64{5, 2, 1}))
	require.Equal(t, 2.5, perf.Median([]float64{4, 1, 3, 2}))
	require.True(t, math.IsNaN(perf.Median(nil)))
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // 100..1 ms, unsorted
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 50*time.Millisecond, perf.Percentile(ds, 0.5))
	require.Equal(t, 99*time.Millisecond, perf.Percentile(ds, 0.99))
	require.Equal(t, 100*time.Millisecond, perf.Percentile(ds, 1))
	require.Equal(t, time.Millisecond, perf.Percentile(ds, 0.001))
	require.Equal(t, 100*time.Millisecond, ds[0], "the input is not changed")
	require.Equal(t, time.Duration(0), perf.Percentile(nil, 0.5))
	// Nearest rank: of 10 samples the p99 is the largest, the p50 the fifth.
	ten := []time.Duration{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	require.Equal(t, time.Duration(10), perf.Percentile(ten, 0.99))
	require.Equal(t, time.Duration(5), perf.Percentile(ten, 0.5))
}

func TestRatios(t *testing.T) {
	require.Equal(t, []float64{0.5, 1}, perf.Ratios([]float64{2, 3}, []float64{4, 3}))
	require.Equal(t, []float64{2}, perf.Ratios([]float64{2, 9}, []float64{1}), "rounds both have")
	r := perf.Ratios([]float64{1}, []float64{0})
	require.True(t, math.IsNaN(r[0]))
	row := perf.Row{Measured: []float64{30, 47, 40}, Baseline: []float64{100, 100, 100}}
	require.Equal(t, perf.Summary{Min: 0.3, Median: 0.4, Max: 0.47}, row.Ratio())
}

// TestRatioIsPerRound: the ratio pairs each round's values, not the medians of each side.
func TestRatioIsPerRound(t *testing.T) {
	row := perf.Row{Measured: []float64{10, 1, 100}, Baseline: []float64{10, 1, 100}}
	require.Equal(t, perf.Summary{Min: 1, Median: 1, Max: 1}, row.Ratio())
}

func TestMet(t *testing.T) {
	row := perf.Row{Measured: []float64{30, 47, 40}, Baseline: []float64{100, 100, 100}}
	_, ok := row.Met()
	require.False(t, ok, "no bound")
	row.Goal = perf.Goal{Text: ">= 0.8x", Of: "ratio", Bound: 0.8}
	met, ok := row.Met()
	require.True(t, ok)
	require.False(t, met)
	row.Goal = perf.Goal{Text: "<= 0.5x", Of: "ratio", AtMost: true, Bound: 0.5}
	met, ok = row.Met()
	require.True(t, ok && met)
	row.Goal = perf.Goal{Text: "<= 40", Of: "measured", AtMost: true, Bound: 40}
	met, ok = row.Met()
	require.True(t, ok && met, "the median is 40")
	row.Goal.Bound = 39.9
	met, _ = row.Met()
	require.False(t, met)
	noBase := perf.Row{Measured: []float64{1}, Goal: perf.Goal{Text: ">= 1x", Of: "ratio", Bound: 1}}
	_, ok = noBase.Met()
	require.False(t, ok, "a ratio goal without a baseline is not judged")
}

func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{412.7, "commits/s", "413 commits/s"},
		{12.34, "ms", "12.3 ms"},
		{1.234, "ms", "1.23 ms"},
		{0.01234, "ms", "0.0123 ms"},
		{0, "ms", "0 ms"},
		{1536, "bytes", "1.50 KiB"},
		{3 << 20, "bytes", "3.00 MiB"},
		{-2048, "bytes", "-2.00 KiB"},
		{500, "bytes", "500 B"},
		{5, "", "5.00"},
		{math.NaN(), "ms", "—"},
	} {
		require.Equal(t, c.want, perf.FormatValue(c.v, c.unit), "%v %s", c.v, c.unit)
	}
}

func TestMarkdownAndJSON(t *testing.T) {
	res := &perf.Result{Rounds: 3, Machine: "a machine", Rows: []perf.Row{
		{Figure: "store-append", Measure: "commits/s", Unit: "commits/s", Measured: []float64{30, 47, 40},
			BaselineName: "raw", Baseline: []float64{100, 100, 100}, Goal: perf.Goal{Text: ">= 0.8x", Of: "ratio", Bound: 0.8},
			Note: "a note"},
		{Figure: "memory", Measure: "heap | per stream", Unit: "bytes", Measured: []float64{2048}},
	}, Skipped: []perf.Skip{{Figure: "pg-store", Reason: "needs PostgreSQL"}}}
	var md bytes.Buffer
	require.NoError(t, res.Markdown(&md))
	out := md.String()
	require.Contains(t, out, "| store-append | commits/s | 40.0 commits/s | 100 commits/s (raw) | 0.30 / 0.40 / 0.47x | >= 0.8x | no |")
	require.Contains(t, out, `| memory | heap \| per stream | 2.00 KiB | — | — |  |  |`)
	require.Contains(t, out, "- store-append, commits/s: a note")
	require.Contains(t, out, "- skipped pg-store: needs PostgreSQL")
	require.Contains(t, out, "3 rounds")

	var js bytes.Buffer
	require.NoError(t, res.JSON(&js))
	var doc struct {
		Rows      []perf.Row `json:"rows"`
		Summaries []struct {
			Figure string        `json:"figure"`
			Ratio  *perf.Summary `json:"ratio"`
			Met    *bool         `json:"met"`
		} `json:"summaries"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc), js.String())
	require.Len(t, doc.Rows, 2)
	require.Equal(t, []float64{30, 47, 40}, doc.Rows[0].Measured)
	require.Equal(t, perf.Summary{Min: 0.3, Median: 0.4, Max: 0.47}, *doc.Summaries[0].Ratio)
	require.False(t, *doc.Summaries[0].Met)
	require.Nil(t, doc.Summaries[1].Ratio)
	require.Nil(t, doc.Summaries[1].Met)
}

func TestRunRefusesAnUnknownFigure(t *testing.T) {
	_, err := perf.Run(context.Background(), perf.Config{Figures: []string{"store-append", "nonsense"}})
	require.ErrorContains(t, err, `no figure "nonsense"`)
}

func TestPostgresFiguresAreSkippedWithoutAServer(t *testing.T) {
	var names []string
	for _, f := range perf.Figures() {
		if f.Postgres {
			names = append(names, f.Name)
		}
	}
	require.NotEmpty(t, names)
	res, err := perf.Run(context.Background(), perf.Config{Figures: names, Postgres: false})
	require.NoError(t, err)
	require.Empty(t, res.Rows)
	require.Len(t, res.Skipped, len(names))
	for _, s := range res.Skipped {
		require.Contains(t, s.Reason, "PGHOST")
	}
}

// TestEveryFigureRunsQuick: a tiny run (quick sizes, two rounds) of each figure measures a value
// in every round, beside a baseline in every round where the row has one. The figures on
// PostgreSQL run when PGHOST names a server.
func TestEveryFigureRunsQuick(t *testing.T) {
	for _, f := range perf.Figures() {
		t.Run(f.Name, func(t *testing.T) {
			if f.Postgres && os.Getenv("PGHOST") == "" {
				t.Skip("PGHOST is unset")
			}
			if testing.Short() && (f.Name == "restart" || f.Name == "open-10000" || f.Name == "stream-resume" || f.Postgres) {
				t.Skip("builds binaries or starts nodes: not short")
			}
			var log bytes.Buffer
			res, err := perf.Run(context.Background(), perf.Config{Figures: []string{f.Name}, Rounds: 2, Quick: true,
				Postgres: f.Postgres, TempDir: t.TempDir(), Log: &log})
			require.NoError(t, err, log.String())
			if len(res.Skipped) > 0 {
				t.Skip(res.Skipped[0].Reason)
			}
			require.NotEmpty(t, res.Rows)
			for _, row := range res.Rows {
				require.Equal(t, f.Name, row.Figure)
				require.NotEmpty(t, row.Measure)
				require.Len(t, row.Measured, 2, row.Measure)
				for _, v := range row.Measured {
					require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%s: %v", row.Measure, row.Measured)
				}
				if row.BaselineName != "" {
					require.Len(t, row.Baseline, 2, row.Measure)
				} else {
					require.Empty(t, row.Baseline, row.Measure)
				}
				if strings.HasPrefix(row.Measure, "bytes written to storage per turn") {
					// Every turn commits, on either side: a zero would mean the counts were
					// read around nothing.
					for _, v := range append(row.Measured, row.Baseline...) {
						require.Greater(t, v, 0.0, row.Measure)
					}
				}
				if row.Measure == "rows stored per turn" {
					// Every turn stores its message and its reply, and means something.
					for _, v := range append(row.Measured, row.Baseline...) {
						require.Greater(t, v, 0.0, row.Measure)
					}
				}
				if strings.HasPrefix(row.Measure, "garbage per turn") {
					// Every turn allocates, the bare server's too: a zero would mean the
					// counters were read around nothing.
					for _, v := range append(row.Measured, row.Baseline...) {
						require.Greater(t, v, 0.0, row.Measure)
					}
				}
			}
			require.Contains(t, log.String(), f.Name+": round 1")
			require.Contains(t, log.String(), f.Name+": round 2")
			require.NotContains(t, log.String(), f.Name+": round 3", "two rounds, numbered from 1")
			checkOverheads(t, res.Rows)
			checkNotesOnce(t, res.Rows)
			if f.Name == "fanout" {
				// p50, p99, CPU per frame per viewer; every run uses CPU on either side, and a
				// frame's p99 is never below its p50.
				require.Len(t, res.Rows, 3)
				for _, v := range append(res.Rows[2].Measured, res.Rows[2].Baseline...) {
					require.Greater(t, v, 0.0, res.Rows[2].Measure)
				}
				for r := range 2 {
					require.GreaterOrEqual(t, res.Rows[1].Measured[r], res.Rows[0].Measured[r])
					require.GreaterOrEqual(t, res.Rows[1].Baseline[r], res.Rows[0].Baseline[r])
				}
			}
			if f.Name == "turns-durable" {
				require.Equal(t, durableMeasures(), measures(res.Rows))
				note := res.Rows[0].Note
				require.Contains(t, note, "(synchronous FULL)")
				require.Contains(t, note, "(synchronous NORMAL)")
				for _, i := range []int{1, 3} {
					require.Equal(t, perf.Goal{Text: "<= 0.5 ms", Of: "measured", AtMost: true, Bound: 0.5}, res.Rows[i].Goal, res.Rows[i].Measure)
					require.Empty(t, res.Rows[i].Note, res.Rows[i].Measure)
				}
			}
		})
	}
}

// checkOverheads: a row of the overhead per turn follows the row of the time per turn it is
// taken from, and holds, round by round, that row's value minus its baseline.
func checkOverheads(t *testing.T, rows []perf.Row) {
	t.Helper()
	for i, row := range rows {
		if !strings.HasPrefix(row.Measure, "overhead per turn") {
			continue
		}
		require.Positive(t, i, row.Measure)
		of := rows[i-1]
		require.True(t, strings.HasPrefix(of.Measure, "median time per turn"), "%s follows %s", row.Measure, of.Measure)
		require.Len(t, row.Measured, len(of.Measured), row.Measure)
		for r := range row.Measured {
			require.InDelta(t, of.Measured[r]-of.Baseline[r], row.Measured[r], 1e-9, "%s, round %d", row.Measure, r+1)
		}
	}
}

// checkNotesOnce: of the garbage rows and the rows of bytes written, the first of each kind
// carries the note that says how it is counted, and the others repeat nothing.
func checkNotesOnce(t *testing.T, rows []perf.Row) {
	t.Helper()
	for _, kind := range []string{"garbage per turn", "bytes written to storage per turn"} {
		n := 0
		for _, row := range rows {
			if !strings.HasPrefix(row.Measure, kind) {
				continue
			}
			if n == 0 {
				require.NotEmpty(t, row.Note, row.Measure)
			} else {
				require.Empty(t, row.Note, row.Measure)
			}
			n++
		}
	}
}

// durableMeasures are the rows turns-durable reports, in order: the bytes written only where
// this process can read how many it wrote.
func durableMeasures() []string {
	var m []string
	for _, s := range []string{"synchronous FULL", "synchronous NORMAL"} {
		m = append(m, "median time per turn, 1 conversation, "+s,
			"overhead per turn beyond its 3 durable commits (median, engine minus bare with 3 commits), "+s)
	}
	for _, s := range []string{"synchronous FULL", "synchronous NORMAL"} {
		m = append(m, "garbage per turn, 1 conversation, "+s, "garbage collections per 1000 turns, 1 conversation, "+s)
	}
	if b, err := os.ReadFile("/proc/self/io"); err == nil && strings.Contains("\n"+string(b), "\nwrite_bytes:") {
		for _, s := range []string{"synchronous FULL", "synchronous NORMAL"} {
			m = append(m, "bytes written to storage per turn, 1 conversation, "+s)
		}
	}
	return m
}

// measures lists the rows' measures in order.
func measures(rows []perf.Row) []string {
	var m []string
	for _, r := range rows {
		m = append(m, r.Measure)
	}
	return m
}
