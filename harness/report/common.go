package report

import (
	"strconv"
	"strings"
)

// splitID splits a scenario ID "<feature file>:<line>" into its file and line. An ID without a
// numeric line gives the whole ID as file and line 0.
func splitID(id string) (file string, line int) {
	i := strings.LastIndexByte(id, ':')
	if i < 0 {
		return id, 0
	}
	n, err := strconv.Atoi(id[i+1:])
	if err != nil || n < 0 {
		return id, 0
	}
	return id[:i], n
}

// featureName is the name scenarios are grouped under: the feature, else the feature file.
func featureName(sc *Scenario) string {
	if sc.Feature != "" {
		return sc.Feature
	}
	if f, _ := splitID(sc.ID); f != "" {
		return f
	}
	return "(no feature)"
}

// featureGroup is the scenarios of one feature, in report order.
type featureGroup struct {
	name      string
	file      string
	scenarios []*Scenario
}

// groupByFeature groups r's scenarios by feature, features in order of first appearance.
func groupByFeature(r *Report) []*featureGroup {
	var groups []*featureGroup
	index := map[string]*featureGroup{}
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		name := featureName(sc)
		g := index[name]
		if g == nil {
			file, _ := splitID(sc.ID)
			g = &featureGroup{name: name, file: file}
			index[name] = g
			groups = append(groups, g)
		}
		g.scenarios = append(g.scenarios, sc)
	}
	return groups
}

// levels maps requirement id to its level, as catalogued in r.Requirements.
func levels(r *Report) map[string]string {
	m := make(map[string]string, len(r.Requirements))
	for _, q := range r.Requirements {
		m[q.ID] = q.Level
	}
	return m
}

// failureKind says how a failed scenario counts against the verdict.
type failureKind int

const (
	// gatingFailure fails the run.
	gatingFailure failureKind = iota
	// expectedFailure is excused by the baseline (Scenario.Expected is set).
	expectedFailure
	// warningFailure only breaks requirements weaker than MUST: it is reported as a warning.
	warningFailure
)

// classifyFailure decides how a Failed scenario counts. A scenario whose requirements are all
// catalogued at a level weaker than MUST (see weakLevel) is a warning; one the baseline expects is
// excused; anything else, including a scenario with no requirements, fails the run.
func classifyFailure(sc *Scenario, lv map[string]string) failureKind {
	if sc.Expected != "" {
		return expectedFailure
	}
	if len(sc.Requirements) == 0 {
		return gatingFailure
	}
	for _, id := range sc.Requirements {
		if !weakLevel(lv[id]) {
			return gatingFailure
		}
	}
	return warningFailure
}

// weakLevel reports whether a requirement level is weaker than MUST: SHOULD, SHOULD NOT,
// RECOMMENDED, NOT RECOMMENDED, MAY or OPTIONAL. Unknown and empty levels are not weak.
func weakLevel(level string) bool {
	switch strings.ToUpper(strings.Join(strings.Fields(level), " ")) {
	case "SHOULD", "SHOULD NOT", "RECOMMENDED", "NOT RECOMMENDED", "MAY", "OPTIONAL":
		return true
	}
	return false
}

// failureParts are the requirement, the operation and "got X, want Y" of sc's Failure, as far as
// it has them.
func failureParts(sc *Scenario) []string {
	var parts []string
	if f := sc.Failure; f != nil {
		if f.Requirement != "" {
			parts = append(parts, f.Requirement)
		}
		if f.Operation != "" {
			parts = append(parts, f.Operation)
		}
		if f.Got != "" || f.Want != "" {
			parts = append(parts, "got "+f.Got+", want "+f.Want)
		}
	}
	return parts
}

// extraMessage is what sc's Message says beyond its Failure: the runner writes a failure's message
// as "requirement: operation: got X, want Y" and may add to it (what the system printed), so
// repeating the whole message after the failure would say everything twice.
func extraMessage(sc *Scenario) string {
	if sc.Failure == nil {
		return sc.Message
	}
	parts := failureParts(sc)
	said := []string{strings.Join(parts, ": ")}
	if sc.Failure.Requirement != "" {
		said = append(said, strings.Join(parts[1:], ": ")) // the message without the requirement
	}
	for _, s := range said {
		if s != "" && strings.HasPrefix(sc.Message, s) {
			return strings.TrimLeft(strings.TrimPrefix(sc.Message, s), "; :")
		}
	}
	return sc.Message
}

// failureLine is a one-line account of why sc did not pass, each thing said once.
func failureLine(sc *Scenario) string {
	parts := failureParts(sc)
	if m := extraMessage(sc); m != "" {
		parts = append(parts, m)
	}
	if len(parts) == 0 {
		for _, st := range sc.Steps {
			if st.Error != "" {
				parts = append(parts, st.Error)
				break
			}
		}
	}
	if len(parts) == 0 {
		return string(sc.Status)
	}
	return oneLine(strings.Join(parts, ": "))
}

// oneLine folds whitespace runs, newlines included, into single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// truncate shortens s to at most n runes, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	runes := []rune(s)
	if len(runes) <= n {
		return s
	}
	return string(runes[:n-1]) + "…"
}
