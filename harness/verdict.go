package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"

	"slices"
	"sort"

	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/steps"
	"github.com/loomcheck/loomcheck/spec"
)

// Judge computes every verdict of a report from its scenarios: totals, requirement statuses,
// per-profile conformance, warnings, the baseline comparison, Conformant and ExitCode.
//
// A claimed profile is conformant when at least one of its scenarios passed and none failed on a
// MUST requirement (unless the baseline expects it), broke the harness, or is undefined or
// pending. A claimed profile none of whose scenarios ran is "not run" (listed in NotRun) and
// makes the run not conformant: a filter never turns into a pass. A failure
// whose requirements are all SHOULD or MAY is a warning. A baseline entry that now passes is
// stale and fails the run, so baselines only shrink. Exit status: 2 when the harness broke, 1
// when the run is not conformant, 0 otherwise.
//
//	rep = harness.Judge(rep, cat, baseline)
//	os.Exit(rep.ExitCode)
func Judge(rep *report.Report, cat *spec.Catalogue, base *Baseline) *report.Report {
	rep.Totals = report.Totals{}
	rep.Warnings = nil
	rep.NotRun = nil
	claimed := map[string]bool{}
	for _, p := range rep.Target.Profiles {
		claimed[p] = true
	}
	levels := map[string]string{}
	for _, q := range cat.Requirements {
		levels[q.ID] = q.Level
	}
	var br *report.BaselineResult
	if base != nil {
		br = &report.BaselineResult{File: base.File, Expected: []report.BaselineEntry{}, Stale: []report.BaselineEntry{}, Unexpected: []string{}}
	}
	blocking, harnessBroke := judgeScenarios(rep, levels, claimed, base, br)
	status := judgeRequirements(rep, cat)
	contractBroken := judgeContract(rep, cat, br, excuseRequirement(base, ContractRequirement), status, blocking)
	stale := staleEntries(rep, base, br, status)
	rep.Baseline = br
	conformant := judgeProfiles(rep, cat, claimed, blocking)
	rep.Conformant = conformant && !stale && !harnessBroke && !contractBroken && len(claimed) > 0 && rep.Unstarted == ""
	rep.ExitCode = exitCode(rep, harnessBroke)
	return rep
}

// judgeScenarios counts every scenario's status into the totals and decides what each failure
// costs: excused by the baseline, a warning (only SHOULD or MAY requirements), or blocking its
// profile. It returns the blocked profiles and whether the harness broke.
func judgeScenarios(rep *report.Report, levels map[string]string, claimed map[string]bool, base *Baseline,
	br *report.BaselineResult) (blocking map[string]bool, harnessBroke bool) {
	blocking = map[string]bool{} // profile -> not conformant
	for i := range rep.Scenarios {
		sc := &rep.Scenarios[i]
		sc.Expected = ""
		rep.Totals.Add(sc.Status)
		switch sc.Status {
		case report.HarnessError:
			harnessBroke = true
			blocking[sc.Profile] = true
		case report.Failed:
			if e, ok := excuseScenario(base, sc); ok {
				sc.Expected = e.Reason
				br.Expected = append(br.Expected, e)
				continue
			}
			if onlyShould(levels, sc) {
				rep.Warnings = append(rep.Warnings, sc.ID+": "+sc.Message)
				continue
			}
			blocking[sc.Profile] = true
			if br != nil && claimed[sc.Profile] {
				br.Unexpected = append(br.Unexpected, sc.ID)
			}
		case report.Undefined, report.Pending:
			blocking[sc.Profile] = true
		}
	}
	return blocking, harnessBroke
}

// onlyShould reports whether every requirement the scenario proves is known and not a MUST (a
// scenario that proves none is not).
func onlyShould(levels map[string]string, sc *report.Scenario) bool {
	if len(sc.Requirements) == 0 {
		return false
	}
	for _, id := range sc.Requirements {
		if levels[id] == spec.Must || levels[id] == "" {
			return false
		}
	}
	return true
}

