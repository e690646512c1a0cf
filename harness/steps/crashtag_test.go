package steps

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	gherkin "github.com/cucumber/gherkin/go/v42"
	messages "github.com/cucumber/messages/go/v34"

	"github.com/loomcheck/loomcheck/features"
)

// TestScenariosThatRestartAreTaggedCrash: a scenario with a step that crashes, stops or restarts
// the system carries @crash, so that a run against a system the kit cannot restart (a remote
// target) reports it not applicable instead of judging it on a system that was never restarted.
// Which steps restart is read from the code: a step whose method reaches a call of the driver's
// Crash, Restart or Stop, through the functions of this package (matched by name, so the test
// errs towards asking for the tag).
func TestScenariosThatRestartAreTaggedCrash(t *testing.T) {
	reach, err := reachesDriverRestart(".")
	if err != nil {
		t.Fatal(err)
	}
	var restarting []*regexp.Regexp
	s := &scenario{}
	s.areas = newAreas(s)
	for _, a := range s.areas.vocabulary() {
		for _, d := range a.steps {
			name := methodName(d.fn)
			if name == "" {
				t.Fatalf("step %q of %s: its function is not a named method, so what it does cannot be read", d.pattern, a.name)
			}
			if reach[name] {
				restarting = append(restarting, regexp.MustCompile(d.pattern))
			}
		}
	}
	if len(restarting) == 0 {
		t.Fatal("no step restarts the system: the reading of the code is broken")
	}
	scs, err := featureScenarios(features.FS)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, sc := range scs {
		for _, st := range sc.steps {
			if !slices.ContainsFunc(restarting, func(re *regexp.Regexp) bool { return re.MatchString(st) }) {
				continue
			}
			checked++
			if !slices.Contains(sc.tags, "@crash") {
				t.Errorf("the scenario %q (its first step at %s) restarts the system (%q) without the @crash tag", sc.name, sc.where, st)
			}
			break
		}
	}
	if checked == 0 {
		t.Fatal("no scenario restarts the system: the matching of steps is broken")
	}
}

// methodName is the name of the method a step's function value is bound to ("" for a closure).
func methodName(fn any) string {
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer())
	if f == nil {
		return ""
	}
	name := strings.TrimSuffix(f.Name(), "-fm")
	if strings.Contains(name, ".func") {
		return ""
	}
	return name[strings.LastIndex(name, ".")+1:]
}

// reachesDriverRestart reads the non-test Go files of dir and returns the names of the functions
// and methods that call a driver's Crash, Restart or Stop (x.drv.Crash(), drv.Restart(ctx)), or
// call, or take as a value, an unexported function of that name that does, however deep. The scenario's
// teardown, which stops the system once the scenario has ended, is left out.
func reachesDriverRestart(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	uses := map[string]map[string]bool{} // function name -> the names it calls or refers to
	reach := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if name == "teardown" {
				continue // stops the system once the scenario has ended
			}
			if uses[name] == nil {
				uses[name] = map[string]bool{}
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if isDriverRestart(n) {
						reach[name] = true
					}
				case *ast.Ident:
					if ast.IsExported(n.Name) {
						break // the run's entry points and the fields of answers, not step helpers
					}
					uses[name][n.Name] = true
				}
				return true
			})
		}
	}
	for changed := true; changed; {
		changed = false
		for name, used := range uses {
			if reach[name] {
				continue
			}
			for u := range used {
				if reach[u] {
					reach[name], changed = true, true
					break
				}
			}
		}
	}
	return reach, nil
}

// isDriverRestart reports whether sel is drv.Crash, drv.Restart or drv.Stop on a value named drv
// (a variable or a field).
func isDriverRestart(sel *ast.SelectorExpr) bool {
	switch sel.Sel.Name {
	case "Crash", "Restart", "Stop":
	default:
		return false
	}
	switch x := sel.X.(type) {
	case *ast.Ident:
		return x.Name == "drv"
	case *ast.SelectorExpr:
		return x.Sel.Name == "drv"
	}
	return false
}

// featureScenario is one scenario of a feature as godog runs it (an outline once per example
// row): where its first step is, its name, its tags (the feature's included) and its step texts.
type featureScenario struct {
	where, name string
	tags        []string
	steps       []string
}

// featureScenarios reads the scenarios of the *.feature files of fsys, outlines expanded.
func featureScenarios(fsys fs.FS) ([]featureScenario, error) {
	names, err := features.Files(fsys)
	if err != nil {
		return nil, err
	}
	var out []featureScenario
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ids := (&messages.Incrementing{}).NewId
		doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(b), ids)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		lines := stepLines(doc)
		for _, p := range gherkin.Pickles(*doc, name, ids) {
			sc := featureScenario{where: name, name: p.Name}
			if len(p.Steps) > 0 && len(p.Steps[0].AstNodeIds) > 0 {
				sc.where = fmt.Sprintf("%s:%d", name, lines[p.Steps[0].AstNodeIds[0]])
			}
			for _, tg := range p.Tags {
				sc.tags = append(sc.tags, tg.Name)
			}
			for _, st := range p.Steps {
				sc.steps = append(sc.steps, st.Text)
			}
			out = append(out, sc)
		}
	}
	return out, nil
}

// TestOwnIDs: a scenario on a shared target appends its nonce to what it chooses, keeping a
// well-formed id well-formed and a malformed one malformed; alone on its system it changes
// nothing; an id not chosen stays unchosen.
func TestOwnIDs(t *testing.T) {
	alone := &scenario{}
	if got := alone.own("m-42"); got != "m-42" {
		t.Errorf("alone: %q", got)
	}
	shared := &scenario{nonce: "aB3xYz9Q17"}
	for _, id := range []string{"c1", "run-7", "x.y_z"} {
		if got := shared.own(id); got != id+"-aB3xYz9Q17" || !validID(got) {
			t.Errorf("shared: %q became %q", id, got)
		}
	}
	for _, id := range []string{"bad~id", "-lead", "sp ace"} {
		if got := shared.own(id); validID(got) {
			t.Errorf("shared: malformed %q became well-formed %q", id, got)
		}
	}
	if got := shared.own(""); got != "" {
		t.Errorf("shared: an unchosen id became %q", got)
	}
	// Near a bound the length is what is tested: it is kept, and so is the id's class.
	for _, c := range []struct {
		n    int
		fill string
	}{{84, "a"}, {85, "a"}, {96, "b"}, {97, "b"}, {128, "c"}, {129, "c"}} {
		id := strings.Repeat(c.fill, c.n)
		got := shared.own(id)
		wantLen := c.n
		if c.n+len("-aB3xYz9Q17") <= ownKeepsLength {
			wantLen = c.n + len("-aB3xYz9Q17")
		}
		if len(got) != wantLen || !strings.HasSuffix(got, "-aB3xYz9Q17") || validID(got) != validID(id) {
			t.Errorf("shared: %d bytes became %q (%d bytes)", c.n, got, len(got))
		}
	}
	if got := shared.own(strings.Repeat("c", 120) + "~~~~~~~~~~~~"); !strings.HasSuffix(got, "~-aB3xYz9Q17") {
		t.Errorf("shared: a long id whose tail is malformed lost its tail: %q", got)
	}
}
