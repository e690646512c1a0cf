package selftest

// Spec-allowed variants: the mirror image of the defects. A variant is a change of the reference
// that the spec permits (another form of a value it leaves free, a client that retries), written
// in the defects' edit format (fixtures/variants/<name>.yaml) and named in a manifest
// (variants.yaml) with what the spec leaves free and where it says so. RunVariants builds each one
// and runs the scenarios of the profiles it names against it: a variant must stay conformant. A
// scenario that fails against it is a false red, a verdict the spec does not back, which costs a
// fair implementer as much as a false green costs a user.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
)

// Variant is one spec-allowed change of the reference.
type Variant struct {
	// Name names the variant and its edit file <Name>.yaml.
	Name string `yaml:"name" json:"name"`
	// Freedom says, in a sentence, what the spec leaves free that the variant chooses otherwise
	// than the reference does.
	Freedom string `yaml:"freedom" json:"freedom"`
	// Spec is where the spec leaves it free ("spec/http.md, Conventions").
	Spec string `yaml:"spec" json:"spec"`
	// Profiles are the profiles whose scenarios run against the variant (none: all of them).
	Profiles []string `yaml:"profiles,omitempty" json:"profiles,omitempty"`
	// Tags narrows the run further with a tag filter (harness.ParseTagExpr; none: every
	// scenario of the profiles).
	Tags string `yaml:"tags,omitempty" json:"tags,omitempty"`
}

// Outcomes of a variant.
const (
	// Kept: every scenario that ran passed against the variant.
	Kept = "kept"
	// FalseRed: a scenario failed against a variant the spec allows.
	FalseRed = "false red"
	// HarnessError: the variant could not be judged (its edits do not apply, it does not build
	// or start, the run broke, or a scenario met an error of the kit). Never the variant's fault.
	HarnessError = "harness error"
	// Unjudged: the run was cancelled before the variant was judged.
	Unjudged = "not judged"
)

// VariantResult is the outcome for one variant.
type VariantResult struct {
	Variant Variant `json:"variant"`
	// Outcome is Kept, FalseRed, HarnessError or Unjudged.
	Outcome string `json:"outcome"`
	// Scenarios is how many scenarios ran (neither skipped, by the selection, nor not
	// applicable).
	Scenarios int `json:"scenarios"`
	// FalseReds lists the scenarios that failed against the variant, each with its failure.
	FalseReds []string `json:"falseReds"`
	// Errors lists the scenarios that met an error of the kit (or were undefined or pending).
	Errors  []string `json:"errors"`
	Error   string   `json:"error,omitempty"`
	Seconds float64  `json:"seconds"`
}

// ErrVariantManifest is a variants.yaml that cannot be used.
var ErrVariantManifest = errors.New("selftest: bad variant manifest")

// variantManifest is the variants' manifest file name without .yaml.
const variantManifest = "variants"

// LoadVariants reads the manifest of dir and checks it against the edit files beside it, as Load
// does for defects: every variant has a unique name, a freedom and a spec section, and an edit
// file that reads; every edit file is some variant's.
func LoadVariants(dir string) ([]Variant, error) {
	var doc struct {
		Variants []Variant `yaml:"variants"`
	}
	if err := readManifest(dir, variantManifest, &doc, ErrVariantManifest); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, v := range doc.Variants {
		if v.Name == "" || v.Freedom == "" || v.Spec == "" || seen[v.Name] || v.Name == variantManifest {
			return nil, fmt.Errorf("%w: variant %q needs a unique name (not %q), a freedom and a spec section", ErrVariantManifest, v.Name, variantManifest)
		}
		seen[v.Name] = true
		if _, err := LoadEdits(dir, v.Name); err != nil {
			return nil, fmt.Errorf("%w: variant %s: %v", ErrVariantManifest, v.Name, err)
		}
	}
	stray, err := strayEditFile(dir, variantManifest, seen)
	if err != nil {
		return nil, err
	}
	if stray != "" {
		return nil, fmt.Errorf("%w: the edit file %s is no variant's: name it in %s.yaml", ErrVariantManifest, stray, variantManifest)
	}
	return doc.Variants, nil
}

