package harness

import (
	"fmt"
	"sort"

	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/steps"
)

// findingKey tells one contract violation from another: the same break on the same route is one
// finding however many exchanges showed it.
type findingKey struct{ route, location, message string }

// addFindings folds the violations scenario id saw into the run's findings: each distinct one
// once, with the first exchange that showed it. The caller holds r.mu.
func (r *runner) addFindings(id string, seen []steps.SeenViolation) {
	for _, sv := range seen {
		k := findingKey{sv.Violation.Route, sv.Violation.Pointer, sv.Violation.Message}
		if r.findings == nil {
			r.findings = map[findingKey]*report.ContractFinding{}
		}
		f := r.findings[k]
		if f == nil {
			ex := sv.Exchange
			f = &report.ContractFinding{Route: k.route, Location: k.location, Schema: sv.Violation.Schema,
				Message: k.message, Scenarios: []string{}, Example: &ex}
			r.findings[k] = f
		}
		f.Occurrences++
		if n := len(f.Scenarios); n == 0 || f.Scenarios[n-1] != id {
			f.Scenarios = append(f.Scenarios, id)
		}
	}
}

// sortedFindings lists the run's findings by route, location and message, each finding's
// scenarios in id order. The caller holds r.mu or the run is over.
func (r *runner) sortedFindings() []report.ContractFinding {
	out := make([]report.ContractFinding, 0, len(r.findings))
	for _, f := range r.findings {
		sort.SliceStable(f.Scenarios, func(i, j int) bool { return idLess(f.Scenarios[i], f.Scenarios[j]) })
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Route != b.Route {
			return a.Route < b.Route
		}
		if a.Location != b.Location {
			return a.Location < b.Location
		}
		return a.Message < b.Message
	})
	return out
}

// contractNotes is what a scenario's report says of the violations it saw: each distinct one
// once, pointing at the run's finding rather than standing for the scenario's verdict.
func contractNotes(seen []steps.SeenViolation) []string {
	var notes []string
	done := map[findingKey]bool{}
	for _, sv := range seen {
		k := findingKey{sv.Violation.Route, sv.Violation.Pointer, sv.Violation.Message}
		if done[k] {
			continue
		}
		done[k] = true
		notes = append(notes, fmt.Sprintf("contract violation (reported once among the contract findings, under %s): %s", ContractRequirement, sv.Violation.String()))
	}
	return notes
}
