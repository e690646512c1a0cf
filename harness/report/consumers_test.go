package report_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

// reportcheck is the directory of the standard report consumers, locked in its package-lock.json.
const reportcheck = "../../tools/reportcheck"

// requireReportcheck skips the test when node or the consumers' packages are missing, so that
// `go test ./...` passes on a machine without them; with CI set a missing piece is a failure, as
// .ci/run installs them.
func requireReportcheck(t *testing.T) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node on PATH")
	}
	if _, err := os.Stat(filepath.Join(reportcheck, "node_modules", "@cucumber", "cucumber-json-converter", "package.json")); err != nil {
		missing = append(missing, "tools/reportcheck/node_modules (cd tools/reportcheck && npm ci)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "the check with Cucumber's own converter needs " + strings.Join(missing, ", ")
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; .ci/run is expected to install them")
	}
	t.Skip(msg)
}

// TestCucumberJSONConverter reads the cucumber.json of a report holding every status, doc
// strings, tables, hooks and a baseline's expected failure with Cucumber's own converter
// (@cucumber/cucumber-json-converter), which accepts only a document valid against the schema
// of one of Cucumber's implementations; every scenario and step must come through.
func TestCucumberJSONConverter(t *testing.T) {
	requireReportcheck(t)
	for name, r := range map[string]*report.Report{"sample": sampleReport(), "empty": {}} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f, err := os.Create(filepath.Join(dir, report.CucumberFile))
			require.NoError(t, err)
			require.NoError(t, report.WriteCucumber(f, r))
			require.NoError(t, f.Close())
			out, err := exec.Command("node", filepath.Join(reportcheck, "cucumber.mjs"), f.Name()).Output()
			require.NoError(t, err, "%s", out)
			var got struct {
				OK        bool   `json:"ok"`
				Error     string `json:"error"`
				Features  int    `json:"features"`
				Scenarios int    `json:"scenarios"`
				Steps     int    `json:"steps"`
			}
			require.NoError(t, json.Unmarshal(out, &got), "%s", out)
			require.True(t, got.OK, "Cucumber's converter refused cucumber.json: %s", got.Error)
			steps, features := 0, map[string]bool{}
			for _, sc := range r.Scenarios {
				steps += len(sc.Steps)
				features[sc.Feature] = true
			}
			require.Equal(t, len(r.Scenarios), got.Scenarios)
			require.Equal(t, steps, got.Steps)
			require.Equal(t, len(features), got.Features)
		})
	}
}

// TestJUnitReadByAConsumer reads the junit.xml of a report holding every status, an excused
// failure, a stale baseline entry and a contract finding with test-results-parser, a JUnit reader
// CI dashboards use: every scenario is one test case with the status its outcome maps to, each
// stale entry and contract finding one failing case of the "loomcheck" suite, and the totals the
// reader takes from the suites' attributes agree with the cases.
func TestJUnitReadByAConsumer(t *testing.T) {
	requireReportcheck(t)
	r := sampleReport()
	dir := t.TempDir()
	require.NoError(t, report.WriteAll(dir, r))
	out, err := exec.Command("node", filepath.Join(reportcheck, "junit.mjs"), filepath.Join(dir, report.JUnitFile)).Output()
	require.NoError(t, err, "%s", out)
	var got struct {
		OK                                     bool   `json:"ok"`
		Error                                  string `json:"error"`
		Total, Passed, Failed, Errors, Skipped int
		Cases                                  []struct{ Suite, Name, Status string }
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.True(t, got.OK, "the JUnit reader refused junit.xml: %s", got.Error)

	want := map[string]string{}
	for _, sc := range r.Scenarios {
		status := "SKIP"
		switch {
		case sc.Status == report.Passed:
			status = "PASS"
		case sc.Status == report.HarnessError, sc.Status == report.Failed && sc.Expected == "" && !onlyWeak(r, sc):
			status = "FAIL"
		}
		want[sc.Feature+" / "+sc.Name] = status
	}
	for _, e := range r.Baseline.Stale {
		want["loomcheck / stale baseline entry "+e.Requirement+e.Scenario] = "FAIL"
	}
	for _, f := range r.Contract.Findings {
		want["loomcheck / contract "+f.Route+" "+f.Location] = "FAIL"
	}
	cases := map[string]string{}
	counts := map[string]int{}
	for _, c := range got.Cases {
		cases[c.Suite+" / "+c.Name] = c.Status
		counts[c.Status]++
	}
	require.Equal(t, want, cases)
	require.Equal(t, counts["FAIL"], got.Failed+got.Errors, "%+v", got)
	require.Equal(t, counts["SKIP"], got.Skipped, "%+v", got)
	require.Equal(t, counts["PASS"], got.Passed, "%+v", got)
}

// onlyWeak reports whether every requirement of sc is catalogued in r weaker than MUST.
func onlyWeak(r *report.Report, sc report.Scenario) bool {
	if len(sc.Requirements) == 0 {
		return false
	}
	for _, id := range sc.Requirements {
		for _, q := range r.Requirements {
			if q.ID == id && (q.Level == "MUST" || q.Level == "") {
				return false
			}
		}
	}
	return true
}
