// Package selftest proves that the kit catches bugs: for each deliberately broken variant of the
// reference engine (a defect of fixtures/defects/), it applies the defect's edits to copies of the
// files they touch, builds the variant with those files laid over the source tree (`go build
// -overlay`, so the tree is never copied or changed), runs the scenarios that guard the broken rule
// against it as a process, and checks that the run fails on the requirement that names the bug.
//
// A defect's edits are data (fixtures/defects/<name>.yaml, read by LoadEdits, applied by
// ApplyEdits): each names a package directory, a top-level declaration in it, the text to find
// inside that declaration and what it becomes. The file is found by parsing the package, so code
// that moves between files, or lines that move within one, change no defect; a declaration that is
// gone or no longer holds the text fails with an *EditError naming the defect, the package and the
// declaration. fixtures/defects/README.md describes the format.
//
// The broken variants never reach production code: they exist only as edits, applied to
// throwaway copies of the files they touch.
package selftest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
)

// Defect is one broken variant of the reference.
type Defect struct {
	// Name names the defect, and its edit file <Name>.yaml unless Edits names another.
	Name string `yaml:"name" json:"name"`
	// Bug says, in a sentence, what the variant gets wrong (the first cut's bug).
	Bug string `yaml:"bug" json:"bug"`
	// Requirement is the requirement whose scenarios must catch the variant.
	Requirement string `yaml:"requirement" json:"requirement"`
	// Tags selects the scenarios to run (default: those tagged with Requirement).
	Tags string `yaml:"tags,omitempty" json:"tags,omitempty"`
	// Edits names the defect whose edits this one applies (default Name): one bug may break
	// several rules, each a defect of its own judged by its own requirement.
	Edits string `yaml:"edits,omitempty" json:"edits,omitempty"`
	// Tests, when set, judges the variant by the Go tests of this package (its directory from
	// the module root) instead of by scenarios: a store backend's own rules (its listening
	// connection, its pool) are proved by its tests, not by the suite, which runs on SQLite.
	// Requirement then names the part of spec/ the tests prove. The tests of
	// reference/store/postgres need the server the PG* variables name.
	Tests string `yaml:"tests,omitempty" json:"tests,omitempty"`
	// Run narrows Tests to the tests whose names it matches (go test -run).
	Run string `yaml:"run,omitempty" json:"run,omitempty"`
	// Class is the way of breaking a rule the defect stands for (one of Classes; "" counts as
	// ClassRule), so that the report can say how each way is covered across the records.
	Class string `yaml:"class,omitempty" json:"class,omitempty"`
}

// The ways of breaking a rule a defect may stand for (docs/proving.md): what each class of
// plausible bug gets wrong, whichever rule it breaks.
const (
	// ClassRule: the rule broken outright (checked the wrong way, not at all, or in the wrong
	// place).
	ClassRule = "rule"
	// ClassRestart: a verdict recorded before a restart judged again afterwards against
	// something that changed (the clock, a counter, a setting), or not recorded at all.
	ClassRestart = "restart"
	// ClassBoundary: a bound compared wrongly at equality, or counted in the wrong unit (bytes
	// for characters, one encoding for another).
	ClassBoundary = "boundary"
	// ClassShape: a wrong rule that inputs of one shape cannot tell from the right one (sizes
	// that differ, an order, a window that misses a kind of message).
	ClassShape = "shape"
	// ClassBookkeeping: state only a later request or stream sees (a slot not released, a stale
	// partial, an id on the wrong event).
	ClassBookkeeping = "bookkeeping"
	// ClassRevocation: a removal, revocation or stop that takes effect late, or not for what
	// is already in flight.
	ClassRevocation = "revocation"
	// ClassCombination: rules that hold alone and break together (approvals with parallel
	// calls, a deadline per call, a flag deep in a cause chain).
	ClassCombination = "combination"
)

// Classes are the classes a defect may name, in the report's order.
var Classes = []string{ClassRule, ClassRestart, ClassBoundary, ClassShape, ClassBookkeeping, ClassRevocation, ClassCombination}

