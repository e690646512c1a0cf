package report_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

var allFiles = []string{report.JSONFile, report.JUnitFile, report.CucumberFile, report.SummaryFile, report.HTMLFile}

func writeSample(t *testing.T) (string, *report.Report) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nested", "out")
	r := sampleReport()
	require.NoError(t, report.WriteAll(dir, r, signingKey, bearerToken))
	return dir, r
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return b
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	sch, err := c.Compile(filepath.Join("..", "..", "schemas", "report.schema.json"))
	require.NoError(t, err)
	return sch
}

func validateJSON(t *testing.T, sch *jsonschema.Schema, b []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return sch.Validate(v)
}

func TestWriteAllWritesEveryFile(t *testing.T) {
	dir, _ := writeSample(t)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, allFiles, names, "no temporary files may remain")
	for _, n := range allFiles {
		info, err := os.Stat(filepath.Join(dir, n))
		require.NoError(t, err)
		assert.Positive(t, info.Size(), n)
	}
}

func TestReportJSONMatchesSchema(t *testing.T) {
	sch := compileSchema(t)
	dir, _ := writeSample(t)
	require.NoError(t, validateJSON(t, sch, readFile(t, dir, report.JSONFile)))

	// A report with every optional part missing and every slice nil still validates: the writer
	// writes [] rather than null.
	var buf bytes.Buffer
	require.NoError(t, report.WriteJSON(&buf, &report.Report{
		Kit:    report.Kit{Name: "loomcheck"},
		Target: report.Target{Driver: "remote"},
		Scenarios: []report.Scenario{{ID: "a.feature:1", Status: report.Passed,
			Steps:     []report.Step{{Status: report.Passed, Table: [][]string{nil}}},
			Exchanges: []report.Exchange{{Method: "GET", RequestHeaders: map[string][]string{"X": nil}}}}},
		Requirements: []report.RequirementResult{{ID: "R-1", Level: "MUST", Status: report.Passed}},
		Baseline:     &report.BaselineResult{},
	}))
	assert.NotContains(t, buf.String(), "null")
	require.NoError(t, validateJSON(t, sch, buf.Bytes()))
}

func TestSchemaRejectsBrokenReports(t *testing.T) {
	sch := compileSchema(t)
	var buf bytes.Buffer
	require.NoError(t, report.WriteJSON(&buf, sampleReport()))
	var good map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &good))

	breakers := map[string]func(m map[string]any){
		"missing kit":          func(m map[string]any) { delete(m, "kit") },
		"unknown status":       func(m map[string]any) { scenario(m)["status"] = "flaky" },
		"extra property":       func(m map[string]any) { m["extra"] = true },
		"null tags":            func(m map[string]any) { scenario(m)["tags"] = nil },
		"exit code 3":          func(m map[string]any) { m["exitCode"] = 3 },
		"bad date":             func(m map[string]any) { m["startedAt"] = "yesterday" },
		"negative count":       func(m map[string]any) { m["totals"].(map[string]any)["failed"] = -1 },
		"unknown driver":       func(m map[string]any) { m["target"].(map[string]any)["driver"] = "telepathy" },
		"step without status":  func(m map[string]any) { delete(scenario(m)["steps"].([]any)[0].(map[string]any), "status") },
		"baseline entry empty": func(m map[string]any) { m["baseline"].(map[string]any)["stale"] = []any{map[string]any{"reason": "x"}} },
		"header not a list":    func(m map[string]any) { exchange(m)["requestHeaders"] = map[string]any{"A": "b"} },
	}
	for name, brk := range breakers {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &m))
			brk(m)
			b, err := json.Marshal(m)
			require.NoError(t, err)
			assert.Error(t, validateJSON(t, sch, b))
		})
	}
}

func scenario(m map[string]any) map[string]any {
	return m["scenarios"].([]any)[0].(map[string]any)
}

func exchange(m map[string]any) map[string]any {
	return scenario(m)["exchanges"].([]any)[0].(map[string]any)
}

