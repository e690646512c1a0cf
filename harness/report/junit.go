package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Errors     int              `xml:"errors,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Time       string           `xml:"time,attr"`
	Timestamp  string           `xml:"timestamp,attr,omitempty"`
	File       string           `xml:"file,attr,omitempty"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitCase      `xml:"testcase"`
}

type junitProperties struct {
	Props []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Classname  string           `xml:"classname,attr"`
	Name       string           `xml:"name,attr"`
	Time       string           `xml:"time,attr"`
	File       string           `xml:"file,attr,omitempty"`
	Line       int              `xml:"line,attr,omitempty"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Failure    *junitOutcome    `xml:"failure,omitempty"`
	Error      *junitOutcome    `xml:"error,omitempty"`
	Skipped    *junitOutcome    `xml:"skipped,omitempty"`
	SystemOut  string           `xml:"system-out,omitempty"`
}

type junitOutcome struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	// Text is written as CDATA so multi-line details stay readable; xmlText cleans it first.
	Text string `xml:",cdata"`
}

// baselineSuite names the extra test suite that carries stale baseline entries and a verdict that
// no scenario explains.
const baselineSuite = "loomcheck"

// WriteJUnit writes r as JUnit XML, the form CI systems (GitHub Actions test reporters, GitLab,
// Jenkins) display: one <testsuite> per feature and one <testcase> per scenario, with
// classname = feature, name = scenario name, time in seconds, file and line from the scenario ID,
// and <properties> holding one "requirement" property per requirement id, a "profile" property and
// a "scenario-id" property.
//
// Outcomes map as follows, so that the JUnit counts fail a CI job exactly when the run is not
// conformant:
//
//	passed                        -> no child element
//	failed                        -> <failure message="..." type="<requirement id or failed>">
//	failed, expected by baseline  -> <skipped message="expected failure (baseline): ...">
//	failed, only SHOULD/MAY rules -> <skipped message="warning (...): ...">
//	harness-error                 -> <error message="harness error: ..." type="harness-error">
//	not-applicable                -> <skipped message="not applicable: ...">
//	skipped                       -> <skipped message="skipped: ...">
//	undefined                     -> <skipped message="undefined: ..."> (the kit is incomplete)
//	pending                       -> <skipped message="pending: ..."> (the kit is incomplete)
//
// Stale baseline entries and contract findings (unless the baseline excuses the contract
// requirement) fail the run, so each becomes a <failure> in an extra suite named
// "loomcheck"; that suite also gets a failing "verdict" test case when the run is not conformant
// and nothing else in the file fails. Text is escaped by encoding/xml.
//
//	err := report.WriteJUnit(f, report.Redact(r, token))
func WriteJUnit(w io.Writer, r *Report) error {
	if r == nil {
		return ErrNilReport
	}
	doc := junitSuites{Name: r.Kit.Name}
	if doc.Name == "" {
		doc.Name = "loomcheck"
	}
	var ts string
	if !r.StartedAt.IsZero() {
		ts = r.StartedAt.UTC().Format("2006-01-02T15:04:05")
	}
	doc.Suites = featureSuites(r, ts)
	failing := 0
	for _, s := range doc.Suites {
		failing += s.Failures + s.Errors
	}
	extra := append(staleCases(r), contractCases(r)...)
	extra = runCases(r, extra, failing)
	if len(extra) > 0 {
		doc.Suites = append(doc.Suites, junitSuite{
			Name: baselineSuite, Tests: len(extra), Failures: len(extra), Time: seconds(0),
			Timestamp: ts, Cases: extra,
		})
	}
	for _, s := range doc.Suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
	}
	doc.Time = seconds(r.DurationMs)
	return encodeJUnit(w, doc)
}

// featureSuites is one test suite per feature, one test case per scenario, with the suite's
// counts and time.
func featureSuites(r *Report, ts string) []junitSuite {
	lv := levels(r)
	suiteProps := &junitProperties{Props: []junitProperty{
		{"kit", strings.TrimSpace(r.Kit.Name + " " + r.Kit.Version)},
		{"specVersion", r.SpecVersion},
		{"driver", r.Target.Driver},
		{"target", r.Target.Description},
	}}
	var suites []junitSuite
	for _, g := range groupByFeature(r) {
		s := junitSuite{Name: g.name, Timestamp: ts, File: g.file, Properties: suiteProps}
		var ms int64
		names := rowNames(g.scenarios)
		for i, sc := range g.scenarios {
			c := junitTestCase(sc, g.name, lv)
			c.Name = names[i]
			s.Tests++
			switch {
			case c.Failure != nil:
				s.Failures++
			case c.Error != nil:
				s.Errors++
			case c.Skipped != nil:
				s.Skipped++
			}
			ms += sc.DurationMs
			s.Cases = append(s.Cases, c)
		}
		s.Time = seconds(ms)
		suites = append(suites, s)
	}
	return suites
}

// staleCases is a failing test case for each stale baseline entry.
func staleCases(r *Report) []junitCase {
	var extra []junitCase
	if b := r.Baseline; b != nil {
		for _, e := range b.Stale {
			subject := e.Requirement
			if subject == "" {
				subject = e.Scenario
			}
			msg := "baseline entry is stale: " + subject + " now passes; remove it"
			if b.File != "" {
				msg += " from " + b.File
			}
			extra = append(extra, junitCase{
				Classname: baselineSuite, Name: "stale baseline entry " + subject, Time: seconds(0),
				Failure: &junitOutcome{Message: msg, Type: "stale-baseline", Text: xmlText(e.Reason)},
			})
		}
	}
	return extra
}

// contractCases is a failing test case for each contract finding, none when the baseline
// excuses the contract requirement.
func contractCases(r *Report) []junitCase {
	var extra []junitCase
	excusedContract := false
	if b := r.Baseline; b != nil {
		for _, e := range b.Expected {
			excusedContract = excusedContract || e.Requirement != "" && e.Requirement == r.Contract.Requirement
		}
	}
	for _, f := range r.Contract.Findings {
		if excusedContract {
			break
		}
		var text strings.Builder
		fmt.Fprintf(&text, "%s\nseen %d times, in: %s", f.Schema, f.Occurrences, strings.Join(f.Scenarios, ", "))
		extra = append(extra, junitCase{
			Classname: baselineSuite, Name: "contract " + f.Route + " " + f.Location, Time: seconds(0),
			Failure: &junitOutcome{Message: r.Contract.Requirement + ": " + f.Message, Type: r.Contract.Requirement, Text: xmlText(text.String())},
		})
	}
	return extra
}

// runCases adds to extra a failing test case when the system did not start, and a failing
// "verdict" case when the run is not conformant and nothing else fails.
func runCases(r *Report, extra []junitCase, failing int) []junitCase {
	if r.Unstarted != "" {
		extra = append(extra, junitCase{
			Classname: baselineSuite, Name: "the system starts", Time: seconds(r.DurationMs),
			Failure: &junitOutcome{Message: "the system did not start", Type: "unstarted", Text: xmlText(r.Unstarted)},
		})
	}
	if !r.Conformant && failing+len(extra) == 0 {
		extra = append(extra, junitCase{
			Classname: baselineSuite, Name: "verdict", Time: seconds(r.DurationMs),
			Failure: &junitOutcome{
				Message: fmt.Sprintf("not conformant (exit code %d)", r.ExitCode),
				Type:    "verdict",
				Text:    xmlText(strings.Join(r.Warnings, "\n")),
			},
		})
	}
	return extra
}

// encodeJUnit writes the XML header, the indented document and a final newline.
func encodeJUnit(w io.Writer, doc junitSuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func junitTestCase(sc *Scenario, feature string, lv map[string]string) junitCase {
	file, line := splitID(sc.ID)
	c := junitCase{Classname: feature, Name: sc.Name, Time: seconds(sc.DurationMs), File: file, Line: line}
	props := make([]junitProperty, 0, len(sc.Requirements)+2)
	for _, id := range sc.Requirements {
		props = append(props, junitProperty{"requirement", id})
	}
	props = append(props, junitProperty{"profile", sc.Profile}, junitProperty{"scenario-id", sc.ID})
	c.Properties = &junitProperties{Props: props}
	c.SystemOut = xmlText(sc.SystemOutput)
	detail := xmlText(junitDetail(sc))
	reason := func(fallback string) string {
		if sc.Message != "" {
			return oneLine(sc.Message)
		}
		return fallback
	}
	switch sc.Status {
	case Passed:
	case Failed:
		switch classifyFailure(sc, lv) {
		case expectedFailure:
			c.Skipped = &junitOutcome{Message: "expected failure (baseline): " + oneLine(sc.Expected) + "; " + failureLine(sc), Text: detail}
		case warningFailure:
			c.Skipped = &junitOutcome{Message: "warning (" + strings.Join(sc.Requirements, ", ") + "): " + failureLine(sc), Text: detail}
		default:
			typ := "failed"
			if sc.Failure != nil && sc.Failure.Requirement != "" {
				typ = sc.Failure.Requirement
			}
			c.Failure = &junitOutcome{Message: failureLine(sc), Type: typ, Text: detail}
		}
	case HarnessError:
		c.Error = &junitOutcome{Message: "harness error: " + strings.TrimPrefix(failureLine(sc), "harness: "), Type: "harness-error", Text: detail}
	case NotApplicable:
		c.Skipped = &junitOutcome{Message: "not applicable: " + reason("profile "+sc.Profile+" not claimed or not drivable")}
	case Skipped:
		c.Skipped = &junitOutcome{Message: "skipped: " + reason("not run")}
	case Undefined:
		c.Skipped = &junitOutcome{Message: "undefined: " + reason("a step has no definition in the kit"), Text: detail}
	case Pending:
		c.Skipped = &junitOutcome{Message: "pending: " + reason("a step is not implemented in the kit"), Text: detail}
	default:
		c.Error = &junitOutcome{Message: "unknown status " + string(sc.Status), Type: "harness-error", Text: detail}
	}
	return c
}

// junitDetail is the body of a failure: the rule that was broken and the steps as run.
func junitDetail(sc *Scenario) string {
	var b strings.Builder
	if f := sc.Failure; f != nil {
		if f.Requirement != "" {
			fmt.Fprintf(&b, "requirement: %s\n", f.Requirement)
		}
		if f.Rule != "" {
			fmt.Fprintf(&b, "rule: %s\n", f.Rule)
		}
		fmt.Fprintf(&b, "operation: %s\ngot: %s\nwant: %s\n", f.Operation, f.Got, f.Want)
	}
	if m := extraMessage(sc); m != "" {
		fmt.Fprintf(&b, "message: %s\n", m)
	}
	if len(sc.Steps) > 0 {
		b.WriteString("steps:\n")
		for _, st := range sc.Steps {
			fmt.Fprintf(&b, "  [%s] %s %s\n", st.Status, strings.TrimSpace(st.Keyword), st.Text)
			if st.Error != "" {
				fmt.Fprintf(&b, "      %s\n", strings.ReplaceAll(st.Error, "\n", "\n      "))
			}
		}
	}
	return b.String()
}

// xmlText replaces what XML 1.0 cannot carry (control characters other than tab, newline and
// carriage return, surrogates, U+FFFE, U+FFFF and invalid UTF-8) with U+FFFD. encoding/xml does
// the same for attributes and character data but not for CDATA.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r == utf8.RuneError, 0xD800 <= r && r <= 0xDFFF, r == 0xFFFE, r == 0xFFFF:
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// seconds renders milliseconds as JUnit's decimal seconds.
func seconds(ms int64) string {
	if ms < 0 {
		ms = 0
	}
	return fmt.Sprintf("%.3f", (time.Duration(ms) * time.Millisecond).Seconds())
}

// rowNames are the test case names of a feature's scenarios: a name several scenarios share (an
// outline's rows keep the outline's name) is numbered " #1", " #2", ... in the feature's order, as
// godog numbers them, so that no two cases of a suite are named alike and CI tools that key
// results by class and name (GitLab, Jenkins) keep every one.
func rowNames(scs []*Scenario) []string {
	count := map[string]int{}
	for _, sc := range scs {
		count[sc.Name]++
	}
	seen := map[string]int{}
	out := make([]string, len(scs))
	for i, sc := range scs {
		out[i] = sc.Name
		if count[sc.Name] > 1 {
			for { // a scenario may itself be named like a numbered row: skip that number
				seen[sc.Name]++
				out[i] = fmt.Sprintf("%s #%d", sc.Name, seen[sc.Name])
				if count[out[i]] == 0 {
					break
				}
			}
		}
	}
	return out
}