// classOf is d's class, ClassRule when it names none.
func (d Defect) classOf() string {
	if d.Class == "" {
		return ClassRule
	}
	return d.Class
}

// editsName is the name of the defect's edit file, without .yaml.
func (d Defect) editsName() string {
	if d.Edits != "" {
		return d.Edits
	}
	return d.Name
}

// Result is the outcome for one defect.
type Result struct {
	Defect Defect `json:"defect"`
	// Caught is true when a scenario proving the requirement failed against the variant.
	Caught bool `json:"caught"`
	// CaughtBy lists the failed scenarios that prove the requirement.
	CaughtBy []string `json:"caughtBy"`
	// Failures lists every failure of the run, requirement first.
	Failures []string `json:"failures"`
	// Interrupted is true when the self-test was cancelled (a time limit, a signal) before the
	// defect was judged; Error then reads NotJudged. It is neither caught nor missed.
	Interrupted bool    `json:"interrupted,omitempty"`
	Error       string  `json:"error,omitempty"`
	Seconds     float64 `json:"seconds"`
	scenarios   int
}

// Options configure a self-test.
type Options struct {
	// Root is the source tree the variants are built from (the module root); it is only read.
	Root string
	// Defects is the directory of the manifest (defects.yaml) and the defects' edit files.
	Defects string
	// Only runs just these defects (by name).
	Only []string
	// Parallel is how many variants are built and run at once (default 2).
	Parallel int
	// Sample, when positive and smaller than the number of defects (after Only), judges just
	// that many, chosen by Seed: the same seed and manifest give the same sample, kept in
	// manifest order. Zero judges them all.
	Sample int
	Seed   uint64
	// StepTimeout bounds every wait of a step of the runs; zero is 5 s, or LOOMCHECK_STEP_TIMEOUT
	// when that is set (harness.DefaultStepTimeout).
	StepTimeout time.Duration
	Log         io.Writer
}

// Sampled is the part of defects a self-test with sample n and seed judges: all of them when n is
// not positive or not smaller than their number, else n of them chosen by a generator seeded with
// seed, in the order of defects.
//
//	part := selftest.Sampled(defects, 30, 1)
func Sampled(defects []Defect, n int, seed uint64) []Defect {
	if n <= 0 || n >= len(defects) {
		return defects
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6f6d))
	keep := make([]bool, len(defects))
	for _, i := range rng.Perm(len(defects))[:n] {
		keep[i] = true
	}
	out := make([]Defect, 0, n)
	for i, d := range defects {
		if keep[i] {
			out = append(out, d)
		}
	}
	return out
}

// NotJudged is the error of a defect the self-test was cancelled before it could judge: the clock
// ran out, not the defect's edits.
const NotJudged = "not judged: interrupted"

// Interrupted counts the results that were not judged because the self-test was cancelled.
func Interrupted(results []Result) int {
	n := 0
	for _, r := range results {
		if r.Interrupted {
			n++
		}
	}
	return n
}

// ErrManifest is a defects.yaml that cannot be used.
var ErrManifest = errors.New("selftest: bad defect manifest")

// Load reads the manifest and checks it against the edit files beside it: every defect has a
// unique name, a bug and a requirement, and an edit file that reads (see LoadEdits), and every edit
// file is some defect's.
func Load(dir string) ([]Defect, error) {
	var doc struct {
		Defects []Defect `yaml:"defects"`
	}
	if err := readManifest(dir, manifestName, &doc, ErrManifest); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	used := map[string]bool{}
	for _, d := range doc.Defects {
		if d.Name == "" || d.Requirement == "" || d.Bug == "" || seen[d.Name] || d.Name == manifestName {
			return nil, fmt.Errorf("%w: defect %q needs a unique name (not %q), a bug and a requirement", ErrManifest, d.Name, manifestName)
		}
		seen[d.Name] = true
		if !slices.Contains(Classes, d.classOf()) {
			return nil, fmt.Errorf("%w: defect %s: class %q is none of %s", ErrManifest, d.Name, d.Class, strings.Join(Classes, ", "))
		}
		if used[d.editsName()] {
			continue
		}
		if _, err := LoadEdits(dir, d.editsName()); err != nil {
			return nil, fmt.Errorf("%w: defect %s: %v", ErrManifest, d.Name, err)
		}
		used[d.editsName()] = true
	}
	stray, err := strayEditFile(dir, manifestName, used)
	if err != nil {
		return nil, err
	}
	if stray != "" {
		return nil, fmt.Errorf("%w: the edit file %s is no defect's", ErrManifest, stray)
	}
	return doc.Defects, nil
}