func TestNoSecretInAnyFile(t *testing.T) {
	dir, _ := writeSample(t)
	forbidden := []string{
		signingKey, url.QueryEscape(signingKey), url.PathEscape(signingKey),
		bearerToken, cookieValue, apiKeyValue, "dXNlcjpwYXNz",
	}
	for _, name := range allFiles {
		body := string(readFile(t, dir, name))
		for _, s := range forbidden {
			assert.NotContains(t, body, s, "%s leaks %q", name, s)
		}
	}
	assert.Contains(t, string(readFile(t, dir, report.JSONFile)), report.RedactedText)
}

func TestWriteAllLeavesCallerReportAlone(t *testing.T) {
	dir := t.TempDir()
	r := sampleReport()
	require.NoError(t, report.WriteAll(dir, r, signingKey, bearerToken))
	assert.True(t, reflect.DeepEqual(sampleReport(), r), "WriteAll changed its input")
}

func TestWriteIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	require.NoError(t, report.WriteAll(a, sampleReport(), signingKey))
	require.NoError(t, report.WriteAll(b, sampleReport(), signingKey))
	for _, n := range allFiles {
		assert.Equal(t, readFile(t, a, n), readFile(t, b, n), n)
	}
}

func TestWritersRunConcurrently(t *testing.T) {
	r := sampleReport()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_ = report.WriteAll(t.TempDir(), r, signingKey)
			_ = report.WriteJSON(io.Discard, r)
			_ = report.WriteHTML(io.Discard, report.Redact(r, bearerToken))
			_ = report.Diff(r, r)
		})
	}
	wg.Wait()
	assert.Equal(t, sampleReport(), r)
}

func TestWriteAllErrors(t *testing.T) {
	assert.ErrorIs(t, report.WriteAll(t.TempDir(), nil), report.ErrNilReport)
	for _, w := range []func(*bytes.Buffer, *report.Report) error{
		func(b *bytes.Buffer, r *report.Report) error { return report.WriteJSON(b, r) },
		func(b *bytes.Buffer, r *report.Report) error { return report.WriteJUnit(b, r) },
		func(b *bytes.Buffer, r *report.Report) error { return report.WriteCucumber(b, r) },
		func(b *bytes.Buffer, r *report.Report) error { return report.WriteSummary(b, r) },
		func(b *bytes.Buffer, r *report.Report) error { return report.WriteHTML(b, r) },
	} {
		assert.ErrorIs(t, w(&bytes.Buffer{}, nil), report.ErrNilReport)
	}

	// A directory that cannot be created: its parent is a regular file.
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	err := report.WriteAll(filepath.Join(file, "sub"), sampleReport())
	var we *report.WriteError
	require.ErrorAs(t, err, &we)
	assert.Equal(t, filepath.Join(file, "sub"), we.File)
}

type failingWriter struct{}

var errSink = errors.New("sink failed")

func (failingWriter) Write([]byte) (int, error) { return 0, errSink }

func TestWritersReportWriteErrors(t *testing.T) {
	r := sampleReport()
	writers := map[string]func(failingWriter) error{
		"json":     func(w failingWriter) error { return report.WriteJSON(w, r) },
		"junit":    func(w failingWriter) error { return report.WriteJUnit(w, r) },
		"cucumber": func(w failingWriter) error { return report.WriteCucumber(w, r) },
		"summary":  func(w failingWriter) error { return report.WriteSummary(w, r) },
		"html":     func(w failingWriter) error { return report.WriteHTML(w, r) },
		"diff":     func(w failingWriter) error { return report.WriteDiff(w, report.Diff(r, r)) },
	}
	for name, write := range writers {
		assert.ErrorIs(t, write(failingWriter{}), errSink, name)
	}
}

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

// Cucumber JSON as report tools read it.
type cFeature struct {
	URI      string     `json:"uri"`
	ID       string     `json:"id"`
	Keyword  string     `json:"keyword"`
	Name     string     `json:"name"`
	Elements []cElement `json:"elements"`
}

