// Package report holds the result of one conformance run and writes it in the formats people gate
// CI on and read: report.json (schemas/report.schema.json), junit.xml, cucumber.json, summary.md and
// a self-contained report.html.
//
// A Report is plain data. The runner fills it; the writers only read it and are safe to call
// concurrently on a Report nobody is changing.
package report

import "time"

// Status is the outcome of one scenario or requirement. The values are ordered from best to worst
// for the purpose of folding several outcomes into one (see Worse).
type Status string

const (
	Passed        Status = "passed"
	NotApplicable Status = "not-applicable"
	Skipped       Status = "skipped"
	Pending       Status = "pending"
	Undefined     Status = "undefined"
	Failed        Status = "failed"
	HarnessError  Status = "harness-error"
)

// NotRun is the status of a requirement none of whose scenarios ran in this run (a filter left
// them out): it was not judged, which says nothing about the system. It is never a scenario's or
// a step's status, and it is not among Statuses.
const NotRun Status = "not-run"

// Report is the whole result of one run.
type Report struct {
	Kit         Kit       `json:"kit"`
	SpecVersion string    `json:"specVersion"`
	Target      Target    `json:"target"`
	StartedAt   time.Time `json:"startedAt"`
	DurationMs  int64     `json:"durationMs"`
	// Conformant is true when every claimed profile ran and every scenario of it passed or is
	// expected to fail by the baseline, and nothing is stale. A run that judged no claimed
	// profile, or left one unjudged (NotRun), is never conformant.
	Conformant bool `json:"conformant"`
	// NotRun lists the claimed profiles none of whose scenarios ran (a filtered run, or a
	// target whose every scenario of the profile is not applicable).
	NotRun []string `json:"notRun,omitempty"`
	// ExitCode is what loomcheck exits with: 0 conformant, 1 not conformant, 2 usage or harness error.
	ExitCode     int                 `json:"exitCode"`
	Totals       Totals              `json:"totals"`
	Profiles     []ProfileResult     `json:"profiles"`
	Scenarios    []Scenario          `json:"scenarios"`
	Requirements []RequirementResult `json:"requirements"`
	Contract     Contract            `json:"contract"`
	Baseline     *BaselineResult     `json:"baseline,omitempty"`
	// Warnings lists SHOULD-level requirements that failed: reported, never failing the run.
	Warnings []string `json:"warnings,omitempty"`
	// Unstarted says why the system under test could not be started or did not answer its
	// discovery document: no scenario ran, and the run is not conformant (exit code 1), a
	// failure of the system and not of the kit.
	Unstarted string `json:"unstarted,omitempty"`
}

// Kit names the conformance kit that produced the report.
type Kit struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Target says what was tested and how it was driven.
type Target struct {
	// Driver is "in-process", "process" or "remote".
	Driver string `json:"driver"`
	// Description is the command, URL or implementation name.
	Description string `json:"description"`
	// Implementation is what the target's discovery document says about itself.
	Implementation string   `json:"implementation,omitempty"`
	Profiles       []string `json:"claimedProfiles"`
}

// Totals counts scenarios by outcome.
type Totals struct {
	Passed        int `json:"passed"`
	Failed        int `json:"failed"`
	NotApplicable int `json:"notApplicable"`
	Skipped       int `json:"skipped"`
	Undefined     int `json:"undefined"`
	Pending       int `json:"pending"`
	HarnessError  int `json:"harnessError"`
}

// ProfileResult is the verdict on one profile.
type ProfileResult struct {
	Name       string `json:"name"`
	Claimed    bool   `json:"claimed"`
	Conformant bool   `json:"conformant"`
	// Verdict is one of the Profile* constants: conformant, not conformant, not run (claimed,
	// but no scenario of it ran), not claimed.
	Verdict string `json:"verdict,omitempty"`
	Totals  Totals `json:"totals"`
}

// The verdicts of a profile.
const (
	ProfileConformant    = "conformant"
	ProfileNotConformant = "not-conformant"
	ProfileNotRun        = "not-run"
	ProfileNotClaimed    = "not-claimed"
)

// Scenario is one executed (or not-applicable) scenario.
type Scenario struct {
	// ID is "<feature file>:<line>", stable across runs of the same kit version.
	ID           string     `json:"id"`
	Feature      string     `json:"feature"`
	Name         string     `json:"name"`
	Tags         []string   `json:"tags"`
	Profile      string     `json:"profile"`
	Requirements []string   `json:"requirements"`
	Status       Status     `json:"status"`
	DurationMs   int64      `json:"durationMs"`
	Message      string     `json:"message,omitempty"`
	Failure      *Failure   `json:"failure,omitempty"`
	Steps        []Step     `json:"steps"`
	Exchanges    []Exchange `json:"exchanges,omitempty"`
	// Expected is set when the baseline expected this scenario to fail; it holds the reason.
	Expected string `json:"expected,omitempty"`
	// Notes says what the scenario saw beside its verdict: the contract violations its exchanges
	// showed, each reported once as a finding of Contract and not as this scenario's failure.
	Notes []string `json:"notes,omitempty"`
	// SystemOutput is the end of what the system under test printed (the standard output and
	// error of its processes; nothing for an engine in the kit's process or a remote target) while the scenario ran, kept for a scenario that
	// failed or met a harness error so the reader can see the system's side; at most
	// SystemOutputBytes bytes, cut at the front.
	SystemOutput string `json:"systemOutput,omitempty"`
}