// VariantOptions configure a run of the variants.
type VariantOptions struct {
	// Root is the source tree the variants are built from (the module root); it is only read.
	Root string
	// Variants is the directory of the manifest (variants.yaml) and the variants' edit files.
	Variants string
	// Only runs just these variants (by name).
	Only []string
	// Parallel is how many variants are built and run at once (default 1: each run already
	// runs several scenarios at once).
	Parallel int
	// StepTimeout bounds every wait of a step; zero is harness.DefaultStepTimeout. A false red
	// costs as much as a missed defect, so the variants get the suite's own patience, not the
	// self-test's shorter one.
	StepTimeout time.Duration
	Log         io.Writer
}

// ErrVariantControl is a run whose unchanged reference fails the scenarios the variants are
// judged by: a failure against a variant would then prove nothing about the variant.
var ErrVariantControl = errors.New("selftest: the unchanged reference fails the scenarios that judge the variants")

// RunVariants builds and judges every variant, after a control run of the unchanged reference
// over the same scenarios. It returns the results in manifest order; an error means the variants
// could not be judged at all.
func RunVariants(ctx context.Context, opt VariantOptions) ([]VariantResult, error) {
	variants, err := LoadVariants(opt.Variants)
	if err != nil {
		return nil, err
	}
	if len(opt.Only) > 0 {
		variants = slices.DeleteFunc(variants, func(v Variant) bool { return !slices.Contains(opt.Only, v.Name) })
	}
	if len(variants) == 0 {
		return nil, fmt.Errorf("%w: no variant selected", ErrVariantManifest)
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 1
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if err := variantControl(ctx, opt, variants); err != nil {
		return nil, err
	}
	results := make([]VariantResult, len(variants))
	sem := make(chan struct{}, opt.Parallel)
	var wg sync.WaitGroup
	var logMu sync.Mutex
	for i, v := range variants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			res := judgeVariant(ctx, opt, v, v.Name)
			res.Seconds = time.Since(start).Seconds()
			results[i] = res
			logMu.Lock()
			fmt.Fprintf(opt.Log, "%-13s %-32s %d scenarios %s\n", strings.ToUpper(res.Outcome), v.Name, res.Scenarios, res.Error)
			for _, f := range res.FalseReds {
				fmt.Fprintf(opt.Log, "    %s\n", f)
			}
			logMu.Unlock()
		}()
	}
	wg.Wait()
	return results, nil
}

// variantControl runs the unchanged reference over the union of the variants' selections.
func variantControl(ctx context.Context, opt VariantOptions, variants []Variant) error {
	union := Variant{Name: "control"}
	var alts []string
	for _, v := range variants {
		a := selection(v)
		if a == nil {
			alts = nil // one variant runs everything
			break
		}
		alts = append(alts, a...)
	}
	union.Tags = strings.Join(alts, ",")
	res := judgeVariant(ctx, opt, union, "")
	switch res.Outcome {
	case Unjudged:
		return fmt.Errorf("%w: the control run was %s", ErrInterrupted, NotJudged)
	case HarnessError:
		return fmt.Errorf("%w: %s %s", ErrVariantControl, res.Error, strings.Join(res.Errors, "; "))
	case FalseRed:
		return fmt.Errorf("%w: %s", ErrVariantControl, strings.Join(res.FalseReds, "; "))
	}
	fmt.Fprintf(opt.Log, "control: the unchanged reference passes the %d scenarios that judge the %d variants\n", res.Scenarios, len(variants))
	return nil
}

// selection is the variant's selection as the alternatives of a tag filter (harness.ParseTagExpr:
// terms joined by "&&", alternatives by ","): each profile's tag and each alternative of its
// tags; nil when it selects every scenario.
func selection(v Variant) []string {
	var tags []string
	if strings.TrimSpace(v.Tags) != "" {
		for _, a := range strings.Split(v.Tags, ",") {
			tags = append(tags, strings.TrimSpace(a))
		}
	}
	if len(v.Profiles) == 0 {
		return tags
	}
	var out []string
	for _, p := range v.Profiles {
		if len(tags) == 0 {
			out = append(out, "@profile:"+p)
		}
		for _, a := range tags {
			out = append(out, "@profile:"+p+" && "+a)
		}
	}
	return out
}

