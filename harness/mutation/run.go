package mutation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Status is what became of a mutant.
type Status string

// The statuses.
const (
	// Killed: a test of the killing suite failed.
	Killed Status = "killed"
	// KilledByTimeout: the suite did not finish within its time limit (the mutant hangs).
	KilledByTimeout Status = "timeout"
	// Survived: the whole killing suite passed with the mutant in place.
	Survived Status = "survived"
	// Equivalent: survived, and listed in the equivalent file with the reason it cannot change
	// behaviour.
	Equivalent Status = "equivalent"
	// NotCovered: no test of the killing suite executes the mutated line; not run.
	NotCovered Status = "not-covered"
	// NotViable: the mutant does not compile.
	NotViable Status = "not-viable"
	// NotRun: the run was interrupted before the mutant's turn.
	NotRun Status = "not-run"
)

// ErrBaseline is returned (wrapped) when the killing suite fails on the unmutated reference: no
// mutant can be judged against a red suite.
var ErrBaseline = errors.New("mutation: the killing suite fails without any mutant")

// ConformancePackage is the package whose TestConformance runs the conformance suite in-process,
// one subtest per profile of the requirement catalogue.
const ConformancePackage = "reference/conformance"

// conformanceRun is the coverage label of one profile's part of the conformance suite.
func conformanceRun(profile string) string { return "conformance/" + profile }

// profileOf is the profile of a coverage label made by conformanceRun, and whether it is one.
func profileOf(run string) (string, bool) { return strings.CutPrefix(run, "conformance/") }

// Options configures a run.
type Options struct {
	// Root is the module root (default ".").
	Root string
	// Mutants are the mutants to judge, in order.
	Mutants []Mutant
	// Equivalent lists the reviewed equivalent mutants.
	Equivalent []EquivalentEntry
	// Workers is how many mutants are judged at once (default 1: each judgement already builds
	// and runs tests in parallel).
	Workers int
	// Timeout bounds one test binary run (go test -timeout); 0 derives it, for each package,
	// from its unmutated run (build included): three times as long, at least 30 seconds for a
	// package's own tests and 60 for the conformance suite.
	Timeout time.Duration
	// Log receives the baseline's lines and a progress line per mutant (nil: discarded).
	Log io.Writer
	// PackageTestsOnly runs only the mutated packages' own tests, not the conformance suite: a
	// quick check of a package's tests while sharpening them, not a measure of the kit.
	PackageTestsOnly bool
	// OnResult, if set, is called after each mutant is judged, with the results so far (in the
	// order of Mutants; the ones not judged yet are NotRun). Calls are serialized.
	OnResult func(results []Result)
}

// Result is one judged mutant.
type Result struct {
	Mutant
	Status Status `json:"status"`
	// KilledBy is "package tests" or "conformance" for a killed or timed-out mutant.
	KilledBy string `json:"killedBy,omitempty"`
	// Test is the first failing test, when the output names one.
	Test string `json:"test,omitempty"`
	// Reason is the equivalent entry's reason, for an equivalent mutant; for a killed mutant that
	// is listed as equivalent, it says the entry is wrong.
	Reason string `json:"reason,omitempty"`
	// Seconds is the wall time spent judging it.
	Seconds float64 `json:"seconds"`
}

// Run judges every mutant of opt.Mutants: it checks that the killing suite passes unmutated while
// measuring which lines it covers (ErrBaseline otherwise), then for each covered mutant runs the
// mutated package's own tests and then the conformance test, each with the mutated file as a
// go test -overlay, -failfast and a timeout. It returns the results in the order of opt.Mutants;
// when ctx is cancelled it stops, and the mutants not judged are NotRun (the error is then nil:
// the partial results are worth writing). It never writes into the source tree; scratch files go
// to a temporary directory removed on return.
//
//	results, err := mutation.Run(ctx, mutation.Options{Root: ".", Mutants: ms, Log: os.Stderr})
func Run(ctx context.Context, opt Options) ([]Result, error) {
	if opt.Root == "" {
		opt.Root = "."
	}
	root, err := filepath.Abs(opt.Root)
	if err != nil {
		return nil, err
	}
	if opt.Workers <= 0 {
		opt.Workers = 1
	}
	log := opt.Log
	if log == nil {
		log = io.Discard
	}
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "loomcheck-mutation-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	j, err := newJudge(ctx, &opt, root, tmp, module, log)
	if err != nil {
		return nil, err
	}
	results := judgeAll(ctx, &opt, j, log)
	if j.confErr != nil { // every worker is done: the conformance baseline, if it ran, is over
		return nil, j.confErr
	}
	return results, nil
}

// judged holds the results as the workers fill them in, and what the progress line counts.
type judged struct {
	mu      sync.Mutex
	results []Result
	done    int
	ran     int
	toRun   int
	ranTime time.Duration
	start   time.Time
}

// judgeAll judges opt's mutants on opt.Workers workers, in the order of opt.Mutants; the mutants
// not judged when ctx ends are NotRun.
func judgeAll(ctx context.Context, opt *Options, j *judge, log io.Writer) []Result {
	t := &judged{results: make([]Result, len(opt.Mutants)), start: time.Now()}
	for i, m := range opt.Mutants {
		t.results[i] = Result{Mutant: m, Status: NotRun}
	}
	t.toRun = len(opt.Mutants) // less each mutant found not covered
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < opt.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			t.work(ctx, w, opt, j, next, log)
		}(w)
	}
feed:
	for i := range opt.Mutants {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return t.results
}

