package oracle

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/loomcheck/loomcheck"

// imports returns the module-local packages the non-test Go files of dir import (build tags are
// ignored: a file behind any tag counts).
func imports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == module || strings.HasPrefix(p, module+"/") {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestKitNeverImportsReference fails when a non-test package under harness/ imports a package of
// reference/, directly or through any other package of the module: the kit computes what it
// expects from spec/ (this package), never from the engine it judges. Test files may run the
// reference as a system under test. Nothing under harness/ is exempt.
func TestKitNeverImportsReference(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	err = filepath.WalkDir(filepath.Join(root, "harness"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			pkgs = append(pkgs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 5 {
		t.Fatalf("found only %d directories under harness/", len(pkgs))
	}
	reached := map[string]bool{}
	for _, dir := range pkgs {
		rel, _ := filepath.Rel(root, dir)
		// Walk every module-local import, breadth first, remembering how it was reached.
		via := map[string]string{}
		queue := []string{}
		for _, p := range imports(t, dir) {
			if _, ok := via[p]; !ok {
				via[p] = rel
				queue = append(queue, p)
			}
		}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			reached[p] = true
			sub := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
			if sub == "reference" || strings.HasPrefix(sub, "reference/") {
				t.Errorf("%s imports %s (through %s)", rel, p, via[p])
				continue
			}
			for _, q := range imports(t, filepath.Join(root, filepath.FromSlash(sub))) {
				if _, ok := via[q]; !ok {
					via[q] = sub
					queue = append(queue, q)
				}
			}
		}
	}
	// The walk must have read the imports: the kit builds on spec/ and its own world.
	for _, p := range []string{module + "/spec", module + "/harness/world", module + "/harness/oracle"} {
		if !reached[p] {
			t.Errorf("the import walk never reached %s: it reads no imports", p)
		}
	}
}

// TestKitBuildNeverImportsReference asks the go command what the kit's packages are built from
// (`go list -deps ./harness/...`, with the build tags of this build) and fails on any package
// of reference/ among them.
func TestKitBuildNeverImportsReference(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(goBin, "list", "-deps", "./harness/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./harness/...: %v", err)
	}
	deps := strings.Fields(string(out))
	var kit int
	for _, p := range deps {
		if p == module+"/reference" || strings.HasPrefix(p, module+"/reference/") {
			t.Errorf("the kit is built from %s", p)
		}
		if strings.HasPrefix(p, module+"/harness") {
			kit++
		}
	}
	if kit < 5 {
		t.Fatalf("go list named %d packages of harness/: %s", kit, out)
	}
}
