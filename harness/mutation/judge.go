package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/spec"
)

// judge judges mutants against their killing suite: their package's own tests, then the
// conformance profiles whose scenarios executed the mutated position.
//
// Its baseline comes in two parts. The package tests' part (their coverage and times) is
// measured before any mutant is judged. The conformance part, the whole suite run unmutated,
// profile by profile, is measured the first time a mutant needs it: a mutant its package's tests
// kill never does, so a sample that those tests kill whole never runs the suite.
type judge struct {
	root, tmp, module string
	pkgs              []string // the mutants' packages
	workers           int
	log               io.Writer
	hasTests          map[string]bool
	unitOnly          bool
	profiles          []string // the catalogue's profiles: one conformance subtest each
	// pkgCov and pkgTook are the package tests' baseline: their coverage and each package's time.
	// Fixed before the first mutant is judged.
	pkgCov  *coverage
	pkgTook map[string]time.Duration
	// conf measures the conformance part once; cov and took are then the whole baseline, and
	// confErr its failure. Read them only after conf.Do has returned.
	conf    sync.Once
	cov     *coverage
	took    map[string]time.Duration
	confErr error
	// timeout, when positive, replaces the limits derived from the baseline's times.
	timeout time.Duration
}

// newJudge makes the judge of opt's mutants: it loads the catalogue's profiles unless only the
// package tests judge, and runs the package tests' baseline.
func newJudge(ctx context.Context, opt *Options, root, tmp, module string, log io.Writer) (*judge, error) {
	pkgs := map[string]bool{}
	for _, m := range opt.Mutants {
		pkgs[m.Package] = true
	}
	j := &judge{root: root, tmp: tmp, module: module, workers: opt.Workers, log: log,
		hasTests: map[string]bool{}, unitOnly: opt.PackageTestsOnly, timeout: opt.Timeout}
	if !j.unitOnly {
		cat, err := spec.LoadCatalogue()
		if err != nil {
			return nil, err
		}
		j.profiles = cat.ProfileNames()
	}
	j.pkgs = sortedKeys(pkgs)
	var runs []baselineRun
	for _, p := range j.pkgs {
		if j.hasTests[p] = packageHasTests(filepath.Join(j.root, p)); j.hasTests[p] {
			runs = append(runs, baselineRun{p, []string{"./" + p}})
		}
	}
	cov, took, err := j.baseline(ctx, "p", runs)
	if err != nil {
		return nil, err
	}
	j.pkgCov, j.pkgTook = cov, took
	return j, nil
}

// conformance returns the whole baseline, measuring its conformance part on the first call.
func (j *judge) conformance(ctx context.Context) (*coverage, map[string]time.Duration, error) {
	j.conf.Do(func() {
		coverpkg := make([]string, len(j.pkgs))
		for i, p := range j.pkgs {
			coverpkg[i] = j.module + "/" + p
		}
		var runs []baselineRun
		for _, p := range j.profiles {
			runs = append(runs, baselineRun{conformanceRun(p), []string{"-run", conformancePattern([]string{p}),
				"-coverpkg=" + strings.Join(coverpkg, ","), "./" + ConformancePackage}})
		}
		cov, took, err := j.baseline(ctx, "c", runs)
		if err != nil {
			j.confErr = err
			return
		}
		j.cov = j.pkgCov.with(cov)
		j.took = map[string]time.Duration{}
		for _, m := range []map[string]time.Duration{j.pkgTook, took} {
			for k, v := range m {
				j.took[k] = v
			}
		}
		fmt.Fprintf(j.log, "mutate: baseline green; the whole conformance suite would be limited to %s a run\n", j.limit(j.took, j.profiles))
	})
	return j.cov, j.took, j.confErr
}

// limit is the -timeout of a test run of the package's own tests (one label) or of the
// conformance profiles (labels made by conformanceRun, or profile names): three times the
// baseline's time for them together (took), at least 30 seconds for a package's tests and 60 for
// the conformance suite.
func (j *judge) limit(took map[string]time.Duration, runs []string) time.Duration {
	if j.timeout > 0 {
		return j.timeout
	}
	var d time.Duration
	floor := 30 * time.Second
	for _, r := range runs {
		if _, conf := profileOf(r); !conf && slices.Contains(j.profiles, r) {
			r = conformanceRun(r)
		}
		if _, conf := profileOf(r); conf {
			floor = 60 * time.Second
		}
		d += took[r]
	}
	return max(floor, 3*d).Round(time.Second)
}

// baselineRun is one run of the baseline: a label (what covered the blocks) and the go test
// arguments that measure it.
type baselineRun struct {
	label string
	args  []string
}

