package selftest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"testing"
)

// TestEveryDefectTypeChecks type-checks the packages each named defect edits, as edited: a defect
// whose text still applies can still fail to build (code moved to a file without an import its
// new text needs), and the self-test would then report it missed only when it samples it. The
// edited package is checked from source; what it imports, from the export data the go command
// keeps (go list -export), so each check costs one package. It runs on one goroutine, where the
// race detector finds nothing and costs four times as much: a pass without it judges every defect
// (CORPUS_TESTS in the Makefile).
func TestEveryDefectTypeChecks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the export data of the reference")
	}
	if raceEnabled {
		t.Skip("judged by the pass without the race detector")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	exports, dirs := exportData(t, root)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
		f, ok := exports[p]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(f)
	})
	eachDefectEdit(t, root, func(name string, files map[string][]byte) {
		pkgs := map[string]bool{}
		for rel := range files {
			pkgs[path.Dir(rel)] = true
		}
		for _, p := range slices.Sorted(maps.Keys(pkgs)) {
			err := typeCheck(fset, imp, root, p, dirs, files)
			if err != nil && len(pkgs) > 1 {
				// One edited package may use what the defect adds to another, which the export
				// data does not hold: the go command builds them together, as the self-test does.
				err = buildEdited(t, root, name, files)
			}
			if err != nil {
				t.Errorf("%s: the edited %s does not type-check: %v", name, p, err)
			}
		}
	})
}

// buildEdited builds the packages of the edited files with the edits in place (go build
// -overlay), and returns the go command's output as the error when it fails.
func buildEdited(t *testing.T, root, name string, edited map[string][]byte) error {
	tmp := t.TempDir()
	replace := map[string]string{}
	pkgs := map[string]bool{}
	i := 0
	for rel, b := range edited {
		i++
		f := filepath.Join(tmp, fmt.Sprintf("%d-%s", i, path.Base(rel)))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return err
		}
		replace[filepath.Join(root, filepath.FromSlash(rel))] = f
		pkgs["./"+path.Dir(rel)] = true
	}
	ov, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return err
	}
	overlay := filepath.Join(tmp, name+".json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", append([]string{"build", "-overlay=" + overlay}, slices.Sorted(maps.Keys(pkgs))...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

// exportData lists, by import path, the export data file of every package the reference's
// packages depend on, and the Go files of each of the module's packages (by their directory from
// root).
func exportData(t *testing.T, root string) (map[string]string, map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export,Dir,GoFiles,Module", "./reference/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	dirs := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath, Export, Dir string
			GoFiles                 []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if rel, err := filepath.Rel(root, p.Dir); err == nil && filepath.IsLocal(rel) {
			dirs[filepath.ToSlash(rel)] = p.GoFiles
		}
	}
	return exports, dirs
}

// typeCheck parses the Go files of the package in dir (from root), taking a file's content from
// edited where it has one, and type-checks them.
func typeCheck(fset *token.FileSet, imp types.Importer, root, dir string, dirs map[string][]string, edited map[string][]byte) error {
	names, ok := dirs[dir]
	if !ok {
		return os.ErrNotExist
	}
	var files []*ast.File
	for _, n := range names {
		rel := path.Join(dir, n)
		src, ok := edited[rel]
		if !ok {
			var err error
			if src, err = os.ReadFile(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
				return err
			}
		}
		f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: imp}
	_, err := conf.Check(dir, fset, files, nil)
	return err
}