// excuseScenario is the baseline entry that expects the scenario to fail, by its id or one of its
// requirements, if there is one.
func excuseScenario(base *Baseline, sc *report.Scenario) (report.BaselineEntry, bool) {
	if base == nil {
		return report.BaselineEntry{}, false
	}
	for _, e := range base.Entries {
		if e.Scenario != "" && e.Scenario == sc.ID {
			return e, true
		}
		if e.Requirement != "" && slices.Contains(sc.Requirements, e.Requirement) {
			return e, true
		}
	}
	return report.BaselineEntry{}, false
}

// judgeRequirements sets the report's requirement results, each folded from its scenarios, in the
// catalogue's order, and returns each requirement's status by id.
func judgeRequirements(rep *report.Report, cat *spec.Catalogue) map[string]report.Status {
	byReq := map[string][]*report.Scenario{}
	for i := range rep.Scenarios {
		for _, id := range rep.Scenarios[i].Requirements {
			byReq[id] = append(byReq[id], &rep.Scenarios[i])
		}
	}
	rep.Requirements = rep.Requirements[:0]
	status := map[string]report.Status{}
	for _, q := range cat.Requirements {
		scs := byReq[q.ID]
		ids := make([]string, 0, len(scs))
		st := report.Status("")
		for _, sc := range scs {
			ids = append(ids, sc.ID)
			st = fold(st, sc.Status)
		}
		if st == "" {
			st = report.NotRun // none of its scenarios was selected
		}
		status[q.ID] = st
		rep.Requirements = append(rep.Requirements, report.RequirementResult{ID: q.ID, Level: q.Level, Profile: q.Profile,
			Source: q.Source, Rule: q.Rule, Status: st, Scenarios: ids})
	}
	return status
}

// staleEntries lists in br the baseline entries whose requirement or scenario now passes, and
// reports whether there is any.
func staleEntries(rep *report.Report, base *Baseline, br *report.BaselineResult, status map[string]report.Status) bool {
	stale := false
	if base == nil {
		return false
	}
	for _, e := range base.Entries {
		passes := false
		if e.Requirement != "" {
			passes = status[e.Requirement] == report.Passed
		}
		if e.Scenario != "" {
			for _, sc := range rep.Scenarios {
				if sc.ID == e.Scenario {
					passes = sc.Status == report.Passed
				}
			}
		}
		if passes {
			br.Stale = append(br.Stale, e)
			stale = true
		}
	}
	return stale
}

// judgeProfiles sets the report's profile results, those of the catalogue and of the scenarios,
// sorted by name, and reports whether every claimed profile is conformant.
func judgeProfiles(rep *report.Report, cat *spec.Catalogue, claimed, blocking map[string]bool) bool {
	names := map[string]bool{}
	for _, p := range cat.Profiles {
		names[p.Name] = true
	}
	for _, sc := range rep.Scenarios {
		if sc.Profile != "" {
			names[sc.Profile] = true
		}
	}
	rep.Profiles = rep.Profiles[:0]
	conformant := true
	for _, name := range slices.Sorted(maps.Keys(names)) {
		pr := report.ProfileResult{Name: name, Claimed: claimed[name]}
		for _, sc := range rep.Scenarios {
			if sc.Profile == name {
				pr.Totals.Add(sc.Status)
			}
		}
		ran := pr.Totals.Total() - pr.Totals.NotApplicable
		switch {
		case !pr.Claimed:
			pr.Verdict = report.ProfileNotClaimed
		case blocking[name]:
			pr.Verdict = report.ProfileNotConformant
		case ran == 0:
			// Claimed, but nothing of it ran (a filtered run, or every scenario not applicable
			// to this driver): not judged, and so never called conformant.
			pr.Verdict = report.ProfileNotRun
			rep.NotRun = append(rep.NotRun, name)
		case pr.Totals.Passed > 0:
			pr.Verdict, pr.Conformant = report.ProfileConformant, true
		default:
			pr.Verdict = report.ProfileNotConformant
		}
		if pr.Claimed && !pr.Conformant {
			conformant = false
		}
		rep.Profiles = append(rep.Profiles, pr)
	}
	sort.SliceStable(rep.Profiles, func(i, j int) bool { return rep.Profiles[i].Name < rep.Profiles[j].Name })
	return conformant
}

