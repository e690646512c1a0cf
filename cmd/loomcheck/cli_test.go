package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/schemas"
	"github.com/loomcheck/loomcheck/spec"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestNoArgumentsPrintsUsage: a bare `loomcheck` runs nothing; it prints the commands and exits 2.
func TestNoArgumentsPrintsUsage(t *testing.T) {
	code, out, errOut := run(t)
	require.Equal(t, exitUsage, code)
	require.Empty(t, out)
	require.True(t, strings.HasPrefix(errOut, "usage: loomcheck <command>"), errOut)
	for _, c := range commands() {
		require.Contains(t, errOut, "  "+c.name+" ")
	}
}

// TestVersion: `version` and `--version` print the module, spec and catalogue versions.
func TestVersion(t *testing.T) {
	cat, err := spec.LoadCatalogue()
	require.NoError(t, err)
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		code, out, errOut := run(t, args...)
		require.Equal(t, exitConformant, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 4, out)
		require.True(t, strings.HasPrefix(lines[0], "loomcheck "), out)
		require.NotEqual(t, "loomcheck ", lines[0])
		require.True(t, strings.HasPrefix(lines[1], "commit "), out)
		require.Equal(t, "spec "+sutconfig.Version, lines[2])
		require.Equal(t, "catalogue "+cat.Version, lines[3])
	}
	code, _, _ := run(t, "version", "extra")
	require.Equal(t, exitUsage, code)
}

// TestVersionNamesTheCommit: the commit line says the revision, its time and whether the tree
// had uncommitted changes, as the go command stamped them; without them it says it cannot tell.
func TestVersionNamesTheCommit(t *testing.T) {
	prev := readBuildInfo
	t.Cleanup(func() { readBuildInfo = prev })
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "3f2c9e1d0a7b55aa00112233445566778899aabb"},
			{Key: "vcs.time", Value: "2026-12-06T13:00:00Z"}, {Key: "vcs.modified", Value: "false"}},
			"commit 3f2c9e1d0a7b (2026-12-06T13:00:00Z)"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "3f2c9e1d0a7b55aa"}, {Key: "vcs.modified", Value: "true"}},
			"commit 3f2c9e1d0a7b, with uncommitted changes"},
		{nil, "commit (unknown: built without version control information)"},
	} {
		readBuildInfo = func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}, Settings: tc.settings}, true
		}
		code, out, errOut := run(t, "version")
		require.Equal(t, exitConformant, code, errOut)
		require.Equal(t, tc.want, strings.Split(out, "\n")[1], out)
		require.True(t, strings.HasPrefix(out, "loomcheck v0.3.0\n"), out)
	}
}

// TestEveryCommandSaysWhatItDoes: each subcommand's -h (and report's, and report diff's) exits
// 0 and prints its own usage line, a sentence of what it does, and its flags when it has any.
func TestEveryCommandSaysWhatItDoes(t *testing.T) {
	for _, c := range commands() {
		code, out, errOut := run(t, c.name, "-h")
		require.Equal(t, exitConformant, code, c.name)
		text := out + errOut
		require.True(t, strings.HasPrefix(text, "usage: loomcheck "+c.name), "%s: %s", c.name, text)
		parts := strings.SplitN(text, "\n\n", 3)
		require.GreaterOrEqual(t, len(parts), 2, "%s: usage, then what it does (then the flags): %s", c.name, text)
		require.NotEmpty(t, strings.TrimSpace(parts[1]), "%s: says what it does: %s", c.name, text)
		require.False(t, strings.HasPrefix(parts[1], "flags:"), "%s: says what it does: %s", c.name, text)
	}
	for _, args := range [][]string{{"report", "-h"}, {"report", "--help"}, {"report", "diff", "-h"}, {"report", "render", "-h"}} {
		code, out, errOut := run(t, args...)
		require.Equal(t, exitConformant, code, args)
		require.Contains(t, out+errOut, "usage: loomcheck report", args)
	}
	code, _, errOut := run(t, "run", "-h")
	require.Equal(t, exitConformant, code)
	require.Contains(t, errOut, "-sut-cmd")
	require.Contains(t, errOut, "Runs the conformance suite")
}

// TestFlagsAfterArguments: flags parse after the positional arguments, and "--" ends them.
func TestFlagsAfterArguments(t *testing.T) {
	good := filepath.Join(t.TempDir(), "e.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"error":"not found"}`), 0o600))
	code, out, errOut := run(t, "validate", good, "--schema", "error")
	require.Equal(t, exitConformant, code, out+errOut)
	require.Equal(t, good+": valid error\n", out)
	code, out, _ = run(t, "validate", "--schema", "error", "--", good)
	require.Equal(t, exitConformant, code, out)
	code, _, errOut = run(t, "validate", good, "--nosuch")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "nosuch")
	code, _, _ = run(t, "run", "--quiet", "stray", "--out", t.TempDir())
	require.Equal(t, exitUsage, code, "a positional argument after flags is still seen")
}

