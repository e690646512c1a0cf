package report_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

// JUnit structures as a CI system reads them.
type xSuites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []xSuite `xml:"testsuite"`
}

type xSuite struct {
	Name     string  `xml:"name,attr"`
	Tests    int     `xml:"tests,attr"`
	Failures int     `xml:"failures,attr"`
	Errors   int     `xml:"errors,attr"`
	Skipped  int     `xml:"skipped,attr"`
	Cases    []xCase `xml:"testcase"`
}

type xCase struct {
	Classname  string      `xml:"classname,attr"`
	Name       string      `xml:"name,attr"`
	Time       string      `xml:"time,attr"`
	File       string      `xml:"file,attr"`
	Line       int         `xml:"line,attr"`
	Properties []xProperty `xml:"properties>property"`
	Failure    *xOutcome   `xml:"failure"`
	Error      *xOutcome   `xml:"error"`
	Skipped    *xOutcome   `xml:"skipped"`
	SystemOut  string      `xml:"system-out"`
}

type xProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type xOutcome struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func TestJUnit(t *testing.T) {
	dir, r := writeSample(t)
	var doc xSuites
	require.NoError(t, xml.Unmarshal(readFile(t, dir, report.JUnitFile), &doc))

	// One suite per feature plus the "loomcheck" suite for the stale baseline entry and the
	// contract finding.
	var names []string
	for _, s := range doc.Suites {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"Turns", "Restart", "Gateway routing", "Budget", "Retry", "Escaping <b>&amp;</b>", "loomcheck"}, names)

	assert.Equal(t, len(r.Scenarios)+2, doc.Tests)
	assert.Equal(t, 3, doc.Failures, "the unexpected failure, the stale entry and the contract finding")
	assert.Equal(t, 1, doc.Errors, "the harness error")
	assert.Equal(t, 6, doc.Skipped, "not-applicable, skipped, undefined, pending, expected, warning")

	cases := map[string]xCase{}
	sum := xSuites{}
	for _, s := range doc.Suites {
		sum.Tests += s.Tests
		sum.Failures += s.Failures
		sum.Errors += s.Errors
		sum.Skipped += s.Skipped
		assert.Len(t, s.Cases, s.Tests)
		for _, c := range s.Cases {
			if s.Name != "loomcheck" {
				assert.Equal(t, s.Name, c.Classname)
			}
			cases[c.Name] = c
		}
	}
	assert.Equal(t, []int{doc.Tests, doc.Failures, doc.Errors, doc.Skipped}, []int{sum.Tests, sum.Failures, sum.Errors, sum.Skipped})

	failed := cases["Replay resumes after the last event id"]
	require.NotNil(t, failed.Failure)
	assert.Equal(t, "ADR0122-D3-02", failed.Failure.Type)
	assert.Contains(t, failed.Failure.Message, "got first event id 1, want first event id 5")
	assert.NotContains(t, failed.Failure.Message, "\n")
	assert.Contains(t, failed.Failure.Text, "A resumed stream starts after Last-Event-ID.")
	assert.Contains(t, failed.Failure.Text, "terminal colour\uFFFD[0m ]]> \uFFFD", "control characters are replaced, CDATA ends survive")
	assert.Equal(t, "0.410", failed.Time)
	assert.Equal(t, "features/core/turns.feature", failed.File)
	assert.Equal(t, 30, failed.Line)
	assert.Contains(t, failed.SystemOut, "[node-1] replaying c1 from 0", "what the system printed is kept beside a failure")
	assert.Equal(t, []xProperty{
		{"requirement", "ADR0122-D3-02"}, {"requirement", "ADR0122-D3-03"},
		{"profile", "core"}, {"scenario-id", "features/core/turns.feature:30"},
	}, failed.Properties)

	harness := cases["A turn survives a restart"]
	require.NotNil(t, harness.Error)
	assert.Nil(t, harness.Failure)
	assert.True(t, strings.HasPrefix(harness.Error.Message, "harness error: "))

	skips := map[string]string{
		"Requests are routed by tenant": "not applicable: ",
		"Skipped scenario":              "skipped: ",
		"Undefined step":                "undefined: ",
		"Pending step":                  "pending: ",
		"Known failure":                 "expected failure (baseline): ",
		"Retries are jittered":          "warning (",
	}
	for name, prefix := range skips {
		c := cases[name]
		require.NotNil(t, c.Skipped, name)
		assert.Nil(t, c.Failure, name)
		assert.True(t, strings.HasPrefix(c.Skipped.Message, prefix), "%s: %q", name, c.Skipped.Message)
	}

	// Markup in names survives escaping and comes back unchanged.
	esc, ok := cases[scriptName]
	require.True(t, ok)
	assert.Nil(t, esc.Failure)
	assert.Nil(t, esc.Skipped)
	assert.Equal(t, "Escaping <b>&amp;</b>", esc.Classname)
}

func TestJUnitInvalidUTF8(t *testing.T) {
	r := &report.Report{Scenarios: []report.Scenario{{
		ID: "a.feature:1", Feature: "F\xff", Name: "N\x01", Status: report.Failed, Message: "m\xfe\x02",
		Steps: []report.Step{{Status: report.Failed, Error: "e\xff\x00]]>"}},
	}}}
	var buf bytes.Buffer
	require.NoError(t, report.WriteJUnit(&buf, r))
	var doc xSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc))
	c := doc.Suites[0].Cases[0]
	require.NotNil(t, c.Failure)
	assert.Contains(t, c.Failure.Text, "e\uFFFD\uFFFD]]>")
}

func TestJUnitVerdictCaseWhenNothingElseFails(t *testing.T) {
	r := &report.Report{
		Kit: report.Kit{Name: "loomcheck"}, ExitCode: 2,
		Scenarios: []report.Scenario{{ID: "a.feature:3", Feature: "A", Name: "undefined", Status: report.Undefined}},
	}
	var buf bytes.Buffer
	require.NoError(t, report.WriteJUnit(&buf, r))
	var doc xSuites
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc))
	assert.Equal(t, 1, doc.Failures)
	assert.Equal(t, 1, doc.Skipped)

	r.Conformant, r.ExitCode = true, 0
	buf.Reset()
	require.NoError(t, report.WriteJUnit(&buf, r))
	doc = xSuites{}
	require.NoError(t, xml.Unmarshal(buf.Bytes(), &doc))
	assert.Zero(t, doc.Failures)
	assert.Len(t, doc.Suites, 1)
}

// Scenarios of one feature that share a name (an outline's rows) are numbered in the feature's
// order, so that every test case of a suite has a name of its own, even beside a scenario that is
// itself named like a numbered row.
func TestJUnitNamesEveryCaseApart(t *testing.T) {
	r := sampleReport()
	base := r.Scenarios[0]
	r.Scenarios = nil
	for i, name := range []string{"Row", "Row", "Row #2", "Row", "Alone"} {
		sc := base
		sc.ID = fmt.Sprintf("%s:%d", strings.Split(base.ID, ":")[0], 10+i)
		sc.Name = name
		r.Scenarios = append(r.Scenarios, sc)
	}
	var b strings.Builder
	require.NoError(t, report.WriteJUnit(&b, r))
	var doc xSuites
	require.NoError(t, xml.Unmarshal([]byte(b.String()), &doc))
	var got []string
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Classname == base.Feature {
				got = append(got, c.Name)
			}
		}
	}
	assert.Equal(t, []string{"Row #1", "Row #3", "Row #2", "Row #4", "Alone"}, got)
}
