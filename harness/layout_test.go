package harness

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
// feature <area>/<topic>.feature has the step file steps_<area>_<topic>.go, every step file other
// than a common one (steps_common_<name>.go) serves a feature (a feature whose steps need more
// than one file has parts, steps_<area>_<topic>_<part>.go), every area of the vocabulary is a
// step file and every step file registers its steps under its own name, and a step that one
// feature alone uses is in that feature's file. stepFiles are the base names of the step files
// (steps_*.go, tests and steps.go left out); uses are the step texts of the features.
func layoutProblems(featureFiles, stepFiles []string, voc []Step, uses []stepUse) []string {
	var out []string
	files := map[string]bool{}
	for _, f := range stepFiles {
		files[strings.TrimSuffix(strings.TrimPrefix(f, "steps_"), ".go")] = true
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
			out = append(out, fmt.Sprintf("feature %s has no step file harness/steps_%s.go", f, name))
		}
	}
	registered := map[string]bool{}
	for _, st := range voc {
		registered[st.Area] = true
	}
	// ofFeature is the feature a step file serves: its own name, or a feature's name and a part
	// (steps_<area>_<topic>_<part>.go, for a feature whose steps need more than one file).
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
			out = append(out, fmt.Sprintf("step file harness/steps_%s.go serves no feature (name it after one, or steps_common_<name>.go)", name))
		}
		if !registered[name] {
			out = append(out, fmt.Sprintf("step file harness/steps_%s.go registers no step under its name", name))
		}
	}
	for name := range registered {
		if !files[name] {
			out = append(out, fmt.Sprintf("steps of area %s have no file harness/steps_%s.go", name, name))
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
					out = append(out, fmt.Sprintf("pattern %s is used by %s alone but lives in harness/steps_%s.go, not harness/steps_%s.go", st.Pattern, only, st.Area, only))
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
	all, err := filepath.Glob("steps_*.go")
	if err != nil {
		t.Fatal(err)
	}
	var stepFiles []string
	for _, f := range all {
		if !strings.HasSuffix(f, "_test.go") {
			stepFiles = append(stepFiles, f)
		}
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
		[]string{"steps_agent_runs.go", "steps_agent_runs_more.go", "steps_common_model.go", "steps_stray.go", "steps_common_empty.go"},
		voc, uses)
	want := []string{
		"feature Stream-Limits.feature is not named <area>/<topic>.feature in lower case",
		"feature agent/loop.feature has no step file harness/steps_agent_loop.go",
		"pattern ^alice waits$ is used by agent_loop alone but lives in harness/steps_agent_runs.go, not harness/steps_agent_loop.go",
		"step file harness/steps_common_empty.go registers no step under its name",
		"step file harness/steps_stray.go serves no feature (name it after one, or steps_common_<name>.go)",
		"steps of area lost have no file harness/steps_lost.go",
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestStepsAreWhereTheyAreRegistered: each step file's vocabulary lists only the steps declared
// in that file, so the area `loomcheck steps` names is where a step's code is.
func TestStepsAreWhereTheyAreRegistered(t *testing.T) {
	all, err := filepath.Glob("steps_*.go")
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, name := range all {
		if strings.HasSuffix(name, "_test.go") || name == "steps.go" {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		declared := map[string]bool{}
		var lists []*ast.FuncDecl
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				declared[fd.Name.Name] = true
				if fd.Recv == nil && strings.HasSuffix(fd.Name.Name, "Vocabulary") {
					lists = append(lists, fd)
				}
			}
		}
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
