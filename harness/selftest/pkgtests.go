package selftest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// testTimeout bounds one run of a package's tests against a variant: a variant that makes a test
// wait for ever is caught by the time limit, as the test binary then fails.
const testTimeout = "5m"

// testEvent is the part of a `go test -json` event the self-test reads.
type testEvent struct {
	Action string
	Test   string
	Output string
}

// testRun is what one `go test -json` run of a package showed.
type testRun struct {
	ran, failed []string // tests that started, and those that failed
	skipped     int      // tests that skipped (a store's tests without their server)
	pkgFailed   bool     // the package's binary failed (a time limit met inside a test included)
	output      []string // lines that were no event (the build's messages)
}

// judgeTests judges d by the tests of its package, built with the edits of editsName laid over
// the source tree (none when it is empty): caught when a test fails, or when the package's test
// binary fails once a test has started (a variant that blocks a test until the time limit).
func judgeTests(ctx context.Context, opt Options, d Defect, editsName, dir string, res *Result) {
	overlay := map[string]string{}
	if editsName != "" {
		var err error
		if overlay, err = edited(opt.Root, opt.Defects, dir, editsName); err != nil {
			res.Error = err.Error()
			return
		}
	}
	ov := filepath.Join(dir, "overlay.json")
	b, _ := json.Marshal(map[string]any{"Replace": overlay})
	if err := os.WriteFile(ov, b, 0o600); err != nil {
		res.Error = err.Error()
		return
	}
	args := []string{"test", "-count=1", "-json", "-timeout", testTimeout, "-overlay", ov}
	if d.Run != "" {
		args = append(args, "-run", d.Run)
	}
	out, _ := run(ctx, opt.Root, "go", append(args, "./"+filepath.ToSlash(filepath.Clean(d.Tests)))...)
	tr := readTestRun(out)
	res.scenarios = len(tr.ran)
	switch {
	case len(tr.ran) == 0 && tr.pkgFailed:
		res.Error = "the variant's tests do not build: " + lastLine(strings.Join(tr.output, "\n"))
	case len(tr.ran) == tr.skipped && !tr.pkgFailed:
		res.Error = "no test of " + d.Tests + " ran to its end: every one skipped (a store's tests need its server)"
	case len(tr.failed) > 0:
		res.Caught = true
		res.CaughtBy = append(res.CaughtBy, tr.failed...)
		res.Failures = append(res.Failures, tr.failed...)
	case tr.pkgFailed:
		res.Caught = true
		res.CaughtBy = append(res.CaughtBy, d.Tests+" (its test binary failed)")
		res.Failures = append(res.Failures, d.Tests+" (its test binary failed)")
	}
}

// readTestRun reads the output of `go test -json`: the tests that ran and failed, whether the
// package failed, and every line that is not an event.
func readTestRun(out string) testRun {
	var tr testRun
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var ev testEvent
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &ev) != nil {
			tr.output = append(tr.output, line)
			continue
		}
		switch {
		case ev.Action == "run" && ev.Test != "":
			tr.ran = append(tr.ran, ev.Test)
		case ev.Action == "fail" && ev.Test != "" && !slices.Contains(tr.failed, ev.Test):
			tr.failed = append(tr.failed, ev.Test)
		case ev.Action == "fail":
			tr.pkgFailed = true
		case ev.Action == "skip" && ev.Test != "":
			tr.skipped++
		case ev.Action == "build-output":
			tr.output = append(tr.output, strings.TrimRight(ev.Output, "\n"))
		}
	}
	return tr
}

// controlTests runs the tests that judge the defects of defects judged by tests, each package
// (and -run) once, against the unbroken reference: every one must run and pass.
func controlTests(ctx context.Context, opt Options, defects []Defect) error {
	seen := map[[2]string]bool{}
	for _, d := range defects {
		key := [2]string{d.Tests, d.Run}
		if d.Tests == "" || seen[key] {
			continue
		}
		seen[key] = true
		res := judge(ctx, opt, Defect{Name: "control", Tests: d.Tests, Run: d.Run})
		switch {
		case res.Interrupted:
			return fmt.Errorf("%w: the control run was %s", ErrInterrupted, NotJudged)
		case res.Error != "":
			return fmt.Errorf("%w: %s", ErrControl, res.Error)
		case res.Caught:
			return fmt.Errorf("%w: %s", ErrControl, strings.Join(res.Failures, "; "))
		}
		fmt.Fprintf(opt.Log, "control: the unbroken reference passes the %d tests of %s that judge defects\n", res.scenarios, d.Tests)
	}
	return nil
}
