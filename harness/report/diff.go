package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// DiffKind says what a DiffEntry is about.
//
//	if e.Kind == report.RequirementDiff { ... }
type DiffKind string

const (
	// ScenarioDiff entries are keyed by Scenario.ID.
	ScenarioDiff DiffKind = "scenario"
	// RequirementDiff entries are keyed by RequirementResult.ID.
	RequirementDiff DiffKind = "requirement"
)

// DiffEntry is one scenario or requirement whose outcome differs between two reports.
//
//	for _, e := range d.Regressed { fmt.Println(e.Kind, e.ID, e.Old, "->", e.New) }
type DiffEntry struct {
	Kind DiffKind `json:"kind"`
	ID   string   `json:"id"`
	// Name is the scenario name, or the requirement's rule, from the newer report when it has one.
	Name string `json:"name"`
	// Old is the status in the older report; empty for a new entry.
	Old Status `json:"old,omitempty"`
	// New is the status in the newer report; empty for a removed entry.
	New Status `json:"new,omitempty"`
}

// DiffResult compares two reports. Every list holds scenarios first, then requirements, each
// sorted by id.
//
//	d := report.Diff(old, cur)
//	fmt.Println(len(d.Regressed), "regressed")
type DiffResult struct {
	// Regressed entries passed before and now fail (failed or harness-error).
	Regressed []DiffEntry `json:"regressed"`
	// Fixed entries failed (failed or harness-error) before and now pass.
	Fixed []DiffEntry `json:"fixed"`
	// New entries appear only in the newer report.
	New []DiffEntry `json:"new"`
	// Removed entries appear only in the older report.
	Removed []DiffEntry `json:"removed"`
	// Changed entries changed status in any other way, for instance passed to not-applicable or
	// failed to harness-error.
	Changed []DiffEntry `json:"changed"`
	// OldConformant and NewConformant are the two verdicts; OldExitCode and NewExitCode the exit codes.
	OldConformant bool `json:"oldConformant"`
	NewConformant bool `json:"newConformant"`
	OldExitCode   int  `json:"oldExitCode"`
	NewExitCode   int  `json:"newExitCode"`
}

// HasRegressions reports whether anything that passed before fails now.
//
//	if d := report.Diff(old, cur); d.HasRegressions() { os.Exit(1) }
func (d DiffResult) HasRegressions() bool { return len(d.Regressed) > 0 }

// Empty reports whether the two reports agree on every scenario and requirement.
//
//	if report.Diff(old, cur).Empty() { fmt.Println("no change") }
func (d DiffResult) Empty() bool {
	return len(d.Regressed)+len(d.Fixed)+len(d.New)+len(d.Removed)+len(d.Changed) == 0
}

// Diff compares the scenarios (by Scenario.ID) and requirements (by RequirementResult.ID) of an
// older and a newer report. An entry is regressed when it was passed and is now failed or
// harness-error, fixed when it was failed or harness-error and is now passed, new or removed when
// only one report has it, and changed for any other change of status. Unchanged entries are not
// listed. When an id occurs twice in one report the first occurrence counts. A nil report is
// treated as empty. Scenario ids carry line numbers, so a scenario that moved in its feature file
// between kit versions shows as removed and new.
//
//	d := report.Diff(previous, current)
//	_ = report.WriteDiff(os.Stdout, d)
func Diff(older, newer *Report) DiffResult {
	if older == nil {
		older = &Report{}
	}
	if newer == nil {
		newer = &Report{}
	}
	d := DiffResult{
		OldConformant: older.Conformant, NewConformant: newer.Conformant,
		OldExitCode: older.ExitCode, NewExitCode: newer.ExitCode,
	}
	type item struct {
		name   string
		status Status
	}
	compare := func(kind DiffKind, before, after map[string]item, order []string) {
		for _, id := range order {
			a, inOld := before[id]
			b, inNew := after[id]
			name := b.name
			if !inNew {
				name = a.name
			}
			e := DiffEntry{Kind: kind, ID: id, Name: name, Old: a.status, New: b.status}
			switch {
			case !inOld:
				d.New = append(d.New, e)
			case !inNew:
				d.Removed = append(d.Removed, e)
			case a.status == b.status:
			case a.status == Passed && b.status.Failing():
				d.Regressed = append(d.Regressed, e)
			case a.status.Failing() && b.status == Passed:
				d.Fixed = append(d.Fixed, e)
			default:
				d.Changed = append(d.Changed, e)
			}
		}
	}
	index := func(n int, at func(int) (string, item)) (map[string]item, []string) {
		m := make(map[string]item, n)
		var ids []string
		for i := range n {
			id, it := at(i)
			if _, dup := m[id]; !dup {
				m[id] = it
				ids = append(ids, id)
			}
		}
		return m, ids
	}
	union := func(a, b []string) []string {
		out := slices.Concat(a, b)
		slices.Sort(out)
		return slices.Compact(out)
	}
	scen := func(r *Report) func(int) (string, item) {
		return func(i int) (string, item) {
			s := &r.Scenarios[i]
			return s.ID, item{s.Name, s.Status}
		}
	}
	reqs := func(r *Report) func(int) (string, item) {
		return func(i int) (string, item) {
			q := &r.Requirements[i]
			return q.ID, item{q.Rule, q.Status}
		}
	}
	so, soIDs := index(len(older.Scenarios), scen(older))
	sn, snIDs := index(len(newer.Scenarios), scen(newer))
	compare(ScenarioDiff, so, sn, union(soIDs, snIDs))
	ro, roIDs := index(len(older.Requirements), reqs(older))
	rn, rnIDs := index(len(newer.Requirements), reqs(newer))
	compare(RequirementDiff, ro, rn, union(roIDs, rnIDs))
	return d
}

// WriteDiff writes d as plain text for a terminal or CI log: the two verdicts, then each
// non-empty group (regressed, fixed, new, removed, changed) with one line per entry, then a count
// line.
//
//	_ = report.WriteDiff(os.Stdout, report.Diff(old, cur))
func WriteDiff(w io.Writer, d DiffResult) error {
	ew := &errWriter{w: w}
	verdict := func(ok bool, code int) string {
		if ok {
			return fmt.Sprintf("conformant (exit %d)", code)
		}
		return fmt.Sprintf("not conformant (exit %d)", code)
	}
	ew.printf("old: %s\nnew: %s\n", verdict(d.OldConformant, d.OldExitCode), verdict(d.NewConformant, d.NewExitCode))
	groups := []struct {
		title   string
		entries []DiffEntry
	}{
		{"Regressed", d.Regressed}, {"Fixed", d.Fixed}, {"New", d.New}, {"Removed", d.Removed}, {"Changed", d.Changed},
	}
	for _, g := range groups {
		if len(g.entries) == 0 {
			continue
		}
		ew.printf("\n%s (%d):\n", g.title, len(g.entries))
		for _, e := range g.entries {
			ew.printf("  %-11s %s  %s -> %s  %s\n", e.Kind, e.ID, orNone(e.Old), orNone(e.New), truncate(oneLine(e.Name), 120))
		}
	}
	ew.printf("\n%d regressed, %d fixed, %d new, %d removed, %d changed\n",
		len(d.Regressed), len(d.Fixed), len(d.New), len(d.Removed), len(d.Changed))
	return ew.err
}

func orNone(s Status) string {
	if s == "" {
		return "(none)"
	}
	return strings.TrimSpace(string(s))
}
