package mutation

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const sample = `package p

import "errors"

var errBad = errors.New("bad")

const limit = 3

func Check(n int, ok bool, s string) (int, error) {
	if n < limit && !ok {
		return 0, errBad
	}
	for i := 0; i < n; i++ {
		if i == 2 {
			continue
		}
		n += i
	}
	switch {
	case n > 10:
		break
	}
	_ = s + "x"
	return n * 2, nil
}
`

// module writes a one-package module and returns its root.
func module(t *testing.T, src string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "p"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "p", "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestGenerateProducesTheClassicOperators(t *testing.T) {
	root := module(t, sample)
	ms, err := Generate(context.Background(), root, []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, string(m.Operator)+": "+m.Change())
	}
	want := []string{
		"constant-off-by-one: limit = 3 → limit = 4",
		"logical-operator: n < limit && !ok → n < limit || !ok",
		"conditionals-boundary: n < limit → n <= limit",
		"conditionals-negation: n < limit → n >= limit",
		"removed-not: !ok → ok",
		"removed-return: return 0, errBad → (removed)",
		"constant-off-by-one: return 0, errBad → return 1, errBad",
		"constant-off-by-one: i := 0 → i := 1",
		"conditionals-boundary: i < n → i <= n",
		"conditionals-negation: i < n → i >= n",
		"increment-decrement: i++ → i--",
		"conditionals-negation: i == 2 → i != 2",
		"constant-off-by-one: i == 2 → i == 3",
		"removed-continue: continue → (removed)",
		"arithmetic: n += i → n -= i",
		"conditionals-boundary: n > 10 → n >= 10",
		"conditionals-negation: n > 10 → n <= 10",
		"constant-off-by-one: n > 10 → n > 11",
		"arithmetic: n * 2 → n / 2",
		"constant-off-by-one: n * 2 → n * 3",
	}
	if !slices.Equal(got, want) {
		t.Errorf("mutants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The string concatenation is not mutated (it would not compile), nor the break that ends its
	// case (removing it changes nothing).
	src, _ := os.ReadFile(filepath.Join(root, "p", "p.go"))
	for _, m := range ms {
		if m.File != "p/p.go" || m.Package != "p" || m.Func == "" || len(m.ID) != 12 {
			t.Errorf("mutant %+v: bad identity fields", m)
		}
		out := string(m.Apply(src))
		if out == string(src) {
			t.Errorf("%s: Apply changed nothing", m)
		}
	}
}

func TestIdentityDoesNotMoveWithUnrelatedLines(t *testing.T) {
	a, err := Generate(context.Background(), module(t, sample), []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	shifted := strings.Replace(sample, "const limit = 3\n", "const limit = 3\n\n// A comment.\nvar unrelated = 1\n\n", 1)
	b, err := Generate(context.Background(), module(t, shifted), []string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, m := range b {
		ids[m.ID] = m.Line
	}
	for _, m := range a {
		line, ok := ids[m.ID]
		if !ok {
			t.Errorf("%s: id %s lost after unrelated lines were added", m, m.ID)
		} else if m.Func != "const limit" && line != m.Line+4 {
			t.Errorf("%s: line %d after the shift, want %d", m, line, m.Line+4)
		}
	}
}

func TestSampleIsDeterministicAndPerPackage(t *testing.T) {
	var ms []Mutant
	for i := range 50 {
		pkg := "a"
		if i%2 == 1 {
			pkg = "b"
		}
		ms = append(ms, Mutant{ID: identity(pkg, "f", Arithmetic, "x", "y", i), Package: pkg})
	}
	s1, s2, s3 := Sample(ms, 5, 1), Sample(ms, 5, 1), Sample(ms, 5, 2)
	if !slices.EqualFunc(s1, s2, func(a, b Mutant) bool { return a.ID == b.ID }) {
		t.Error("the same seed picked different mutants")
	}
	if slices.EqualFunc(s1, s3, func(a, b Mutant) bool { return a.ID == b.ID }) {
		t.Error("another seed picked the same mutants")
	}
	n := map[string]int{}
	for _, m := range s1 {
		n[m.Package]++
	}
	if n["a"] != 5 || n["b"] != 5 {
		t.Errorf("per package: %v, want 5 each", n)
	}
}

func TestCoverageCountsOnlyTheKillingSuite(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "c.out")
	os.WriteFile(prof, []byte("mode: set\nexample.com/m/p/p.go:10.1,12.2 1 1\nexample.com/m/p/p.go:20.1,22.2 1 0\nexample.com/m/q/q.go:5.1,6.2 1 0\n"), 0o644)
	c := &coverage{module: "example.com/m", blocks: map[string][]block{}}
	if err := c.read(prof, "q"); err != nil {
		t.Fatal(err)
	}
	// The same lines measured by r's tests, which cannot kill q's mutants: r's hits do not count.
	os.WriteFile(prof, []byte("mode: set\nexample.com/m/p/p.go:20.1,22.2 1 1\nexample.com/m/q/q.go:5.1,6.2 1 1\n"), 0o644)
	if err := c.read(prof, "r"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		m    Mutant
		want bool
	}{
		{Mutant{File: "p/p.go", Package: "q", Line: 11, Col: 3}, true},
		{Mutant{File: "p/p.go", Package: "q", Line: 21, Col: 3}, false},
		{Mutant{File: "p/p.go", Package: "q", Line: 3, Col: 1}, true}, // in no block: a package-level declaration
		{Mutant{File: "q/q.go", Package: "q", Line: 5, Col: 2}, false},
	}
	for _, c2 := range cases {
		if got := c.covers(c2.m); got != c2.want {
			t.Errorf("covers(%+v) = %v, want %v", c2.m, got, c2.want)
		}
	}
}

func TestFailingTestAndBuildFailureAreRead(t *testing.T) {
	out := []byte("--- FAIL: TestConformance (1.2s)\n    --- FAIL: TestConformance/history/restart (0.3s)\nFAIL\n")
	if got := failingTest(out); got != "TestConformance/history/restart" {
		t.Errorf("failingTest = %q", got)
	}
	if !buildFailed([]byte("FAIL\tgithub.com/x/y [build failed]\n")) || buildFailed(out) {
		t.Error("buildFailed misreads")
	}
}

// TestEquivalentFile checks fixtures/mutation/equivalent.yaml against the reference as it is:
// every entry names exactly one mutant the generator produces, gives a reason, and, in a security
// or durability package, names a test that exists.
func TestEquivalentFile(t *testing.T) {
	root := filepath.Join("..", "..")
	eq, err := LoadEquivalent(filepath.Join(root, "fixtures", "mutation", "equivalent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(eq) == 0 {
		return
	}
	// The packages mutated by default, and any other an entry names (a package judged on its own
	// with --packages).
	pkgs := slices.Clone(Packages)
	for _, e := range eq {
		if dir := path.Dir(e.File); !slices.Contains(pkgs, dir) {
			pkgs = append(pkgs, dir)
		}
	}
	ms, err := Generate(context.Background(), root, pkgs)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eq {
		var n int
		for _, m := range ms {
			if e.Matches(m) {
				n++
			}
		}
		switch {
		case n == 0:
			t.Errorf("%s: no mutant the generator produces matches the entry", e)
		case n > 1:
			t.Errorf("%s: %d mutants match; give the occurrence", e, n)
		}
		if len(strings.Fields(e.Reason)) < 4 {
			t.Errorf("%s: no reason (or a one-word one) why it cannot change behaviour", e)
		}
		if InSecurityPath(e.File) && e.Test == "" {
			t.Errorf("%s: an entry in a security or durability path must name the test that proves it", e)
		}
		if e.Test != "" && !testExists(t, root, e.Test) {
			t.Errorf("%s: test %q not found", e, e.Test)
		}
	}
}

// testExists reports whether "dir.TestName" names a test function in dir's _test.go files.
func testExists(t *testing.T, root, name string) bool {
	dot := strings.LastIndex(name, ".")
	if dot < 0 {
		return false
	}
	dir, fn := name[:dot], name[dot+1:]
	files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*_test.go"))
	re := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(fn) + `\(`)
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && re.Match(b) {
			return true
		}
	}
	return false
}

func TestOnlyTheProfilesThatRanAMutantJudgeIt(t *testing.T) {
	dir := t.TempDir()
	c := &coverage{module: "example.com/m", blocks: map[string][]block{}}
	for run, text := range map[string]string{
		conformanceRun("core"):   "mode: set\nexample.com/m/p/p.go:10.1,12.2 1 1\nexample.com/m/p/p.go:20.1,22.2 1 0\n",
		conformanceRun("stream"): "mode: set\nexample.com/m/p/p.go:10.1,12.2 1 1\nexample.com/m/p/p.go:20.1,22.2 1 0\nexample.com/m/p/p.go:30.1,32.2 1 1\n",
		conformanceRun("agent"):  "mode: set\nexample.com/m/p/p.go:10.1,12.2 1 0\n",
	} {
		prof := filepath.Join(dir, "c.out")
		if err := os.WriteFile(prof, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.read(prof, run); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{"agent", "core", "stream"}
	cases := []struct {
		line int
		want []string
	}{
		{11, []string{"core", "stream"}},
		{21, nil},                                // measured, never executed
		{31, []string{"stream"}},                 // measured by one profile only
		{3, []string{"agent", "core", "stream"}}, // in no block: evaluated on start, judged by all
	}
	for _, c2 := range cases {
		m := Mutant{File: "p/p.go", Package: "p", Line: c2.line, Col: 3}
		if got := c.profiles(m, all); !slices.Equal(got, c2.want) {
			t.Errorf("line %d: profiles = %v, want %v", c2.line, got, c2.want)
		}
		if got, want := c.covers(m), len(c2.want) > 0; got != want {
			t.Errorf("line %d: covers = %v, want %v", c2.line, got, want)
		}
	}
	if got, want := conformancePattern([]string{"core", "a.b"}), `^TestConformance$/^(core|a\.b)$`; got != want {
		t.Errorf("conformancePattern = %q, want %q", got, want)
	}
}

func TestLimitAddsTheProfilesRunTogether(t *testing.T) {
	j := &judge{profiles: []string{"core", "stream"}}
	took := map[string]time.Duration{
		conformanceRun("core"): 30 * time.Second, conformanceRun("stream"): 15 * time.Second, "p": time.Second}
	if got := j.limit(took, []string{"core", "stream"}); got != 135*time.Second {
		t.Errorf("two profiles: %v, want 2m15s (three times 45 s)", got)
	}
	if got := j.limit(took, []string{"stream"}); got != 60*time.Second {
		t.Errorf("one short profile: %v, want the 60 s floor", got)
	}
	if got := j.limit(took, []string{"p"}); got != 30*time.Second {
		t.Errorf("a package's tests: %v, want the 30 s floor", got)
	}
	j.timeout = time.Minute
	if got := j.limit(took, []string{"core", "stream"}); got != time.Minute {
		t.Errorf("a set timeout: %v, want it", got)
	}
}
