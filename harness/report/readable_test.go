package report_test

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

func readableReport() *report.Report {
	return &report.Report{
		Kit:    report.Kit{Name: "loomcheck", Version: "0.1.0"},
		Target: report.Target{Driver: "in-process", Description: "the embedded reference engine (in-process)", Profiles: []string{"core"}},
		Scenarios: []report.Scenario{{
			ID: "conversation.feature:36", Feature: "A conversation", Name: "a retry is answered once", Profile: "core",
			Requirements: []string{"ADR0122-D1-02"}, Status: report.Failed,
			Message: "ADR0122-D1-02: history: got 3 entries, want 4 entries; the system printed: marker-printed",
			Failure: &report.Failure{Requirement: "ADR0122-D1-02", Rule: "answered once", Operation: "history", Got: "3 entries", Want: "4 entries"},
		}, {
			ID: "edge.feature:9", Feature: "Edge", Name: "a harness fault", Profile: "core", Status: report.HarnessError,
			Message: "harness: the world did not start",
		}},
		Requirements: []report.RequirementResult{{ID: "ADR0122-D1-02", Level: "MUST", Profile: "core", Status: report.Failed, Scenarios: []string{"conversation.feature:36"}}},
	}
}

// TestJUnitSaysThingsOnce: a failure's message names the requirement, the operation, got and want
// and what the system printed, each once; the body does not repeat the message; a harness error
// says "harness" once.
func TestJUnitSaysThingsOnce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, report.WriteAll(dir, readableReport()))
	b, err := os.ReadFile(filepath.Join(dir, report.JUnitFile))
	require.NoError(t, err)
	var doc struct {
		Cases []struct {
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testsuite>testcase"`
	}
	require.NoError(t, xml.Unmarshal(b, &doc), string(b))
	require.Len(t, doc.Cases, 2)
	f := doc.Cases[0].Failure
	require.NotNil(t, f)
	require.Equal(t, "ADR0122-D1-02: history: got 3 entries, want 4 entries: the system printed: marker-printed", f.Message)
	require.Equal(t, 1, strings.Count(f.Text, "marker-printed"), f.Text)
	require.Equal(t, 1, strings.Count(f.Text, "3 entries"), f.Text)
	require.Equal(t, "harness error: the world did not start", doc.Cases[1].Error.Message)
}

// TestTheTargetLineNamesTheDriverOnce: a description that already names the driver gets no
// second "(in-process)"; one that does not gets it.
func TestTheTargetLineNamesTheDriverOnce(t *testing.T) {
	for _, c := range []struct{ description, want string }{
		{"the embedded reference engine (in-process)", "**Target** the embedded reference engine (in-process)\n"},
		{"the embedded reference engine", "**Target** the embedded reference engine (in-process)\n"},
	} {
		r := readableReport()
		r.Target.Description = c.description
		dir := t.TempDir()
		require.NoError(t, report.WriteAll(dir, r))
		b, err := os.ReadFile(filepath.Join(dir, report.SummaryFile))
		require.NoError(t, err)
		require.Contains(t, string(b), c.want)
		require.Equal(t, 1, strings.Count(string(b), "(in-process)"))
	}
}

// TestIdsDoNotWrap: in summary.md the scenario and requirement ids are code spans whose hyphens do
// not break; report.html keeps every id on one line.
func TestIdsDoNotWrap(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, report.WriteAll(dir, readableReport()))
	b, err := os.ReadFile(filepath.Join(dir, report.SummaryFile))
	require.NoError(t, err)
	nb := strings.ReplaceAll("ADR0122-D1-02", "-", report.NonBreakingHyphen)
	require.Contains(t, string(b), "| `"+nb+"` |")
	require.Contains(t, string(b), "<br>`conversation.feature:36` |")
	require.NotContains(t, string(b), "| ADR0122-D1-02 |")
	h, err := os.ReadFile(filepath.Join(dir, report.HTMLFile))
	require.NoError(t, err)
	require.Contains(t, string(h), ".scenario-link, .scenario-id, .scenario-requirements li, #requirements td:first-child { white-space: nowrap; }")
}
