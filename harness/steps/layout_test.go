package steps

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/features"
)

// featureName is the path of a feature file: features/<area>/<topic>.feature, both lower case,
// the topic's words joined by underscores.
var featureName = regexp.MustCompile(`^([a-z]+)/([a-z]+(?:_[a-z]+)*)\.feature$`)

// layoutProblems says where the features and the step files do not share their names: every
// feature <area>/<topic>.feature has the step file harness/steps/<area>_<topic>.go, every step
// file other than a common one (common_<name>.go) serves a feature (a feature whose steps need
// more than one file has parts, <area>_<topic>_<part>.go), every area of the vocabulary is a
// step file and every step file registers its steps under its own name, and a step that one
// feature alone uses is in that feature's file. stepFiles are the base names of the step files
// (see stepFileNames); uses are the step texts of the features.
func layoutProblems(featureFiles, stepFiles []string, voc []Step, uses []stepUse) []string {
	var out []string
	files := map[string]bool{}
	for _, f := range stepFiles {
		files[strings.TrimSuffix(f, ".go")] = true
	}
	served := map[string]bool{}
	for _, f := range featureFiles {
		m := featureName.FindStringSubmatch(f)
		if m == nil {
			out = append(out, fmt.Sprintf("feature %s is not named <area>/<topic>.feature in lower case", f))
			continue
		}
		name := m[1] + "_" + m[2]
		served[name] = true
		if !files[name] {
			out = append(out, fmt.Sprintf("feature %s has no step file harness/steps/%s.go", f, name))
		}
	}
	registered := map[string]bool{}
	for _, st := range voc {
		registered[st.Area] = true
	}
	// ofFeature is the feature a step file serves: its own name, or a feature's name and a part
	// (<area>_<topic>_<part>.go, for a feature whose steps need more than one file).
	ofFeature := func(name string) string {
		for f := range served {
			if name == f || strings.HasPrefix(name, f+"_") {
				return f
			}
		}
		return ""
	}
	for name := range files {
		if ofFeature(name) == "" && !strings.HasPrefix(name, "common_") {
			out = append(out, fmt.Sprintf("step file harness/steps/%s.go serves no feature (name it after one, or common_<name>.go)", name))
		}
		if !registered[name] {
			out = append(out, fmt.Sprintf("step file harness/steps/%s.go registers no step under its name", name))
		}
	}
	for name := range registered {
		if !files[name] {
			out = append(out, fmt.Sprintf("steps of area %s have no file harness/steps/%s.go", name, name))
		}
	}
	// The features that use each pattern, from the patterns each distinct text matches.
	res := make([]*regexp.Regexp, len(voc))
	for i, st := range voc {
		res[i] = regexp.MustCompile(st.Pattern)
	}
	hitsOf := patternHits(res, uses)
	usersOf := make([]map[string]bool, len(voc))
	for _, u := range uses {
		file, _, _ := strings.Cut(u.where, ":")
		for _, i := range hitsOf[u.text] {
			if usersOf[i] == nil {
				usersOf[i] = map[string]bool{}
			}
			usersOf[i][strings.ReplaceAll(strings.TrimSuffix(file, ".feature"), "/", "_")] = true
		}
	}
	for i, st := range voc {
		users := usersOf[i]
		if len(users) == 1 {
			for only := range users {
				if ofFeature(st.Area) != only && served[only] {
					out = append(out, fmt.Sprintf("pattern %s is used by %s alone but lives in harness/steps/%s.go, not harness/steps/%s.go", st.Pattern, only, st.Area, only))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestFeaturesAndStepsShareNames: each feature and its step file carry the same name.
func TestFeaturesAndStepsShareNames(t *testing.T) {
	names, err := features.Files(features.FS)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 40 {
		t.Fatalf("found %d feature files; the walk found too few", len(names))
	}
	stepFiles, err := stepFileNames(".")
	if err != nil {
		t.Fatal(err)
	}
	uses, err := featureSteps(features.FS)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range layoutProblems(names, stepFiles, Vocabulary(), uses) {
		t.Error(p)
	}
}

// TestLayoutProblems: the check finds each kind of problem it names.
func TestLayoutProblems(t *testing.T) {
	voc := []Step{
		{Pattern: `^alice waits$`, Area: "agent_runs"},
		{Pattern: `^bob waits$`, Area: "common_model"},
		{Pattern: `^carol waits$`, Area: "stray"},
		{Pattern: `^dan waits$`, Area: "lost"},
		{Pattern: `^erin waits$`, Area: "agent_runs_more"},
	}
	uses := []stepUse{{"agent/loop.feature:3", "bob waits"}, {"agent/runs.feature:3", "bob waits"}, {"agent/loop.feature:4", "alice waits"}, {"agent/runs.feature:4", "erin waits"}}
	got := layoutProblems(
		[]string{"agent/runs.feature", "agent/loop.feature", "Stream-Limits.feature"},
		[]string{"agent_runs.go", "agent_runs_more.go", "common_model.go", "stray.go", "common_empty.go"},
		voc, uses)
	want := []string{
		"feature Stream-Limits.feature is not named <area>/<topic>.feature in lower case",
		"feature agent/loop.feature has no step file harness/steps/agent_loop.go",
		"pattern ^alice waits$ is used by agent_loop alone but lives in harness/steps/agent_runs.go, not harness/steps/agent_loop.go",
		"step file harness/steps/common_empty.go registers no step under its name",
		"step file harness/steps/stray.go serves no feature (name it after one, or common_<name>.go)",
		"steps of area lost have no file harness/steps/lost.go",
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// stepFileNames are the base names of the step files in dir: the files the build compiles (tests
// left out) that hold a vocabulary list (a function <name>Vocabulary), steps.go left out, and every
// common_*.go. The package's other files (the scenario, the client, the support of an area) hold
// none.
func stepFileNames(dir string) ([]string, error) {
	all, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range all {
		base := filepath.Base(name)
		if strings.HasSuffix(base, "_test.go") || base == "steps.go" {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			return nil, err
		}
		if len(vocabularyLists(f)) > 0 || strings.HasPrefix(base, "common_") {
			out = append(out, base)
		}
	}
	return out, nil
}

// vocabularyLists are the functions of f that list steps: top-level, named <name>Vocabulary.
func vocabularyLists(f *ast.File) []*ast.FuncDecl {
	var lists []*ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasSuffix(fd.Name.Name, "Vocabulary") {
			lists = append(lists, fd)
		}
	}
	return lists
}

// TestStepsAreWhereTheyAreRegistered: each step file's vocabulary lists only the steps declared
// in that file, so the area `loomcheck steps` names is where a step's code is.
func TestStepsAreWhereTheyAreRegistered(t *testing.T) {
	names, err := stepFileNames(".")
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, name := range names {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		declared := map[string]bool{}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				declared[fd.Name.Name] = true
			}
		}
		lists := vocabularyLists(f)
		if len(lists) != 1 {
			t.Errorf("%s has %d vocabulary lists, want one", name, len(lists))
			continue
		}
		ast.Inspect(lists[0].Body, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok || cl.Type != nil || len(cl.Elts) != 3 {
				return true
			}
			if sel, ok := cl.Elts[1].(*ast.SelectorExpr); ok {
				listed++
				if !declared[sel.Sel.Name] {
					t.Errorf("%s lists the step %s, declared in another file", name, sel.Sel.Name)
				}
			}
			return false
		})
	}
	if n := len(Vocabulary()); listed != n {
		t.Errorf("the step files list %d steps, the vocabulary holds %d", listed, n)
	}
}