// exitCode is the run's exit status: 1 when the system did not start, 2 when the harness broke,
// 1 when the run is not conformant, 0 otherwise.
func exitCode(rep *report.Report, harnessBroke bool) int {
	switch {
	case rep.Unstarted != "":
		return 1
	case harnessBroke:
		return 2
	case !rep.Conformant:
		return 1
	default:
		return 0
	}
}

// judgeContract rules on the run's contract findings: any finding fails the contract requirement
// (once, whatever the scenarios' verdicts) and the profile it belongs to, unless the baseline
// excuses that requirement. It names the requirement and its rule on the findings and reports
// whether the findings fail the run.
func judgeContract(rep *report.Report, cat *spec.Catalogue, br *report.BaselineResult, excused *report.BaselineEntry,
	status map[string]report.Status, blocking map[string]bool) bool {
	rep.Contract.Requirement, rep.Contract.Rule = "", ""
	if len(rep.Contract.Findings) == 0 {
		return false
	}
	rep.Contract.Requirement = ContractRequirement
	q, known := cat.Get(ContractRequirement)
	if known {
		rep.Contract.Rule = q.Rule
	}
	for i := range rep.Requirements {
		if rq := &rep.Requirements[i]; rq.ID == ContractRequirement {
			if rq.Status == report.NotRun {
				rq.Status = report.Failed
			} else {
				rq.Status = fold(rq.Status, report.Failed)
			}
			status[rq.ID] = rq.Status
		}
	}
	if excused != nil {
		br.Expected = append(br.Expected, *excused)
		return false
	}
	if known {
		blocking[q.Profile] = true
	}
	return true
}

// excuseRequirement is base's entry for requirement id, if it has one.
func excuseRequirement(base *Baseline, id string) *report.BaselineEntry {
	if base == nil {
		return nil
	}
	for _, e := range base.Entries {
		if e.Requirement == id {
			return &e
		}
	}
	return nil
}

// fold combines the outcomes of a requirement's scenarios: the worst wins, and a requirement
// that no scenario could judge is not applicable.
func fold(acc, s report.Status) report.Status {
	if acc == "" {
		return s
	}
	rank := map[report.Status]int{report.Passed: 0, report.NotApplicable: -1, report.Skipped: 1, report.Pending: 2,
		report.Undefined: 3, report.Failed: 4, report.HarnessError: 5}
	if acc == report.NotApplicable {
		return s
	}
	if s == report.NotApplicable {
		return acc
	}
	if rank[s] > rank[acc] {
		return s
	}
	return acc
}

// Baseline lists failures a run expects, each with a reason.
type Baseline struct {
	File    string
	Entries []report.BaselineEntry
}

// LoadBaseline reads a baseline file: {"entries": [{"requirement"|"scenario": id, "reason": why}]}.
// Every entry needs a reason and exactly one of requirement and scenario.
//
//	base, err := harness.LoadBaseline("conformance-baseline.json")
func LoadBaseline(path string) (*Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Entries []report.BaselineEntry `json:"entries"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: baseline %s: %v", ErrUsage, path, err)
	}
	for i, e := range doc.Entries {
		if (e.Requirement == "") == (e.Scenario == "") || strings.TrimSpace(e.Reason) == "" {
			return nil, fmt.Errorf("%w: baseline %s: entry %d needs a reason and exactly one of requirement and scenario", ErrUsage, path, i+1)
		}
	}
	return &Baseline{File: path, Entries: doc.Entries}, nil
}

// Certify applies the rules of a certification run: a scenario of a claimed profile that was
// skipped or could not be judged (not applicable: a remote target that cannot be crashed, say)
// makes that profile, and the run, not conformant.
func Certify(rep *report.Report) {
	claimed := map[string]bool{}
	for _, p := range rep.Target.Profiles {
		claimed[p] = true
	}
	for _, sc := range rep.Scenarios {
		if claimed[sc.Profile] && (sc.Status == report.Skipped || sc.Status == report.NotApplicable) {
			for i := range rep.Profiles {
				if rep.Profiles[i].Name == sc.Profile {
					rep.Profiles[i].Conformant = false
				}
			}
			rep.Conformant = false
			if rep.ExitCode == 0 {
				rep.ExitCode = 1
			}
		}
	}
}

// Secrets lists the credentials the kit uses, for redaction in reports.
func Secrets() []string { return steps.Secrets() }
