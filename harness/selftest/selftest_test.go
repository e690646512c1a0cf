package selftest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCancelledSelftestBlamesTheClock: defects a cancelled self-test did not reach are "not
// judged: interrupted", never "the edits do not apply".
func TestCancelledSelftestBlamesTheClock(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Root: root, Defects: filepath.Join(root, "fixtures", "defects")}
	defects, err := Load(opt.Defects)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	// The control run comes first: cancelled, the whole self-test is interrupted.
	opt.Only = []string{defects[0].Name}
	if _, err := Run(ctx, opt); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run with a cancelled context: got %v, want ErrInterrupted", err)
	}

	// A defect cancelled on the way (here: before its edits are applied) is not judged.
	res := judge(ctx, opt, defects[0])
	if !res.Interrupted || res.Error != NotJudged || res.Caught {
		t.Fatalf("judge with a cancelled context: got %+v, want interrupted and %q", res, NotJudged)
	}
	if Interrupted([]Result{res, {Defect: defects[0], Caught: true}}) != 1 {
		t.Fatal("Interrupted must count only the unjudged results")
	}
	dir := t.TempDir()
	if err := Write(dir, []Result{res}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "selftest.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), NotJudged) || strings.Contains(string(md), "do not apply") || strings.Contains(string(md), "**missed**") {
		t.Fatalf("selftest.md must say the defect was not judged:\n%s", md)
	}
}

// TestSampled: a sample is the asked number of distinct defects, in manifest order, the same for
// the same seed, another for another seed; a sample as large as the set, or none, is the set.
func TestSampled(t *testing.T) {
	var all []Defect
	for i := range 50 {
		all = append(all, Defect{Name: "d" + strings.Repeat("x", i)})
	}
	index := map[string]int{}
	for i, d := range all {
		index[d.Name] = i
	}
	a, b, c := Sampled(all, 12, 1), Sampled(all, 12, 1), Sampled(all, 12, 2)
	if len(a) != 12 {
		t.Fatalf("a sample of 12 has %d defects", len(a))
	}
	for i := 1; i < len(a); i++ {
		if index[a[i].Name] <= index[a[i-1].Name] {
			t.Fatalf("the sample is not in manifest order, or repeats a defect: %v", a)
		}
	}
	same := func(x, y []Defect) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Name != y[i].Name {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("the same seed chose another sample")
	}
	if same(a, c) {
		t.Fatal("seeds 1 and 2 chose the same sample")
	}
	for _, n := range []int{0, -1, 50, 51} {
		if got := Sampled(all, n, 1); !same(got, all) {
			t.Fatalf("a sample of %d is not the whole set (%d defects)", n, len(got))
		}
	}
	if got := Sampled(all, 49, 1); len(got) != 49 {
		t.Fatalf("a sample of 49 of 50 has %d defects", len(got))
	}
}

// TestEveryDefectApplies: each defect's edits apply to the tree as it is, and change every file
// they touch, so that a change to the reference that removes or rewrites an edited declaration is
// caught here, by the defect and the declaration's name, and not as a missed defect in the
// self-test.
func TestEveryDefectApplies(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	n := eachDefectEdit(t, root, func(name string, files map[string][]byte) {
		if len(files) == 0 {
			t.Errorf("%s: the edits change no file", name)
		}
		for rel, b := range files {
			orig, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if string(orig) == string(b) {
				t.Errorf("%s: the edited %s is the same as the original", name, rel)
			}
		}
	})
	if n < 300 {
		t.Fatalf("only %d defects' edits were checked", n)
	}
}

// eachDefectEdit applies each edit file of the named defects under root (once, however many
// defects share it) and calls fn with the files it changes; an edit file that does not load or
// apply fails the test, naming it. It returns how many edit files it applied or tried.
func eachDefectEdit(t *testing.T, root string, fn func(name string, files map[string][]byte)) int {
	t.Helper()
	dir := filepath.Join(root, "fixtures", "defects")
	defects, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range defects {
		name := d.editsName()
		if seen[name] {
			continue
		}
		seen[name] = true
		edits, err := LoadEdits(dir, name)
		if err != nil {
			t.Error(err)
			continue
		}
		files, err := ApplyEdits(root, name, edits)
		if err != nil {
			t.Error(err)
			continue
		}
		fn(name, files)
	}
	return len(seen)
}

// TestTheReportCountsEachClassByRecord: the table above the defects counts caught of judged per
// class and record, a defect naming no class counted as a broken rule; a class outside Classes is
// refused when the manifest is read.
func TestTheReportCountsEachClassByRecord(t *testing.T) {
	results := []Result{
		{Defect: Defect{Name: "a", Requirement: "ADR0122-D1-01", Class: ClassRestart}, Caught: true},
		{Defect: Defect{Name: "b", Requirement: "ADR0122-D2-01", Class: ClassRestart}},
		{Defect: Defect{Name: "c", Requirement: "ADR0035-P-02"}, Caught: true},
		{Defect: Defect{Name: "d", Requirement: "spec/nodes.md Wake-ups", Class: ClassBoundary}, Caught: true},
	}
	dir := t.TempDir()
	if err := Write(dir, results); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "selftest.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| class | ADR 0035 | ADR 0122 | spec |",
		"| rule | 1/1 | | |",
		"| restart | | 1/2 | |",
		"| boundary | | | 1/1 |",
		"| combination | | | |",
	} {
		if !strings.Contains(string(md), want+"\n") {
			t.Errorf("selftest.md lacks the line %q:\n%s", want, md)
		}
	}

	for class, ok := range map[string]bool{"restart": true, "": true, "restarts": false, "Rule": false} {
		dir := t.TempDir()
		manifest := "defects:\n  - name: x\n    bug: b\n    requirement: r\n    class: \"" + class + "\"\n"
		edit := "edits:\n  - package: reference/kernel\n    decl: Kernel.Start\n    old: a\n    new: b\n"
		if err := os.WriteFile(filepath.Join(dir, "defects.yaml"), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(edit), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(dir)
		if ok && err != nil {
			t.Errorf("class %q: %v", class, err)
		}
		if !ok && !errors.Is(err, ErrManifest) {
			t.Errorf("class %q: got %v, want ErrManifest", class, err)
		}
	}
}