// baseline runs runs unmutated with coverage, j.workers at a time (as the mutants are judged, so
// that each run's time is measured under the same load), and returns their coverage and each
// run's time, by label. A run that fails fails the baseline (ErrBaseline), naming the first
// failing run of the list. part names the runs' coverage files apart from another part's.
func (j *judge) baseline(ctx context.Context, part string, runs []baselineRun) (*coverage, map[string]time.Duration, error) {
	cov := &coverage{module: j.module, blocks: map[string][]block{}}
	took := map[string]time.Duration{}
	type outcome struct {
		args []string
		out  []byte
		code int
		err  error
		took time.Duration
	}
	outs := make([]outcome, len(runs))
	profile := func(i int) string { return filepath.Join(j.tmp, fmt.Sprintf("cover-%s%d.out", part, i)) }
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < max(1, j.workers); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t0 := time.Now()
				o := &outs[i]
				o.args = append([]string{"test", "-count=1", "-vet=off", "-coverprofile=" + profile(i)}, runs[i].args...)
				o.out, o.code, o.err = j.goCmd(ctx, 30*time.Minute, o.args...)
				o.took = time.Since(t0)
			}
		}()
	}
	for i := range runs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, rn := range runs {
		o := outs[i]
		if o.err != nil {
			return nil, nil, o.err
		}
		if o.code != 0 {
			return nil, nil, fmt.Errorf("%w: go %s:\n%s", ErrBaseline, strings.Join(o.args, " "), tail(o.out, 40))
		}
		took[rn.label] = o.took
		fmt.Fprintf(j.log, "mutate: baseline %s passed in %s\n", rn.label, o.took.Round(time.Millisecond))
		if err := cov.read(profile(i), rn.label); err != nil {
			return nil, nil, err
		}
	}
	return cov, took, nil
}

// one judges a mutant: its package's tests first when they executed its position, then, unless
// they killed it, the conformance profiles that did. A mutant no run executed is NotCovered.
func (j *judge) one(ctx context.Context, worker int, m Mutant) Result {
	r := Result{Mutant: m}
	overlay, err := j.overlay(worker, m)
	if err != nil {
		r.Status, r.Reason = NotViable, err.Error()
		return r
	}
	// Only the runs that executed the mutated position can notice it; a position in no block at
	// all (a package-level declaration) is run against them all.
	ran := false
	if j.hasTests[m.Package] && j.pkgCov.executes(m, m.Package) {
		ran = true
		if done := j.step(ctx, &r, overlay, "package tests", m.Package, "", j.limit(j.pkgTook, []string{m.Package})); done {
			return r
		}
	}
	if !j.unitOnly {
		cov, took, err := j.conformance(ctx)
		if err != nil {
			r.Status, r.Reason = NotRun, err.Error()
			return r
		}
		if ps := cov.profiles(m, j.profiles); len(ps) > 0 {
			ran = true
			if done := j.step(ctx, &r, overlay, "conformance", ConformancePackage, conformancePattern(ps), j.limit(took, ps)); done {
				return r
			}
		}
	}
	switch {
	case ran:
		r.Status = Survived
	case !j.hasTests[m.Package] && j.unitOnly:
		r.Status, r.Reason = NotCovered, "the package has no tests"
	default:
		r.Status = NotCovered
	}
	return r
}

// overlay writes the mutated file and the go command's overlay that puts it in place of m's file,
// in the worker's own directory, and returns the overlay's path.
func (j *judge) overlay(worker int, m Mutant) (string, error) {
	src, err := os.ReadFile(filepath.Join(j.root, m.File))
	if err != nil {
		return "", err
	}
	dir := filepath.Join(j.tmp, "w"+strconv.Itoa(worker))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	overlay := filepath.Join(dir, "overlay.json")
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(j.root, m.File): mutated}})
	if err := os.WriteFile(mutated, m.Apply(src), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return "", err
	}
	return overlay, nil
}

// step runs one part of the killing suite (the tests of pkg matching run) on the mutant, and
// reports whether that decided r (killed, or the mutant could not be judged).
func (j *judge) step(ctx context.Context, r *Result, overlay, name, pkg, run string, limit time.Duration) bool {
	args := []string{"test", "-overlay=" + overlay, "-count=1", "-vet=off", "-failfast", "-timeout=" + limit.String()}
	if run != "" {
		args = append(args, "-run", run)
	}
	args = append(args, "./"+pkg)
	// The backstop allows for the build on top of the test binary's own limit.
	out, code, err := j.goCmd(ctx, limit+5*time.Minute, args...)
	switch {
	case errors.Is(err, errBackstop):
		r.Status, r.KilledBy = KilledByTimeout, name
	case err != nil:
		r.Status, r.Reason = NotRun, err.Error()
	case code == 0:
		return false
	case buildFailed(out):
		r.Status, r.Reason = NotViable, firstLine(out)
	case bytes.Contains(out, []byte("panic: test timed out")):
		r.Status, r.KilledBy = KilledByTimeout, name
	default:
		r.Status, r.KilledBy, r.Test = Killed, name, failingTest(out)
	}
	return true
}
