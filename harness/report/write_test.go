package report_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
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