// judgeVariant builds the variant (the unchanged reference when editsName is empty) and runs its
// scenarios against it.
func judgeVariant(ctx context.Context, opt VariantOptions, v Variant, editsName string) (res VariantResult) {
	res = VariantResult{Variant: v, FalseReds: []string{}, Errors: []string{}}
	defer func() {
		if ctx.Err() != nil {
			res = VariantResult{Variant: v, Outcome: Unjudged, FalseReds: []string{}, Errors: []string{}, Error: NotJudged}
		}
	}()
	fail := func(msg string) VariantResult {
		res.Outcome, res.Error = HarnessError, msg
		return res
	}
	dir, err := os.MkdirTemp("", "loomcheck-variant-"+v.Name+"-*")
	if err != nil {
		return fail(err.Error())
	}
	defer os.RemoveAll(dir)
	bin, err := buildVariant(ctx, opt.Root, opt.Variants, editsName, dir)
	if err != nil {
		return fail(err.Error())
	}
	// The run is handed its selection as a tag filter as well as its profiles, so that it walks
	// only the scenarios it judges rather than skipping every other profile's one by one.
	rep, err := harness.Execute(ctx, harness.Options{Command: bin + " serve", Tags: strings.Join(selection(v), ","), Profiles: v.Profiles,
		StepTimeout: opt.StepTimeout, Describe: "variant " + v.Name})
	switch {
	case err != nil:
		return fail("the run failed: " + err.Error())
	case rep.Unstarted != "":
		return fail("the variant did not start: " + rep.Unstarted)
	}
	return classify(res, rep)
}

// classify sorts the scenarios of a variant's run: a failure of a MUST (one whose requirements
// are not all among the run's SHOULD-level warnings) is a false red; an error of the kit, an
// undefined or pending step, is the kit's and not the variant's.
func classify(res VariantResult, rep *report.Report) VariantResult {
	for _, sc := range rep.Scenarios {
		if sc.Status != report.Skipped && sc.Status != report.NotApplicable {
			res.Scenarios++
		}
		switch sc.Status {
		case report.HarnessError, report.Undefined, report.Pending:
			res.Errors = append(res.Errors, sc.ID+" "+string(sc.Status)+": "+sc.Message)
		case report.Failed:
			warning := len(sc.Requirements) > 0
			for _, r := range sc.Requirements {
				warning = warning && slices.Contains(rep.Warnings, r)
			}
			if !warning {
				res.FalseReds = append(res.FalseReds, sc.ID+" "+sc.Name+": "+sc.Message)
			}
		}
	}
	sort.Strings(res.FalseReds)
	sort.Strings(res.Errors)
	switch {
	case len(res.FalseReds) > 0:
		res.Outcome = FalseRed
	case len(res.Errors) > 0:
		res.Outcome, res.Error = HarnessError, fmt.Sprintf("%d scenarios met an error of the kit", len(res.Errors))
	case res.Scenarios == 0:
		res.Outcome, res.Error = HarnessError, "the selection ran no scenario"
	default:
		res.Outcome = Kept
	}
	return res
}

// WriteVariants writes the variants' report as variance.json and variance.md into dir.
func WriteVariants(dir string, results []VariantResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(map[string]any{"variants": results}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "variance.json"), b, 0o644); err != nil {
		return err
	}
	count := map[string]int{}
	for _, r := range results {
		count[r.Outcome]++
	}
	var md strings.Builder
	fmt.Fprintf(&md, "## Variants: %d of %d kept, %d false red, %d harness errors, %d not judged\n\n",
		count[Kept], len(results), count[FalseRed], count[HarnessError], count[Unjudged])
	md.WriteString("| variant | what the spec leaves free | where | scenarios | outcome |\n|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "/"), "\n", " ") }
	for _, r := range results {
		out := r.Outcome
		switch r.Outcome {
		case FalseRed:
			out = "**false red**: " + cell(strings.Join(r.FalseReds, "; "))
		case HarnessError, Unjudged:
			out += ": " + cell(r.Error+" "+strings.Join(r.Errors, "; "))
		}
		fmt.Fprintf(&md, "| %s | %s | %s | %d | %s |\n", r.Variant.Name, cell(r.Variant.Freedom), cell(r.Variant.Spec), r.Scenarios, out)
	}
	return os.WriteFile(filepath.Join(dir, "variance.md"), []byte(md.String()), 0o644)
}
