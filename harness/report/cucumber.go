package report

import (
	"encoding/json"
	"io"
	"strings"
)

type cukeFeature struct {
	URI         string        `json:"uri"`
	ID          string        `json:"id"`
	Keyword     string        `json:"keyword"`
	Name        string        `json:"name"`
	Description string        `json:"description"`
	Line        int           `json:"line"`
	Tags        []cukeTag     `json:"tags"`
	Elements    []cukeElement `json:"elements"`
}

type cukeTag struct {
	Name string `json:"name"`
	Line int    `json:"line,omitempty"`
}

type cukeElement struct {
	ID          string     `json:"id"`
	Keyword     string     `json:"keyword"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Line        int        `json:"line"`
	Type        string     `json:"type"`
	Tags        []cukeTag  `json:"tags"`
	Before      []cukeHook `json:"before,omitempty"`
	Steps       []cukeStep `json:"steps"`
	After       []cukeHook `json:"after,omitempty"`
}

type cukeHook struct {
	Match  cukeMatch  `json:"match"`
	Result cukeResult `json:"result"`
}

type cukeMatch struct {
	Location string `json:"location"`
	// Arguments are the parts of the step text its definition captured; the report does not
	// keep them, so the list is empty, as Cucumber writes it for a step without parameters.
	Arguments []cukeArgument `json:"arguments"`
}

type cukeArgument struct {
	Val    string `json:"val"`
	Offset int    `json:"offset"`
}

type cukeStep struct {
	Keyword   string         `json:"keyword"`
	Name      string         `json:"name"`
	Line      int            `json:"line"`
	DocString *cukeDocString `json:"doc_string,omitempty"`
	Rows      []cukeRow      `json:"rows,omitempty"`
	Match     cukeMatch      `json:"match"`
	Result    cukeResult     `json:"result"`
}

type cukeDocString struct {
	Line  int    `json:"line"`
	Value string `json:"value"`
}

type cukeRow struct {
	Cells []string `json:"cells"`
}

type cukeResult struct {
	Status       string `json:"status"`
	Duration     int64  `json:"duration"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// cucumberStatus maps a Status onto the five the Cucumber JSON format knows.
func cucumberStatus(s Status) string {
	switch s {
	case Passed, Failed, Skipped, Undefined, Pending:
		return string(s)
	case NotApplicable:
		return "skipped"
	default: // HarnessError and unknown values
		return "failed"
	}
}

// cucumberRank orders Cucumber statuses the way Cucumber tools fold steps into a scenario.
func cucumberRank(s string) int {
	switch s {
	case "passed":
		return 0
	case "skipped":
		return 1
	case "pending":
		return 2
	case "undefined":
		return 3
	default:
		return 4
	}
}

// WriteCucumber writes r in the Cucumber JSON format that Cucumber report tools read, in the shape
// cucumber-jvm writes (valid against its schema in Cucumber's own converter,
// @cucumber/cucumber-json-converter): an array of features (grouped by Scenario.Feature, uri and
// line from the scenario ID), each with elements of type "scenario" holding tags, steps (keyword,
// line, name, match with its location and arguments, doc_string with its line, rows, result) and
// results with status, duration in nanoseconds and error_message.
//
// Statuses map as follows, for scenarios and for steps alike:
//
//	passed, failed, skipped, undefined, pending -> the same status
//	not-applicable                              -> skipped
//	harness-error                               -> failed, error_message prefixed "harness error: "
//
// The format has no place for a scenario-level outcome, so when a scenario's own status is not the
// one its steps add up to, or it is not-applicable or a harness error, a hook carries it: a
// "before" hook (location "loomcheck:<status>") for scenarios that did not run (not-applicable,
// skipped) and an "after" hook otherwise, with the scenario's message as error_message. Otherwise
// the element's description carries the one-line reason a scenario did not pass. A failure the
// baseline expects stays failed here; the baseline's reason leads the description. A step's line
// is Step.Line (for a report written before steps had lines, the lines right below the
// scenario's); a doc string starts on the line after its step.
//
//	err := report.WriteCucumber(f, report.Redact(r, token))
func WriteCucumber(w io.Writer, r *Report) error {
	if r == nil {
		return ErrNilReport
	}
	features := []cukeFeature{}
	for _, g := range groupByFeature(r) {
		fid := slug(g.name)
		f := cukeFeature{URI: g.file, ID: fid, Keyword: "Feature", Name: g.name, Line: 1, Tags: []cukeTag{}}
		for _, sc := range g.scenarios {
			f.Elements = append(f.Elements, cucumberElement(sc, fid))
		}
		if f.Elements == nil {
			f.Elements = []cukeElement{}
		}
		features = append(features, f)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(features)
}

func cucumberElement(sc *Scenario, featureID string) cukeElement {
	_, line := splitID(sc.ID)
	e := cukeElement{
		ID: featureID + ";" + slug(sc.Name), Keyword: "Scenario", Name: sc.Name, Line: line,
		Type: "scenario", Tags: []cukeTag{}, Steps: []cukeStep{},
	}
	for _, t := range sc.Tags {
		if !strings.HasPrefix(t, "@") {
			t = "@" + t
		}
		e.Tags = append(e.Tags, cukeTag{Name: t})
	}
	var description []string
	if sc.Expected != "" {
		description = append(description, "Expected to fail by the baseline: "+sc.Expected)
	}
	worst := "passed"
	for i, st := range sc.Steps {
		status := cucumberStatus(st.Status)
		msg := st.Error
		if st.Status == HarnessError {
			msg = "harness error: " + msg
		}
		stepLine := st.Line
		if stepLine <= 0 {
			stepLine = line + i + 1 // a report from before steps had lines: the lines below the scenario's
		}
		cs := cukeStep{
			Keyword: strings.TrimSpace(st.Keyword) + " ",
			Name:    st.Text,
			Line:    stepLine,
			Match:   cukeMatch{Location: "loomcheck", Arguments: []cukeArgument{}},
			Result:  cukeResult{Status: status, Duration: st.DurationMs * 1e6, ErrorMessage: msg},
		}
		if st.DocString != "" {
			cs.DocString = &cukeDocString{Line: stepLine + 1, Value: st.DocString}
		}
		for _, row := range st.Table {
			cells := row
			if cells == nil {
				cells = []string{}
			}
			cs.Rows = append(cs.Rows, cukeRow{Cells: cells})
		}
		if cucumberRank(status) > cucumberRank(worst) {
			worst = status
		}
		e.Steps = append(e.Steps, cs)
	}
	want := cucumberStatus(sc.Status)
	if len(sc.Steps) == 0 || worst != want || sc.Status == NotApplicable || sc.Status == HarnessError {
		msg := sc.Message
		if sc.Failure != nil && sc.Status != Passed {
			msg = failureLine(sc)
		}
		if sc.Status == HarnessError {
			msg = "harness error: " + msg
		} else if sc.Status == NotApplicable {
			msg = "not applicable: " + msg
		}
		h := cukeHook{
			Match:  cukeMatch{Location: "loomcheck:" + string(sc.Status), Arguments: []cukeArgument{}},
			Result: cukeResult{Status: want, ErrorMessage: strings.TrimSuffix(msg, ": ")},
		}
		if sc.Status == NotApplicable || sc.Status == Skipped {
			e.Before = []cukeHook{h}
		} else {
			if len(sc.Steps) == 0 {
				h.Result.Duration = sc.DurationMs * 1e6
			}
			e.After = []cukeHook{h}
		}
	} else if sc.Status != Passed {
		description = append(description, failureLine(sc))
	}
	e.Description = strings.Join(description, "\n")
	return e
}

// slug makes a Cucumber-style id: lower case, runs of anything but letters and digits as one "-".
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || r > 127 {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}
