package mutation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Report is what a run writes to mutation.json.
type Report struct {
	// Generated is when the report was written.
	Generated time.Time `json:"generated"`
	// Selection says which mutants were judged (all, a sample, changed files).
	Selection string `json:"selection"`
	// Seconds is the run's wall time so far; SecondsPerMutant the mean over the mutants run.
	Seconds          float64 `json:"seconds"`
	SecondsPerMutant float64 `json:"secondsPerMutant"`
	// Total sums the packages.
	Total Tally `json:"total"`
	// Packages tallies each package.
	Packages []Tally `json:"packages"`
	// Results are every mutant's outcome, in source order.
	Results []Result `json:"results"`
}

// Tally counts the outcomes of one package (or of all).
type Tally struct {
	Package    string `json:"package"`
	Mutants    int    `json:"mutants"`
	Killed     int    `json:"killed"`
	Timeout    int    `json:"timeout"`
	Survived   int    `json:"survived"`
	Equivalent int    `json:"equivalent"`
	NotCovered int    `json:"notCovered"`
	NotViable  int    `json:"notViable"`
	NotRun     int    `json:"notRun"`
	// KillRate is (killed + timeout) / (killed + timeout + survived): the share of the judged,
	// non-equivalent mutants the suite noticed (0 when none were judged).
	KillRate float64 `json:"killRate"`
	// KillRateWithUncovered counts the not-covered mutants as survivors.
	KillRateWithUncovered float64 `json:"killRateWithUncovered"`
}

func (t *Tally) add(r Result) {
	t.Mutants++
	switch r.Status {
	case Killed:
		t.Killed++
	case KilledByTimeout:
		t.Timeout++
	case Survived:
		t.Survived++
	case Equivalent:
		t.Equivalent++
	case NotCovered:
		t.NotCovered++
	case NotViable:
		t.NotViable++
	case NotRun:
		t.NotRun++
	}
	k := float64(t.Killed + t.Timeout)
	if d := t.Killed + t.Timeout + t.Survived; d > 0 {
		t.KillRate = k / float64(d)
	}
	if d := t.Killed + t.Timeout + t.Survived + t.NotCovered; d > 0 {
		t.KillRateWithUncovered = k / float64(d)
	}
}

// Summarize tallies results per package.
//
//	rep := mutation.Summarize(results, "sample of 30 per package, seed 1", elapsed)
func Summarize(results []Result, selection string, elapsed time.Duration) Report {
	rep := Report{Generated: time.Now().UTC(), Selection: selection, Seconds: elapsed.Seconds(), Results: results, Total: Tally{Package: "all"}}
	by := map[string]*Tally{}
	var ran int
	var ranSec float64
	for _, r := range results {
		t := by[r.Package]
		if t == nil {
			t = &Tally{Package: r.Package}
			by[r.Package] = t
		}
		t.add(r)
		rep.Total.add(r)
		if r.Status != NotCovered && r.Status != NotRun {
			ran++
			ranSec += r.Seconds
		}
	}
	if ran > 0 {
		rep.SecondsPerMutant = ranSec / float64(ran)
	}
	for _, t := range by {
		rep.Packages = append(rep.Packages, *t)
	}
	sort.Slice(rep.Packages, func(a, b int) bool { return rep.Packages[a].Package < rep.Packages[b].Package })
	return rep
}

// Write writes mutation.json and summary.md of rep into dir (created if needed).
//
//	err := mutation.Write("reports/mutation", rep)
func Write(dir string, rep Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "mutation.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(Markdown(rep)), 0o644)
}

// Markdown renders rep for people: the kill rate per package, then every survivor with file:line,
// function and mutation, then the timeouts, the equivalent and the not-covered mutants.
//
//	os.WriteFile("survivors.md", []byte(mutation.Markdown(rep)), 0o644)
func Markdown(rep Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Mutation testing of the reference\n\n")
	fmt.Fprintf(&b, "Selection: %s. Written %s; %.0f s so far, %.1f s per mutant run.\n\n", rep.Selection,
		rep.Generated.Format(time.RFC3339), rep.Seconds, rep.SecondsPerMutant)
	fmt.Fprintf(&b, "Kill rate = (killed + timeout) / (killed + timeout + survived); equivalent, not-covered and not-viable mutants are left out of it (the last column counts not-covered ones as survivors).\n\n")
	fmt.Fprintf(&b, "| package | mutants | killed | timeout | survived | equivalent | not covered | not viable | not run | kill rate | with not covered |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range append(rep.Packages, rep.Total) {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f%% | %.1f%% |\n", t.Package, t.Mutants, t.Killed, t.Timeout,
			t.Survived, t.Equivalent, t.NotCovered, t.NotViable, t.NotRun, 100*t.KillRate, 100*t.KillRateWithUncovered)
	}
	section := func(title string, st Status, extra func(Result) string) {
		var rows []Result
		for _, r := range rep.Results {
			if r.Status == st {
				rows = append(rows, r)
			}
		}
		fmt.Fprintf(&b, "\n## %s (%d)\n\n", title, len(rows))
		for _, r := range rows {
			fmt.Fprintf(&b, "- `%s:%d` %s · %s: `%s`%s\n", r.File, r.Line, r.Func, r.Operator, r.Change(), extra(r))
		}
	}
	none := func(Result) string { return "" }
	section("Survivors", Survived, func(r Result) string { return " · id " + r.ID })
	section("Killed by timeout", KilledByTimeout, func(r Result) string { return " · in " + r.KilledBy })
	section("Equivalent", Equivalent, func(r Result) string { return " — " + r.Reason })
	section("Not covered by any test of the suite", NotCovered, none)
	section("Not viable (does not compile)", NotViable, none)
	var wrong []Result
	for _, r := range rep.Results {
		if (r.Status == Killed || r.Status == KilledByTimeout) && r.Reason != "" {
			wrong = append(wrong, r)
		}
	}
	if len(wrong) > 0 {
		fmt.Fprintf(&b, "\n## Listed as equivalent, yet killed (%d)\n\n", len(wrong))
		for _, r := range wrong {
			fmt.Fprintf(&b, "- `%s:%d` %s: `%s` killed by %s %s\n", r.File, r.Line, r.Func, r.Change(), r.KilledBy, r.Test)
		}
	}
	return b.String()
}
