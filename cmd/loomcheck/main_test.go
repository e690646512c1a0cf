package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/schemas"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := dispatch(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunWritesEveryReport(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := run(t, "run", "--quiet", "--tags", "@req:ADR0122-D1-01", "--profile", "core", "--out", dir)
	require.Equal(t, 0, code, out+errOut)
	for _, f := range []string{report.JSONFile, report.JUnitFile, report.CucumberFile, report.SummaryFile, report.HTMLFile} {
		_, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
	}
	b, err := os.ReadFile(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	require.NoError(t, schemas.Validate("report", b))
	require.NotContains(t, string(b), "tok-alice", "credentials are redacted")
}

func TestCertifyRefusesABaseline(t *testing.T) {
	base := filepath.Join(t.TempDir(), "baseline.json")
	require.NoError(t, os.WriteFile(base, []byte(`{"entries":[{"requirement":"ADR0122-D1-02","reason":"known"}]}`), 0o600))
	code, _, errOut := run(t, "run", "--certify", "--baseline", base, "--out", t.TempDir())
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--certify")
}

func TestStaleBaselineFailsTheRun(t *testing.T) {
	base := filepath.Join(t.TempDir(), "baseline.json")
	require.NoError(t, os.WriteFile(base, []byte(`{"entries":[{"requirement":"ADR0122-D1-01","reason":"was broken"}]}`), 0o600))
	dir := t.TempDir()
	code, out, errOut := run(t, "run", "--quiet", "--tags", "@req:ADR0122-D1-01", "--profile", "core", "--baseline", base, "--out", dir)
	require.Equal(t, exitNonConformant, code, out+errOut)
	rep, err := report.Load(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	require.Len(t, rep.Baseline.Stale, 1)
}

func TestUsageErrors(t *testing.T) {
	code, _, _ := run(t, "frobnicate")
	require.Equal(t, exitUsage, code)
	code, _, _ = run(t, "run", "--sut-cmd", "x", "--target", "http://y")
	require.Equal(t, exitUsage, code)
	code, _, _ = run(t, "run", "--target", "http://127.0.0.1:1")
	require.Equal(t, exitUsage, code, "a remote target needs the configuration it was started with")
	code, _, _ = run(t, "run", "--store", "mysql://db")
	require.Equal(t, exitUsage, code, "--store takes postgres or a postgres:// URL")
	code, _, _ = run(t, "run", "--sut-cmd", "x", "--nodes", "2")
	require.Equal(t, exitUsage, code, "nodes need a database they share")
	code, _, _ = run(t, "run", "--store", "postgres", "--nodes", "2")
	require.Equal(t, exitUsage, code, "nodes are processes the kit launches")
	code, _, _ = run(t, "run", "--sut-cmd", "x", "--store", "postgres", "--nodes", "1")
	require.Equal(t, exitUsage, code, "one node is no nodes")
}

func TestRequirementsAndExplain(t *testing.T) {
	code, out, _ := run(t, "requirements")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "coverage:")
	require.NotContains(t, out, "problem:")
	code, out, _ = run(t, "explain", "ADR0122-D2-05")
	require.Equal(t, 0, code)
	require.Contains(t, out, "barge_in.feature:")
	code, _, _ = run(t, "explain", "ADR9999-X1-01")
	require.Equal(t, exitUsage, code)
}