type cElement struct {
	ID          string  `json:"id"`
	Keyword     string  `json:"keyword"`
	Name        string  `json:"name"`
	Line        int     `json:"line"`
	Type        string  `json:"type"`
	Description string  `json:"description"`
	Tags        []cTag  `json:"tags"`
	Before      []cHook `json:"before"`
	Steps       []cStep `json:"steps"`
	After       []cHook `json:"after"`
}

type cTag struct {
	Name string `json:"name"`
}

type cHook struct {
	Result cResult `json:"result"`
}

type cStep struct {
	Keyword   string `json:"keyword"`
	Name      string `json:"name"`
	DocString *struct {
		Value string `json:"value"`
	} `json:"doc_string"`
	Rows []struct {
		Cells []string `json:"cells"`
	} `json:"rows"`
	Result cResult `json:"result"`
}

type cResult struct {
	Status       string `json:"status"`
	Duration     int64  `json:"duration"`
	ErrorMessage string `json:"error_message"`
}

func TestCucumber(t *testing.T) {
	dir, r := writeSample(t)
	var features []cFeature
	require.NoError(t, json.Unmarshal(readFile(t, dir, report.CucumberFile), &features))
	require.Len(t, features, 6)
	assert.Equal(t, "features/core/turns.feature", features[0].URI)
	assert.Equal(t, "Feature", features[0].Keyword)

	byName := map[string]cElement{}
	n := 0
	valid := map[string]bool{"passed": true, "failed": true, "skipped": true, "undefined": true, "pending": true}
	for _, f := range features {
		for _, e := range f.Elements {
			n++
			byName[e.Name] = e
			assert.Equal(t, "scenario", e.Type)
			assert.True(t, strings.HasPrefix(e.ID, f.ID+";"))
			for _, s := range e.Steps {
				assert.True(t, valid[s.Result.Status], s.Result.Status)
				assert.True(t, strings.HasSuffix(s.Keyword, " "))
			}
			for _, h := range append(e.Before, e.After...) {
				assert.True(t, valid[h.Result.Status], h.Result.Status)
			}
		}
	}
	assert.Equal(t, len(r.Scenarios), n)

	passed := byName["A user turn is answered"]
	assert.Equal(t, 12, passed.Line)
	assert.Equal(t, []cTag{{"@core"}, {"@ADR0122-D3-01"}}, passed.Tags)
	assert.Equal(t, int64(200_000_000), passed.Steps[1].Result.Duration)
	assert.Equal(t, "hello <there>", passed.Steps[1].DocString.Value)
	assert.Equal(t, []string{"delta", "3"}, passed.Steps[2].Rows[1].Cells)
	assert.Empty(t, passed.Before)
	assert.Empty(t, passed.After)

	failed := byName["Replay resumes after the last event id"]
	assert.Equal(t, []string{"passed", "failed", "skipped"}, stepStatuses(failed))
	assert.NotEmpty(t, failed.Steps[1].Result.ErrorMessage)

	harness := byName["A turn survives a restart"]
	assert.Equal(t, []string{"failed"}, stepStatuses(harness))
	require.Len(t, harness.After, 1)
	assert.Equal(t, "failed", harness.After[0].Result.Status)
	assert.True(t, strings.HasPrefix(harness.After[0].Result.ErrorMessage, "harness error"))

	na := byName["Requests are routed by tenant"]
	assert.Empty(t, na.Steps)
	require.Len(t, na.Before, 1)
	assert.Equal(t, "skipped", na.Before[0].Result.Status)
	assert.True(t, strings.HasPrefix(na.Before[0].Result.ErrorMessage, "not applicable"))

	assert.Equal(t, []string{"undefined"}, stepStatuses(byName["Undefined step"]))
	assert.Equal(t, []string{"pending"}, stepStatuses(byName["Pending step"]))
	assert.Equal(t, []string{"skipped"}, stepStatuses(byName["Skipped scenario"]))
	assert.Contains(t, byName["Known failure"].Description, "tracked in issue 42")
	assert.Contains(t, byName["Skipped scenario"].Description, "tagged @wip")
	assert.Empty(t, passed.Description)
	assert.Contains(t, byName, scriptName)
}