// SystemOutputBytes bounds Scenario.SystemOutput: a report of many failures stays readable.
const SystemOutputBytes = 8 << 10

// Failure explains a failed scenario: which rule, which operation, what was got and wanted.
type Failure struct {
	Requirement string `json:"requirement,omitempty"`
	Rule        string `json:"rule,omitempty"`
	Operation   string `json:"operation"`
	Got         string `json:"got"`
	Want        string `json:"want"`
}

// Step is one Gherkin step and how it went.
type Step struct {
	Keyword string `json:"keyword"`
	// Line is the step's line in its feature file (0 when not known).
	Line       int    `json:"line,omitempty"`
	Text       string `json:"text"`
	Status     Status `json:"status"`
	DurationMs int64  `json:"durationMs"`
	Error      string `json:"error,omitempty"`
	// DocString and Table hold the step's argument, if any.
	DocString string     `json:"docString,omitempty"`
	Table     [][]string `json:"table,omitempty"`
}

// Exchange is one HTTP exchange with the system under test, credentials redacted.
type Exchange struct {
	Method          string              `json:"method"`
	URL             string              `json:"url"`
	Status          int                 `json:"status"`
	RequestHeaders  map[string][]string `json:"requestHeaders,omitempty"`
	RequestBody     string              `json:"requestBody,omitempty"`
	ResponseHeaders map[string][]string `json:"responseHeaders,omitempty"`
	ResponseBody    string              `json:"responseBody,omitempty"`
	Events          []Event             `json:"events,omitempty"`
	Violations      []string            `json:"violations,omitempty"`
	DurationMs      int64               `json:"durationMs"`
}

// Event is one server-sent event the harness received.
type Event struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"event"`
	Data string `json:"data"`
}

// RequirementResult is the verdict on one catalogued requirement.
type RequirementResult struct {
	ID        string   `json:"id"`
	Level     string   `json:"level"`
	Profile   string   `json:"profile"`
	Source    string   `json:"source"`
	Rule      string   `json:"rule"`
	Status    Status   `json:"status"`
	Scenarios []string `json:"scenarios"`
}

// Contract counts the exchanges checked against spec/openapi.yaml and the schemas, and holds each
// distinct way the system's answers broke them, once.
type Contract struct {
	ExchangesValidated int `json:"exchangesValidated"`
	EventsValidated    int `json:"eventsValidated"`
	Violations         int `json:"violations"`
	// Requirement is the catalogued requirement the findings break (ADR0122-D6-01), and Rule
	// its text; both are empty when there is no finding.
	Requirement string `json:"requirement,omitempty"`
	Rule        string `json:"rule,omitempty"`
	// Findings lists each distinct violation once, in order of route, location and message. A
	// run with any finding is not conformant, whatever the scenarios' verdicts.
	Findings []ContractFinding `json:"findings,omitempty"`
}

// ContractFinding is one distinct violation of the contract: where it was, what the contract
// says, how often and in which scenarios it was seen, and the first exchange that showed it.
type ContractFinding struct {
	// Route is the operation, "METHOD /path/template".
	Route string `json:"route"`
	// Location is where in the exchange: a JSON pointer into the body, "header:<Name>",
	// "query:<name>", "path:<name>", "status", "route" or "event".
	Location string `json:"location"`
	// Schema is where the contract states the rule: a JSON pointer into spec/openapi.yaml
	// ("#/paths/~1conversations/post/responses/201/headers/X-Content-Type-Options") or the
	// name of an event schema, when known.
	Schema string `json:"schema,omitempty"`
	// Message says what the contract wants.
	Message string `json:"message"`
	// Occurrences counts the exchanges and events that showed it, over all scenarios.
	Occurrences int `json:"occurrences"`
	// Scenarios lists the ids of the scenarios that saw it.
	Scenarios []string `json:"scenarios"`
	// Example is the first exchange that showed it, credentials redacted.
	Example *Exchange `json:"example,omitempty"`
}

// BaselineResult reports how the run compared with a baseline of expected failures.
type BaselineResult struct {
	File string `json:"file"`
	// Expected lists the failures the baseline excused.
	Expected []BaselineEntry `json:"expected"`
	// Stale lists baseline entries that now pass: each fails the run so baselines shrink.
	Stale []BaselineEntry `json:"stale"`
	// Unexpected lists failures the baseline does not excuse.
	Unexpected []string `json:"unexpected"`
}

// BaselineEntry names a requirement id or a scenario id and why it is expected to fail.
type BaselineEntry struct {
	Requirement string `json:"requirement,omitempty"`
	Scenario    string `json:"scenario,omitempty"`
	Reason      string `json:"reason"`
}

// Excused counts the failed scenarios the baseline expected: a run with any is a pass of the gate
// ("no new failures"), never a conformant system.
func (r *Report) Excused() int {
	n := 0
	for _, sc := range r.Scenarios {
		if sc.Status == Failed && sc.Expected != "" {
			n++
		}
	}
	return n
}