// readManifest decodes dir/<name>.yaml into doc, refusing a field doc does not have; a document
// that does not decode is kind (ErrManifest, ErrVariantManifest).
func readManifest(dir, name string, doc any, kind error) error {
	b, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(doc); err != nil {
		return fmt.Errorf("%w: %v", kind, err)
	}
	return nil
}

// strayEditFile is the first .yaml file of dir, other than the manifest <manifest>.yaml, that
// no entry uses (used holds the names of the edit files in use), or "" when every one is used.
func strayEditFile(dir, manifest string, used map[string]bool) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if name := strings.TrimSuffix(filepath.Base(f), ".yaml"); name != manifest && !used[name] {
			return filepath.Base(f), nil
		}
	}
	return "", nil
}

// manifestName is the manifest's file name without .yaml; every other .yaml file beside it is a
// defect's edits.
const manifestName = "defects"

// Run builds and judges every defect. It returns the results in manifest order; an error means
// the self-test could not run at all.
func Run(ctx context.Context, opt Options) ([]Result, error) {
	defects, err := Load(opt.Defects)
	if err != nil {
		return nil, err
	}
	if len(opt.Only) > 0 {
		defects = slices.DeleteFunc(defects, func(d Defect) bool { return !slices.Contains(opt.Only, d.Name) })
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 2
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.StepTimeout <= 0 {
		opt.StepTimeout = 5 * time.Second
		if os.Getenv("LOOMCHECK_STEP_TIMEOUT") != "" {
			opt.StepTimeout = harness.DefaultStepTimeout()
		}
	}
	if all := len(defects); opt.Sample > 0 && opt.Sample < all {
		defects = Sampled(defects, opt.Sample, opt.Seed)
		fmt.Fprintf(opt.Log, "sample: %d of the %d defects (seed %d)\n", len(defects), all, opt.Seed)
	}
	// The unbroken reference must pass every scenario and test the defects are judged by;
	// otherwise a "caught" defect could be a scenario or a test that fails anyway.
	if err := control(ctx, opt, defects); err != nil {
		return nil, err
	}
	if err := controlTests(ctx, opt, defects); err != nil {
		return nil, err
	}
	results := make([]Result, len(defects))
	sem := make(chan struct{}, opt.Parallel)
	var wg sync.WaitGroup
	var logMu sync.Mutex
	for i, d := range defects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			var res Result
			if ctx.Err() != nil {
				res = interrupted(d)
			} else {
				res = judge(ctx, opt, d)
			}
			res.Seconds = time.Since(start).Seconds()
			results[i] = res
			logMu.Lock()
			verdict := "CAUGHT"
			switch {
			case res.Interrupted:
				verdict = "UNJUDGED"
			case !res.Caught:
				verdict = "MISSED"
			}
			fmt.Fprintf(opt.Log, "%-7s %-36s %s %s\n", verdict, d.Name, d.Requirement, res.Error)
			logMu.Unlock()
		}()
	}
	wg.Wait()
	return results, nil
}

// ErrInterrupted is a self-test cancelled before it could judge (the control run, say).
var ErrInterrupted = errors.New("selftest: interrupted")

// ErrControl is a self-test whose unbroken reference fails the scenarios that judge the defects.
var ErrControl = errors.New("selftest: the unbroken reference fails the scenarios that judge the defects")

func tagsOf(d Defect) string {
	if d.Tags != "" {
		return d.Tags
	}
	return "@req:" + d.Requirement
}