// TestWorldPrintBindsNoPort: --print writes the document for --addr even while another process
// holds that port, and exits at once.
func TestWorldPrintBindsNoPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	addr := ln.Addr().String()
	code, out, errOut := run(t, "world", "--addr", addr, "--print")
	require.Equal(t, exitConformant, code, errOut)
	require.Contains(t, out, `"baseURL": "http://`+addr+`/v1"`)
}

// TestASutThatExitsAtOnceShowsWhatItPrinted: a system that exits at once fails the run (exit 1,
// the system's failure), and the verdict names how the command ended and quotes what it printed,
// once.
func TestASutThatExitsAtOnceShowsWhatItPrinted(t *testing.T) {
	code, out, errOut := run(t, "run", "--quiet", "--tags", "@req:ADR0122-D1-02", "--profile", "core", "--out", t.TempDir(),
		"--sut-cmd", `echo "cannot read LOOM_CONFIG: marker-7f3" >&2; exit 3`)
	require.Equal(t, exitNonConformant, code, out+errOut)
	all := out + errOut
	require.Contains(t, all, "exited before answering (exit status 3)")
	require.Equal(t, 1, strings.Count(all, "marker-7f3"), all)
	// It says where the kit knocked: the listen address it wrote in the configuration.
	knocked := regexp.MustCompile(`knocked on http://(127\.0\.0\.1:\d+)/\.well-known/loom, the "listen" address \((127\.0\.0\.1:\d+)\)`).FindStringSubmatch(all)
	require.NotNil(t, knocked, all)
	require.Equal(t, knocked[1], knocked[2])
}

// TestAFilteredRunShowsUnselectedRequirementsAsNotRun: the requirements a filter left out are
// "not-run" in report.json (valid against its schema), never "undefined"; the selected one has
// its scenario's status.
func TestAFilteredRunShowsUnselectedRequirementsAsNotRun(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := run(t, "run", "--quiet", "--tags", "@req:ADR0122-D1-02", "--profile", "core", "--out", dir)
	require.Equal(t, exitConformant, code, out+errOut)
	b, err := os.ReadFile(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	require.NoError(t, schemas.Validate("report", b))
	rep, err := report.Load(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	cat, err := spec.LoadCatalogue()
	require.NoError(t, err)
	require.Len(t, rep.Requirements, len(cat.Requirements))
	for _, q := range rep.Requirements {
		want := report.NotRun
		if q.ID == "ADR0122-D1-02" {
			want = report.Passed
		}
		require.Equal(t, want, q.Status, q.ID)
	}
	html, err := os.ReadFile(filepath.Join(dir, report.HTMLFile))
	require.NoError(t, err)
	require.Contains(t, string(html), "'not-run': 'Not run'")
	var raw struct {
		StartedAt string `json:"startedAt"`
	}
	require.NoError(t, json.Unmarshal(b, &raw))
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,3})?Z$`, raw.StartedAt, "no nanoseconds")
	sum, err := os.ReadFile(filepath.Join(dir, report.SummaryFile))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(sum), "(in-process)"), string(sum))
}

// TestUsageLinesWorkAsPrinted: `report render REPORT.json --out DIR` takes its flag after the
// argument, as its usage line shows it.
func TestUsageLinesWorkAsPrinted(t *testing.T) {
	dir := t.TempDir()
	rep := &report.Report{Kit: report.Kit{Name: "loomcheck"}, Scenarios: []report.Scenario{{ID: "a:1", Status: report.Passed}}}
	require.NoError(t, report.WriteAll(filepath.Join(dir, "in"), rep))
	out := filepath.Join(dir, "out")
	code, stdout, errOut := run(t, "report", "render", filepath.Join(dir, "in", report.JSONFile), "--out", out)
	require.Equal(t, exitConformant, code, stdout+errOut)
	_, err := os.Stat(filepath.Join(out, report.HTMLFile))
	require.NoError(t, err)
}

// TestIdsPastedFromTheSummary: an id copied from summary.md (non-breaking hyphens) is the id.
func TestIdsPastedFromTheSummary(t *testing.T) {
	pasted := strings.ReplaceAll("ADR0122-D2-05", "-", report.NonBreakingHyphen)
	code, out, errOut := run(t, "explain", pasted)
	require.Equal(t, exitConformant, code, errOut)
	require.True(t, strings.HasPrefix(out, "ADR0122-D2-05 ("), out)
	code, out, errOut = run(t, "run", "--quiet", "--tags", "@req:"+strings.ReplaceAll("ADR0122-D1-02", "-", report.NonBreakingHyphen), "--profile", "core", "--out", t.TempDir())
	require.Equal(t, exitConformant, code, out+errOut)
	require.True(t, strings.HasPrefix(out, "CONFORMANT: 1 passed"), out)
}