func stepStatuses(e cElement) []string {
	var out []string
	for _, s := range e.Steps {
		out = append(out, s.Result.Status)
	}
	return out
}

func TestSummary(t *testing.T) {
	dir, _ := writeSample(t)
	md := string(readFile(t, dir, report.SummaryFile))
	first, _, _ := strings.Cut(md, "\n")
	assert.Contains(t, first, "Not conformant")
	assert.Contains(t, first, "exit code 1")
	for _, want := range []string{
		"loomcheck 0.3.0", "0.1.0", "### Profiles", "| core | yes | ❌ |", "| gateway | no | – |",
		"### Failures (1)", "ADR0122-D3-02", "### Harness errors (1)", "### Expected failures (1)",
		"### Warnings (1)", "Stale entries (1)", "Unexpected failures (1)", "**Contract**",
	} {
		assert.Contains(t, md, want)
	}
	assert.NotContains(t, md, "<b>")
	assert.Contains(t, md, "&lt;b&gt;bold&lt;/b&gt; &amp; co")
}

func TestSummaryStaysSmall(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, report.WriteSummary(&buf, manyFailures(5000)))
	assert.LessOrEqual(t, buf.Len(), report.SummaryMaxBytes)
	md := buf.String()
	assert.Contains(t, md, "### Failures (5000)")
	assert.Regexp(t, `_and \d+ more_`, md)
	// Later sections survive however long the failure list is.
	assert.Contains(t, md, "### Harness errors (5000)")
	assert.Contains(t, md, "### Warnings (5000)")
	assert.Contains(t, md, "Stale entries (5000)")
	assert.Contains(t, md, "**Contract**")
	assert.NotContains(t, md, "report.html has everything")
	assert.NotContains(t, md, "<b>")
	// Every line of a failure table is one table row.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| failure ") {
			assert.True(t, strings.HasSuffix(line, " |"), "a row was cut or broken: %.80q", line)
		}
	}

	conformant := sampleReport()
	conformant.Conformant, conformant.ExitCode = true, 0
	buf.Reset()
	require.NoError(t, report.WriteSummary(&buf, conformant))
	first, _, _ := strings.Cut(buf.String(), "\n")
	assert.Contains(t, first, "No new failures: 1 excused by the baseline, so not conformant (exit code 0)",
		"a pass that the baseline excused a failure for is never headlined conformant")

	for i := range conformant.Scenarios {
		if conformant.Scenarios[i].Expected != "" {
			conformant.Scenarios[i].Status = report.Passed
		}
	}
	buf.Reset()
	require.NoError(t, report.WriteSummary(&buf, conformant))
	first, _, _ = strings.Cut(buf.String(), "\n")
	assert.Equal(t, "## ✅ Conformant (exit code 0)", first)
}

var (
	externalRef = regexp.MustCompile(`(?i)(src|href|action|srcset|poster|data)\s*=\s*["']?\s*(https?:)?//`)
	cssImport   = regexp.MustCompile(`(?i)@import|url\(\s*["']?\s*(https?:)?//`)
	scriptTag   = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`)
	cspMeta     = regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`)
	styleTag    = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
)