func control(ctx context.Context, opt Options, defects []Defect) error {
	var tags []string
	for _, d := range defects {
		if d.Tests == "" {
			tags = append(tags, tagsOf(d))
		}
	}
	if len(tags) == 0 {
		return nil
	}
	// A godog tag filter: "," is "or".
	res := judge(ctx, opt, Defect{Name: "control", Tags: strings.Join(tags, ",")})
	if res.Interrupted {
		return fmt.Errorf("%w: the control run was %s", ErrInterrupted, NotJudged)
	}
	if res.Error != "" {
		return fmt.Errorf("%w: %s", ErrControl, res.Error)
	}
	if len(res.Failures) > 0 {
		return fmt.Errorf("%w: %s", ErrControl, strings.Join(res.Failures, "; "))
	}
	fmt.Fprintf(opt.Log, "control: the unbroken reference passes the %d scenarios that judge the %d defects\n", res.scenarios, len(defects))
	return nil
}

func interrupted(d Defect) Result {
	return Result{Defect: d, CaughtBy: []string{}, Failures: []string{}, Interrupted: true, Error: NotJudged}
}

// judge builds and runs one variant. A cancelled context at any point makes the result
// "not judged: interrupted", whatever step the cancellation broke.
func judge(ctx context.Context, opt Options, d Defect) (res Result) {
	defer func() {
		if ctx.Err() != nil {
			res = interrupted(d)
		}
	}()
	res = Result{Defect: d, CaughtBy: []string{}, Failures: []string{}}
	dir, err := os.MkdirTemp("", "loomcheck-defect-"+d.Name+"-*")
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	editsName := d.editsName()
	if d.Name == "control" {
		editsName = ""
	}
	if d.Tests != "" {
		judgeTests(ctx, opt, d, editsName, dir, &res)
		return res
	}
	bin, err := buildVariant(ctx, opt.Root, opt.Defects, editsName, dir)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	tags := tagsOf(d)
	rep, err := harness.Execute(ctx, harness.Options{Command: bin + " serve", Tags: tags,
		Concurrency: 2, StepTimeout: opt.StepTimeout})
	if err != nil {
		res.Error = "the run failed: " + err.Error()
		return res
	}
	if len(rep.Scenarios) == 0 {
		res.Error = "the tags " + tags + " select no scenario"
		return res
	}
	res.scenarios = len(rep.Scenarios)
	for _, sc := range rep.Scenarios {
		if sc.Status == report.HarnessError || sc.Status == report.Undefined || sc.Status == report.Pending {
			res.Failures = append(res.Failures, sc.ID+" "+string(sc.Status)+": "+sc.Message)
			continue
		}
		if sc.Status != report.Failed {
			continue
		}
		res.Failures = append(res.Failures, sc.ID+" "+sc.Message)
		if slices.Contains(sc.Requirements, d.Requirement) {
			res.Caught = true
			res.CaughtBy = append(res.CaughtBy, sc.ID)
		}
	}
	// A break of the contract is one finding of the run, not the failure of the scenarios that
	// met it: it catches the defect when a scenario of the defect's requirement met it, as the
	// run then fails on it.
	proves := map[string]bool{}
	for _, sc := range rep.Scenarios {
		proves[sc.ID] = slices.Contains(sc.Requirements, d.Requirement)
	}
	for _, f := range rep.Contract.Findings {
		res.Failures = append(res.Failures, "contract "+f.Route+" "+f.Location+": "+f.Message)
		for _, id := range f.Scenarios {
			if proves[id] {
				res.Caught = true
				res.CaughtBy = append(res.CaughtBy, id+" (contract "+f.Route+" "+f.Location+")")
				break
			}
		}
	}
	sort.Strings(res.Failures)
	return res
}

