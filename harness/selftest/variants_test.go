package selftest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/harness/report"
)

// TestEveryVariantApplies: each variant's edits apply to the tree as it is and change every file
// they touch, and every edit file of fixtures/variants has its entry in the manifest, so that a
// change to the reference that moves an edited text is caught here by the variant's name, and not
// as a harness error of `loomcheck variance`.
func TestEveryVariantApplies(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "fixtures", "variants")
	variants, err := LoadVariants(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		edits, err := LoadEdits(dir, v.Name)
		if err != nil {
			t.Error(err)
			continue
		}
		files, err := ApplyEdits(root, v.Name, edits)
		if err != nil {
			t.Error(err)
			continue
		}
		if len(files) == 0 {
			t.Errorf("%s: the edits change no file", v.Name)
		}
		for rel, b := range files {
			orig, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
			if err != nil {
				t.Errorf("%s: %v", v.Name, err)
			}
			if string(orig) == string(b) {
				t.Errorf("%s: the edited %s is the same as the original", v.Name, rel)
			}
		}
	}
	if len(variants) < 4 {
		t.Fatalf("only %d variants were checked", len(variants))
	}
}

// TestLoadVariantsWantsAnEntryPerEditFile: an edit file the manifest does not name, a manifest
// entry without its edit file, and an entry that does not say what the spec leaves free are each
// refused.
func TestLoadVariantsWantsAnEntryPerEditFile(t *testing.T) {
	const edit = "edits:\n  - package: p\n    decl: F\n    old: a\n    new: b\n"
	entry := "variants:\n  - name: one\n    freedom: f\n    spec: spec/http.md\n"
	cases := map[string]map[string]string{
		"an edit file without an entry": {"variants.yaml": entry, "one.yaml": edit, "two.yaml": edit},
		"an entry without an edit file": {"variants.yaml": entry + "  - name: two\n    freedom: f\n    spec: s\n", "one.yaml": edit},
		"an entry without a freedom":    {"variants.yaml": "variants:\n  - name: one\n    spec: s\n", "one.yaml": edit},
		"an entry without a spec":       {"variants.yaml": "variants:\n  - name: one\n    freedom: f\n", "one.yaml": edit},
		"an unknown field":              {"variants.yaml": entry + "    bug: b\n", "one.yaml": edit},
	}
	for name, files := range cases {
		if _, err := LoadVariants(writeTree(t, files)); !errors.Is(err, ErrVariantManifest) {
			t.Errorf("%s: got %v, want ErrVariantManifest", name, err)
		}
	}
	got, err := LoadVariants(writeTree(t, map[string]string{"variants.yaml": entry + "    profiles: [core]\n", "one.yaml": edit}))
	if err != nil || len(got) != 1 || got[0].Name != "one" || len(got[0].Profiles) != 1 {
		t.Fatalf("a good manifest: got %+v, %v", got, err)
	}
}

// TestClassifyBlamesTheVariantOnlyForFailures: a failed scenario is a false red; an error of the
// kit, an undefined step, no scenario at all, are harness errors and never the variant's; a
// failure of a SHOULD (a warning of the run) is neither.
func TestClassifyBlamesTheVariantOnlyForFailures(t *testing.T) {
	sc := func(id string, st report.Status, reqs ...string) report.Scenario {
		return report.Scenario{ID: id, Name: "n", Status: st, Requirements: reqs, Message: "m"}
	}
	cases := []struct {
		name      string
		scenarios []report.Scenario
		warnings  []string
		want      string
		reds      int
	}{
		{"all passed", []report.Scenario{sc("a:1", report.Passed, "R1"), sc("a:2", report.NotApplicable, "R2")}, nil, Kept, 0},
		{"none ran", []report.Scenario{sc("a:1", report.Skipped, "R1"), sc("a:2", report.NotApplicable, "R2")}, nil, HarnessError, 0},
		{"a failure", []report.Scenario{sc("a:1", report.Passed, "R1"), sc("a:2", report.Failed, "R2")}, nil, FalseRed, 1},
		{"a failure beside a kit error", []report.Scenario{sc("a:1", report.HarnessError, "R1"), sc("a:2", report.Failed, "R2")}, nil, FalseRed, 1},
		{"a kit error", []report.Scenario{sc("a:1", report.HarnessError, "R1"), sc("a:2", report.Passed, "R2")}, nil, HarnessError, 0},
		{"an undefined step", []report.Scenario{sc("a:1", report.Undefined, "R1")}, nil, HarnessError, 0},
		{"no scenario", nil, nil, HarnessError, 0},
		{"a SHOULD failed", []report.Scenario{sc("a:1", report.Failed, "S1"), sc("a:2", report.Passed, "R2")}, []string{"S1"}, Kept, 0},
		{"a MUST and a SHOULD failed", []report.Scenario{sc("a:1", report.Failed, "S1", "R1")}, []string{"S1"}, FalseRed, 1},
	}
	for _, c := range cases {
		res := classify(VariantResult{FalseReds: []string{}, Errors: []string{}}, &report.Report{Scenarios: c.scenarios, Warnings: c.warnings})
		if res.Outcome != c.want || len(res.FalseReds) != c.reds {
			t.Errorf("%s: got %s with %d false reds, want %s with %d", c.name, res.Outcome, len(res.FalseReds), c.want, c.reds)
		}
	}
}

// TestWriteVariantsNamesTheOutcomes: the report says how many were kept, and names each false
// red's scenarios.
func TestWriteVariantsNamesTheOutcomes(t *testing.T) {
	dir := t.TempDir()
	results := []VariantResult{
		{Variant: Variant{Name: "one", Freedom: "f", Spec: "s"}, Outcome: Kept, Scenarios: 3, FalseReds: []string{}, Errors: []string{}},
		{Variant: Variant{Name: "two", Freedom: "f", Spec: "s"}, Outcome: FalseRed, Scenarios: 3, FalseReds: []string{"x.feature:9 a | b"}, Errors: []string{}},
	}
	if err := WriteVariants(dir, results); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "variance.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "1 of 2 kept, 1 false red") || !strings.Contains(string(md), "x.feature:9 a / b") {
		t.Fatalf("variance.md:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(dir, "variance.json")); err != nil {
		t.Fatal(err)
	}
}

// TestSelectionIsATagFilter: a variant's profiles and tags become the alternatives of one tag
// filter, so that the control run can run the union of every variant's selection.
func TestSelectionIsATagFilter(t *testing.T) {
	cases := []struct {
		v    Variant
		want string
	}{
		{Variant{}, ""},
		{Variant{Tags: "@a, @b && ~@c"}, "@a,@b && ~@c"},
		{Variant{Profiles: []string{"core", "stream"}}, "@profile:core,@profile:stream"},
		{Variant{Profiles: []string{"core"}, Tags: "@a,@b"}, "@profile:core && @a,@profile:core && @b"},
	}
	for _, c := range cases {
		if got := strings.Join(selection(c.v), ","); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.v, got, c.want)
		}
	}
}