// work is one worker: it judges the mutants whose indexes arrive on next, records each result and
// logs the progress, until next is closed or ctx ends.
func (t *judged) work(ctx context.Context, w int, opt *Options, j *judge, next <-chan int, log io.Writer) {
	for i := range next {
		m := opt.Mutants[i]
		t0 := time.Now()
		r := j.one(ctx, w, m)
		if ctx.Err() != nil && r.Status != NotCovered {
			return
		}
		r.Seconds = time.Since(t0).Seconds()
		markEquivalent(&r, opt.Equivalent)
		t.mu.Lock()
		t.results[i] = r
		t.done++
		if r.Status != NotCovered {
			t.ran++
			t.ranTime += time.Since(t0)
		} else {
			t.toRun--
		}
		fmt.Fprintln(log, progress(t.results, t.done, t.ran, t.toRun, t.ranTime, time.Since(t.start), opt.Workers))
		if opt.OnResult != nil {
			opt.OnResult(t.results)
		}
		t.mu.Unlock()
	}
}

func progress(results []Result, done, ran, toRun int, ranTime, elapsed time.Duration, workers int) string {
	n := map[Status]int{}
	for _, r := range results {
		n[r.Status]++
	}
	per := time.Duration(0)
	if ran > 0 {
		per = ranTime / time.Duration(ran)
	}
	left := time.Duration(toRun-ran) * per / time.Duration(workers)
	return fmt.Sprintf("mutate: [%d/%d] %d%% · killed %d · timeout %d · survived %d · equivalent %d · not covered %d · not viable %d · %.1fs per mutant · elapsed %s · about %s left",
		done, len(results), 100*done/max(1, len(results)), n[Killed], n[KilledByTimeout], n[Survived], n[Equivalent],
		n[NotCovered], n[NotViable], per.Seconds(), elapsed.Round(time.Second), left.Round(time.Second))
}

func markEquivalent(r *Result, eq []EquivalentEntry) {
	for _, e := range eq {
		if !e.Matches(r.Mutant) {
			continue
		}
		switch r.Status {
		case Survived:
			r.Status, r.Reason = Equivalent, e.Reason
		case Killed, KilledByTimeout:
			r.Reason = "listed in the equivalent file, yet killed: the entry is wrong"
		}
		return
	}
}

var errBackstop = errors.New("mutation: go test outlived its backstop")

// goCmd runs the go command in the module root, in its own process group so that a hung test
// binary dies with it, and returns its combined output and exit code.
func (j *judge) goCmd(ctx context.Context, limit time.Duration, args ...string) ([]byte, int, error) {
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", args...)
	cmd.Dir = j.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.Bytes(), -1, ctx.Err()
	}
	if cctx.Err() != nil {
		return out.Bytes(), -1, errBackstop
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.Bytes(), ee.ExitCode(), nil
	}
	if err != nil {
		return out.Bytes(), -1, err
	}
	return out.Bytes(), 0, nil
}

func buildFailed(out []byte) bool {
	return bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]"))
}

var failRE = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// failingTest names the innermost failing test of the output (the one with the most levels of
// subtests), which for the conformance suite is the scenario.
func failingTest(out []byte) string {
	var best string
	for _, m := range failRE.FindAllSubmatch(out, -1) {
		if name := string(m[1]); best == "" || strings.Count(name, "/") > strings.Count(best, "/") {
			best = name
		}
	}
	return best
}

func firstLine(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return ""
}

func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var testFuncRE = regexp.MustCompile(`(?m)^func (Test|Example|Fuzz)\w*\(`)

func packageHasTests(dir string) bool {
	names, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil && testFuncRE.Match(b) {
			return true
		}
	}
	return false
}

func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("mutation: no module line in %s/go.mod", root)
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// conformancePattern is the go test -run pattern of the conformance subtests of the profiles.
func conformancePattern(profiles []string) string {
	quoted := make([]string, len(profiles))
	for i, p := range profiles {
		quoted[i] = regexp.QuoteMeta(p)
	}
	return "^TestConformance$/^(" + strings.Join(quoted, "|") + ")$"
}

// Sample picks n mutants of each package, deterministically for a seed: the n whose hash of seed
// and ID is smallest. The result keeps the order of ms. n <= 0 returns ms unchanged.
//
//	ms = mutation.Sample(ms, 30, 1)
func Sample(ms []Mutant, n int, seed uint64) []Mutant {
	if n <= 0 {
		return ms
	}
	rank := func(m Mutant) string {
		h := sha256.Sum256([]byte(strconv.FormatUint(seed, 10) + "/" + m.ID))
		return string(h[:])
	}
	byPkg := map[string][]Mutant{}
	for _, m := range ms {
		byPkg[m.Package] = append(byPkg[m.Package], m)
	}
	keep := map[string]bool{}
	for _, list := range byPkg {
		sort.Slice(list, func(a, b int) bool { return rank(list[a]) < rank(list[b]) })
		for _, m := range list[:min(n, len(list))] {
			keep[m.ID] = true
		}
	}
	var out []Mutant
	for _, m := range ms {
		if keep[m.ID] {
			out = append(out, m)
		}
	}
	return out
}

// ChangedFiles lists the files of root changed since the git ref (committed or not), relative to
// the root with forward slashes.
//
//	files, err := mutation.ChangedFiles(ctx, ".", "origin/main")
func ChangedFiles(ctx context.Context, root, ref string) (map[string]bool, error) {
	cmd := exec.CommandContext(ctx, "git", "diff", "--name-only", "--relative", ref, "--")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("mutation: git diff %s: %w: %s", ref, err, stderr.String())
	}
	files := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			files[l] = true
		}
	}
	return files, nil
}