// buildVariant applies the edit file name of editsDir (none when name is empty: the unchanged
// reference) and builds cmd/loomcheck with the edited files laid over root, into dir; it returns
// the binary's path.
func buildVariant(ctx context.Context, root, editsDir, name, dir string) (string, error) {
	overlay := map[string]string{}
	if name != "" {
		var err error
		if overlay, err = edited(root, editsDir, dir, name); err != nil {
			return "", err
		}
	}
	ov := filepath.Join(dir, "overlay.json")
	b, _ := json.Marshal(map[string]any{"Replace": overlay})
	if err := os.WriteFile(ov, b, 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "loomcheck")
	if out, err := run(ctx, root, "go", "build", "-overlay", ov, "-o", bin, "./cmd/loomcheck"); err != nil {
		return "", errors.New("the variant does not build: " + lastLine(out))
	}
	return bin, nil
}

// edited applies the edits of the edit file name to copies of the files they change, in dir, and
// returns the build overlay that puts the copies in place of the originals under root: the source
// tree is never copied or changed, and the build cache serves every package the edits do not
// touch.
func edited(root, editsDir, dir, name string) (map[string]string, error) {
	edits, err := LoadEdits(editsDir, name)
	if err != nil {
		return nil, err
	}
	files, err := ApplyEdits(root, name, edits)
	if err != nil {
		return nil, fmt.Errorf("the edits do not apply: %w", err)
	}
	overlay := map[string]string{}
	for rel, b := range files {
		dst := filepath.Join(dir, "src", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return nil, err
		}
		orig, err := filepath.Abs(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		overlay[orig] = dst
	}
	return overlay, nil
}

func run(ctx context.Context, dir string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Write writes the self-test report as selftest.json and selftest.md into dir.
func Write(dir string, results []Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(map[string]any{"defects": results}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "selftest.json"), b, 0o644); err != nil {
		return err
	}
	var md strings.Builder
	caught := 0
	for _, r := range results {
		if r.Caught {
			caught++
		}
	}
	fmt.Fprintf(&md, "## Self-test: %d of %d defects caught\n\n", caught, len(results))
	if n := Interrupted(results); n > 0 {
		fmt.Fprintf(&md, "**%d defects %s**: the self-test was cancelled before it reached them; the run fails.\n\n", n, NotJudged)
	}
	writeClasses(&md, results)
	md.WriteString("| defect | the bug | caught by requirement | scenarios |\n|---|---|---|---|\n")
	for _, r := range results {
		by := strings.Join(r.CaughtBy, " ")
		switch {
		case r.Interrupted:
			by = NotJudged
		case !r.Caught:
			by = "**missed** " + r.Error
		}
		fmt.Fprintf(&md, "| %s | %s | %s | %s |\n", r.Defect.Name, strings.ReplaceAll(r.Defect.Bug, "|", "/"), r.Defect.Requirement, by)
	}
	return os.WriteFile(filepath.Join(dir, "selftest.md"), []byte(md.String()), 0o644)
}

// record is the record a requirement belongs to ("ADR 0122" for ADR0122-D1-01), or "spec" for a
// rule of spec/ alone.
func record(requirement string) string {
	if len(requirement) >= 7 && strings.HasPrefix(requirement, "ADR") {
		return "ADR " + requirement[3:7]
	}
	return "spec"
}

// writeClasses writes the table of defects caught per class and record: "caught/judged".
func writeClasses(md *strings.Builder, results []Result) {
	type cell struct{ caught, all int }
	counts := map[[2]string]*cell{}
	records := map[string]bool{}
	for _, r := range results {
		k := [2]string{r.Defect.classOf(), record(r.Defect.Requirement)}
		records[k[1]] = true
		c := counts[k]
		if c == nil {
			c = &cell{}
			counts[k] = c
		}
		c.all++
		if r.Caught {
			c.caught++
		}
	}
	cols := slices.Sorted(maps.Keys(records))
	md.WriteString("Caught of judged, by the way each defect breaks its rule and by record:\n\n| class |")
	for _, c := range cols {
		md.WriteString(" " + c + " |")
	}
	md.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, cl := range Classes {
		fmt.Fprintf(md, "| %s |", cl)
		for _, rec := range cols {
			if c := counts[[2]string{cl, rec}]; c != nil {
				fmt.Fprintf(md, " %d/%d |", c.caught, c.all)
			} else {
				md.WriteString(" |")
			}
		}
		md.WriteString("\n")
	}
	md.WriteString("\n")
}