func TestHTMLIsSelfContainedAndSafe(t *testing.T) {
	dir, _ := writeSample(t)
	page := string(readFile(t, dir, report.HTMLFile))

	assert.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
	assert.False(t, externalRef.MatchString(page), "external resource reference")
	assert.False(t, cssImport.MatchString(page), "CSS import or remote url()")
	assert.NotContains(t, page, "fetch(")
	assert.NotContains(t, page, "XMLHttpRequest")
	assert.NotContains(t, page, ".innerHTML")
	assert.NotContains(t, page, "<script>alert(1)")
	assert.NotContains(t, page, "<img src=x")

	// Exactly two script elements: the data and the code. No payload opened another.
	scripts := scriptTag.FindAllStringSubmatch(page, -1)
	require.Len(t, scripts, 2)
	assert.Equal(t, 2, strings.Count(strings.ToLower(page), "</script"))
	assert.Contains(t, scripts[0][1], `type="application/json"`)
	assert.Contains(t, scripts[0][1], `id="report-data"`)
	payload := scripts[0][2]
	assert.NotContains(t, payload, "<")

	// Outside the data, nothing names a web address at all.
	outside := strings.Replace(page, payload, "", 1)
	assert.NotContains(t, outside, "http://")
	assert.NotContains(t, outside, "https://")

	// The embedded data is the report, and the script-breaking name survives intact.
	var embedded report.Report
	require.NoError(t, json.Unmarshal([]byte(payload), &embedded))
	loaded, err := report.Load(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	assert.Equal(t, loaded, &embedded)
	names := map[string]bool{}
	for _, s := range embedded.Scenarios {
		names[s.Name] = true
	}
	assert.True(t, names[scriptName])

	// The policy allows exactly the inline style and script, by hash, and nothing else.
	m := cspMeta.FindStringSubmatch(page)
	require.NotNil(t, m)
	csp := m[1]
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "'sha256-"+hash(scripts[1][2])+"'")
	style := styleTag.FindStringSubmatch(page)
	require.NotNil(t, style)
	assert.Contains(t, csp, "'sha256-"+hash(style[1])+"'")
	assert.NotContains(t, csp, "unsafe")

	// Documented hooks are present in the page or its script.
	for _, hook := range []string{
		`id="verdict"`, `id="profiles"`, `id="requirements"`, `id="filters"`, `id="scenarios"`,
		`id="filter-empty"`, `'data-filter'`, `'data-status'`, `'scenario'`, `data-ready="false"`,
		`'data-scenario-id'`, `'data-conformant'`, `'data-exit-code'`, `'exchange'`, `'events'`,
	} {
		assert.Contains(t, page, hook)
	}
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func TestLoadRoundTrip(t *testing.T) {
	dir, r := writeSample(t)
	got, err := report.Load(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	want := report.Redact(r, signingKey, bearerToken)
	// Load gives back what was written, up to time zone representation.
	assert.True(t, want.StartedAt.Equal(got.StartedAt))
	got.StartedAt = want.StartedAt
	assert.Equal(t, want.Scenarios[1], got.Scenarios[1])
	assert.Equal(t, want.Requirements, got.Requirements)
	assert.Equal(t, want.Baseline, got.Baseline)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := report.Load(filepath.Join(dir, "missing.json"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, report.ErrInvalidReport)

	bad := map[string]string{
		"syntax":         `{"kit": `,
		"wrong type":     `{"kit": "loomcheck"}`,
		"not an object":  `[1, 2]`,
		"null":           `null`,
		"empty":          ``,
		"trailing":       `{} {}`,
		"unknown status": `{"scenarios": [{"id": "a:1", "status": "flaky"}]}`,
		"step status":    `{"scenarios": [{"id": "a:1", "status": "passed", "steps": [{"status": "meh"}]}]}`,
		"req status":     `{"requirements": [{"id": "R", "status": ""}]}`,
	}
	for name, body := range bad {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
			require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
			_, err := report.Load(p)
			require.ErrorIs(t, err, report.ErrInvalidReport)
			var de *report.DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, p, de.Path)
		})
	}
	var syn *json.SyntaxError
	_, err = report.Decode(strings.NewReader(`{"kit": }`))
	assert.ErrorAs(t, err, &syn)

	r, err := report.Decode(strings.NewReader("\n  {\"kit\": {\"name\": \"x\"}, \"future\": 1}\n"))
	require.NoError(t, err)
	assert.Equal(t, "x", r.Kit.Name)
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