func TestValidate(t *testing.T) {
	good := filepath.Join(t.TempDir(), "e.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"error":"not found"}`), 0o600))
	code, out, _ := run(t, "validate", "--schema", "error", good)
	require.Equal(t, 0, code, out)
	bad := filepath.Join(t.TempDir(), "e.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"error":42}`), 0o600))
	code, out, _ = run(t, "validate", "--schema", "error", bad)
	require.Equal(t, exitNonConformant, code)
	require.True(t, strings.Contains(out, "/error"), out)
}

func TestReportDiff(t *testing.T) {
	dir := t.TempDir()
	old := &report.Report{Kit: report.Kit{Name: "loomcheck"}, Scenarios: []report.Scenario{{ID: "a:1", Status: report.Passed}}}
	cur := &report.Report{Kit: report.Kit{Name: "loomcheck"}, Scenarios: []report.Scenario{{ID: "a:1", Status: report.Failed}}}
	require.NoError(t, report.WriteAll(filepath.Join(dir, "old"), old))
	require.NoError(t, report.WriteAll(filepath.Join(dir, "new"), cur))
	code, out, _ := run(t, "report", "diff", filepath.Join(dir, "old", report.JSONFile), filepath.Join(dir, "new", report.JSONFile))
	require.Equal(t, exitNonConformant, code, out)
	require.Contains(t, strings.ToLower(out), "regress")
}

// TestFiltersNeverGoGreenByAccident: a filter that selects nothing, a malformed one, and a
// profile nobody has are usage errors (exit 2) that say so; a filtered run that leaves claimed
// profiles unjudged is not conformant (exit 1) and names them.
func TestFiltersNeverGoGreenByAccident(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--tags", "@req:ADR0122-D1-99"}, exitUsage, "selects no scenario"},
		{[]string{"--tags", "@req:ADR0122-D1-01 &&"}, exitUsage, "position 22"},
		{[]string{"--tags", "@"}, exitUsage, "position 2"},
		{[]string{"--tags", ",,"}, exitUsage, "position 1"},
		{[]string{"--profile", "nosuch"}, exitUsage, "not a profile"},
		{[]string{"--tags", "@req:ADR0122-D1-01"}, exitNonConformant, "claimed profiles not run"},
	} {
		dir := t.TempDir()
		code, out, errOut := run(t, append([]string{"run", "--quiet", "--out", dir}, c.args...)...)
		require.Equal(t, c.code, code, "%v: %s%s", c.args, out, errOut)
		require.Contains(t, out+errOut, c.says, c.args)
		require.False(t, strings.HasPrefix(out, "CONFORMANT"), "%v: %s", c.args, out)
	}
}

// judgedAndPassed is a run's last line when it judged at least one scenario and every one passed.
var judgedAndPassed = regexp.MustCompile(`CONFORMANT: [1-9][0-9]* passed, 0 failed, 0 not applicable`)

// TestRunOnPostgreSQL: `run --store postgres` gives a scenario a database of its own and judges
// the engine on it, and `--nodes 2` judges two engine processes on one database through a
// crash that kills the lease holder.
func TestRunOnPostgreSQL(t *testing.T) {
	pgtest.Require(t)
	if testing.Short() {
		t.Skip("builds the engine and runs scenarios")
	}
	code, out, errOut := run(t, "run", "--quiet", "--store", "postgres", "--tags", "@req:ADR0122-D1-08", "--profile", "durability", "--out", t.TempDir())
	require.Equal(t, exitConformant, code, out+errOut)
	require.Regexp(t, judgedAndPassed, out)

	bin := filepath.Join(t.TempDir(), "loom")
	build := exec.Command("go", "build", "-o", bin, "../loom")
	b, err := build.CombinedOutput()
	require.NoError(t, err, string(b))
	dir := t.TempDir()
	code, out, errOut = run(t, "run", "--quiet", "--sut-cmd", bin, "--store", "postgres", "--nodes", "2",
		"--tags", "@req:ADR0121-D1-02 && @crash", "--profile", "agent", "--out", dir)
	require.Equal(t, exitConformant, code, out+errOut)
	require.Regexp(t, judgedAndPassed, out)
	// The crash killed the holder: the answers before it came from one node, those after it
	// from the other. The two nodes start at once, so either may hold the lease first.
	b, err = os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	var rep struct {
		Scenarios []struct {
			Exchanges []struct {
				ResponseHeaders map[string][]string `json:"responseHeaders"`
			} `json:"exchanges"`
		} `json:"scenarios"`
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	var servedBy []string
	for _, sc := range rep.Scenarios {
		for _, ex := range sc.Exchanges {
			if n := ex.ResponseHeaders["Loom-Node"]; len(n) == 1 && (len(servedBy) == 0 || servedBy[len(servedBy)-1] != n[0]) {
				servedBy = append(servedBy, n[0])
			}
		}
	}
	require.ElementsMatch(t, []string{"node-1", "node-2"}, servedBy, "the node that served each answer, in order: %v", servedBy)
	require.Len(t, servedBy, 2, "one node before the crash, the other after it: %v", servedBy)
}

// A system that cannot start fails the run (exit 1, the system's failure, not the kit's) and every
// report is written, each saying why.
func TestASystemThatCannotStartFailsWithReports(t *testing.T) {
	out := t.TempDir()
	code, stdout, _ := run(t, "run", "--quiet", "--profile", "core", "--sut-cmd", "exit 3", "--out", out)
	require.Equal(t, exitNonConformant, code, stdout)
	require.Contains(t, stdout, "the system did not start")
	for _, f := range []string{"summary.md", "junit.xml", "report.json", "report.html", "cucumber.json"} {
		_, err := os.Stat(filepath.Join(out, f))
		require.NoError(t, err, "%s is written", f)
	}
	md, err := os.ReadFile(filepath.Join(out, "summary.md"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(md), "## ❌ Not conformant: the system did not start (exit code 1)"), "%.200s", md)
	junit, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	require.NoError(t, err)
	require.Contains(t, string(junit), `type="unstarted"`)
	var rep struct {
		Unstarted string `json:"unstarted"`
		ExitCode  int    `json:"exitCode"`
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	require.NoError(t, schemas.Validate("report", b))
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Contains(t, rep.Unstarted, "exit status 3")
	require.Equal(t, 1, rep.ExitCode)
}

// TestMalformedTargetIsAUsageError: a --target that is not an HTTP base URL stops the run before
// anything starts (exit 2), and the message names the flag and the value given.
func TestMalformedTargetIsAUsageError(t *testing.T) {
	for _, target := range []string{"127.0.0.1:8080", "localhost", "ftp://127.0.0.1", "http://", "http://[::1", "http://127.0.0.1:8080/?x=1"} {
		code, out, errOut := run(t, "run", "--target", target, "--world-config", "unused.json")
		require.Equal(t, exitUsage, code, target)
		require.Empty(t, out, target)
		require.Contains(t, errOut, fmt.Sprintf("--target %q", target))
	}
	require.NoError(t, checkTarget("http://127.0.0.1:8080"))
	require.NoError(t, checkTarget("https://loom.example/base"))
}

// TestExplainUnknownIDOffersTheClosest: a requirement id with a slip in it is a usage error that
// names the id meant.
func TestExplainUnknownIDOffersTheClosest(t *testing.T) {
	code, _, errOut := run(t, "explain", "adr0122-d1-01")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `did you mean "ADR0122-D1-01"?`)
}

// TestVerdictListsContractFindingsOnce: each contract finding is one line below the verdict,
// with how often and in how many scenarios it was seen, whatever the scenarios' verdicts.
func TestVerdictListsContractFindingsOnce(t *testing.T) {
	rep := &report.Report{ExitCode: 1, Totals: report.Totals{Passed: 2},
		Scenarios: []report.Scenario{{ID: "a.feature:3", Status: report.Passed}, {ID: "a.feature:9", Status: report.Passed}},
		Contract: report.Contract{Requirement: "ADR0122-D6-01", Findings: []report.ContractFinding{{
			Route: "POST /conversations/{id}/turns", Location: "header:X-Content-Type-Options", Message: "required header is missing",
			Occurrences: 7, Scenarios: []string{"a.feature:3", "a.feature:9"}}}}}
	var b strings.Builder
	printVerdict(&b, rep, "out")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 4, b.String())
	require.True(t, strings.HasPrefix(lines[0], "NOT CONFORMANT: 2 passed, 0 failed"), lines[0])
	require.Contains(t, lines[1], "1 contract violation under ADR0122-D6-01")
	require.Equal(t, "  contract POST /conversations/{id}/turns header:X-Content-Type-Options: required header is missing (7 times, in 2 scenarios)", lines[2])
}
