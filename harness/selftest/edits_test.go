package selftest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (slash paths from the root) into a new directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, text := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const kernelA = `package kernel

import (
	"fmt"
	"sync"
)

// Kernel runs executions.
type Kernel struct{ mu sync.Mutex }

// Open opens the kernel.
func (k *Kernel) Open() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return fmt.Errorf("open")
}
`

const kernelB = `package kernel

// Close closes the kernel.
func (k Kernel) Close() error {
	return nil
}

func open() error {
	return nil // open
}

var (
	limit = 1
	other = 2
)
`

// TestApplyEditsFindsTheDeclaration: an edit names a package and a declaration, never a file:
// the same edits give the same change whichever file holds the declaration, methods are named
// by their receiver's type with or without a pointer, a name of a var group stands for the group,
// and only the declaration's text is replaced, not the same text elsewhere in the file.
func TestApplyEditsFindsTheDeclaration(t *testing.T) {
	edits := []Edit{
		{Package: "pkg/kernel", Decl: "Kernel.Open", Old: `return fmt.Errorf("open")`, New: `return nil`,
			DropImports: []string{"fmt"}},
		{Package: "pkg/kernel", Decl: "Kernel.Close", Old: "return nil", New: "return errors.New(\"closed\")",
			Imports: []string{"errors"}},
		{Package: "pkg/kernel", Decl: "other", Old: "limit = 1", New: "limit = 0"},
		{Package: "pkg/kernel", Decl: "Kernel.Open", Old: "k.mu.", New: "k.mu2.", Count: 2},
	}
	want := map[string]string{
		"pkg/kernel/a.go": strings.NewReplacer(
			"\t\"fmt\"\n", "",
			`return fmt.Errorf("open")`, "return nil",
			"k.mu.", "k.mu2.",
		).Replace(kernelA),
		"pkg/kernel/b.go": strings.NewReplacer(
			"package kernel\n", "package kernel\n\nimport \"errors\"\n",
			"return nil\n}\n\nfunc open", "return errors.New(\"closed\")\n}\n\nfunc open",
			"limit = 1", "limit = 0",
		).Replace(kernelB),
	}
	got, err := ApplyEdits(writeTree(t, map[string]string{"pkg/kernel/a.go": kernelA, "pkg/kernel/b.go": kernelB}), "d", edits)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["pkg/kernel/a.go"]) != want["pkg/kernel/a.go"] || string(got["pkg/kernel/b.go"]) != want["pkg/kernel/b.go"] {
		t.Fatalf("got %d files:\n%s\n----\n%s", len(got), got["pkg/kernel/a.go"], got["pkg/kernel/b.go"])
	}

	// Close moved to a.go: the same edits, the same change, now in a.go.
	moved := writeTree(t, map[string]string{
		"pkg/kernel/a.go": kernelA + "\n// Close closes the kernel.\nfunc (k Kernel) Close() error {\n\treturn nil\n}\n",
		"pkg/kernel/b.go": strings.Replace(kernelB, "// Close closes the kernel.\nfunc (k Kernel) Close() error {\n\treturn nil\n}\n\n", "", 1),
	})
	got, err = ApplyEdits(moved, "d", edits[1:2])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["pkg/kernel/a.go"]; !ok || len(got) != 1 || !strings.Contains(string(got["pkg/kernel/a.go"]), "\t\"errors\"\n\t\"fmt\"\n") ||
		!strings.Contains(string(got["pkg/kernel/a.go"]), `return errors.New("closed")`) {
		t.Fatalf("after the move: %v", got)
	}
}

// TestApplyEditsInSequence: a later edit finds the text an earlier one wrote.
func TestApplyEditsInSequence(t *testing.T) {
	root := writeTree(t, map[string]string{"pkg/kernel/a.go": kernelA})
	got, err := ApplyEdits(root, "d", []Edit{
		{Package: "pkg/kernel", Decl: "Kernel.Open", Old: "defer k.mu.Unlock()", New: "// unlocked late"},
		{Package: "pkg/kernel", Decl: "Kernel.Open", Old: "// unlocked late", New: "// never unlocked"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got["pkg/kernel/a.go"]); !strings.Contains(s, "\t// never unlocked\n") || strings.Contains(s, "Unlock") {
		t.Fatalf("got:\n%s", s)
	}
}

// TestApplyEditsErrors: an edit that does not apply says which defect, edit, package and
// declaration, and why, as a value errors.Is and errors.As read; nothing is written.
func TestApplyEditsErrors(t *testing.T) {
	root := writeTree(t, map[string]string{"pkg/kernel/a.go": kernelA, "pkg/kernel/b.go": kernelB,
		"pkg/kernel/dup.go":  "package kernel\n\nfunc Open() {}\n\nfunc Open2() {}\n",
		"pkg/kernel/dup2.go": "package kernel\n\nfunc Open2() {}\n"})
	ok := Edit{Package: "pkg/kernel", Decl: "open", Old: "return nil", New: "return nil // edited"}
	for _, c := range []struct {
		name        string
		edit        Edit
		want        error
		file        string
		wantN, gotN int
	}{
		{"no such function", Edit{Package: "pkg/kernel", Decl: "Gone", Old: "x", New: "y"}, ErrNoDeclaration, "", 0, 0},
		{"no such method", Edit{Package: "pkg/kernel", Decl: "Other.Open", Old: "x", New: "y"}, ErrNoDeclaration, "", 0, 0},
		{"the text is gone", Edit{Package: "pkg/kernel", Decl: "Kernel.Open", Old: "k.mu.RLock()", New: "y"}, ErrTextCount, "pkg/kernel/a.go", 1, 0},
		{"the text is there twice", Edit{Package: "pkg/kernel", Decl: "Kernel.Open", Old: "k.mu.", New: "y"}, ErrTextCount, "pkg/kernel/a.go", 1, 2},
		{"the text is elsewhere in the file", Edit{Package: "pkg/kernel", Decl: "Kernel.Close", Old: "// open", New: "y"}, ErrTextCount, "pkg/kernel/b.go", 1, 0},
		{"two declarations", Edit{Package: "pkg/kernel", Decl: "Open2", Old: "x", New: "y"}, ErrDuplicateDeclaration, "", 0, 0},
		{"no package", Edit{Package: "pkg/gone", Decl: "Open", Old: "x", New: "y"}, ErrPackage, "", 0, 0},
		{"an import already gone", Edit{Package: "pkg/kernel", Decl: "open", Old: "nil", New: "nil", DropImports: []string{"os"}}, ErrImport, "pkg/kernel/b.go", 0, 0},
		{"no old text", Edit{Package: "pkg/kernel", Decl: "open", New: "y"}, ErrBadEdit, "", 0, 0},
		{"a package outside the tree", Edit{Package: "../kernel", Decl: "open", Old: "x"}, ErrBadEdit, "", 0, 0},
	} {
		got, err := ApplyEdits(root, "broken", []Edit{ok, c.edit})
		var ee *EditError
		if !errors.Is(err, c.want) || !errors.As(err, &ee) || got != nil {
			t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
			continue
		}
		if ee.Defect != "broken" || ee.Index != 2 || ee.Package != c.edit.Package || ee.Decl != c.edit.Decl ||
			(c.file != "" && ee.File != c.file) || ee.Want != c.wantN || ee.Found != c.gotN {
			t.Errorf("%s: got %+v", c.name, ee)
		}
		if msg := err.Error(); !strings.Contains(msg, "broken") || !strings.Contains(msg, c.edit.Decl) || !strings.Contains(msg, c.edit.Package) {
			t.Errorf("%s: the message does not name the defect, the package and the declaration: %s", c.name, msg)
		}
	}
}

// TestAddImport: an import goes in sorted place into the group of its kind, a group of its own
// when there is none, or a declaration of its own; one already there is left alone.
func TestAddImport(t *testing.T) {
	for _, c := range []struct{ src, imp, want string }{
		{"package p\n\nimport (\n\t\"fmt\"\n\t\"sync\"\n)\n", "strings", "package p\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n\t\"sync\"\n)\n"},
		{"package p\n\nimport (\n\t\"fmt\"\n)\n", "sync", "package p\n\nimport (\n\t\"fmt\"\n\t\"sync\"\n)\n"},
		{"package p\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/a\"\n\t\"example.com/c\"\n)\n", "example.com/b",
			"package p\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/a\"\n\t\"example.com/b\"\n\t\"example.com/c\"\n)\n"},
		{"package p\n\nimport (\n\t\"fmt\"\n)\n", "example.com/a", "package p\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/a\"\n)\n"},
		{"package p\n\nimport (\n\t\"example.com/a\"\n)\n", "fmt", "package p\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/a\"\n)\n"},
		{"package p\n\nimport (\n\t\"fmt\"\n)\n", "fmt", "package p\n\nimport (\n\t\"fmt\"\n)\n"},
		{"package p\n\nfunc f() {}\n", "fmt", "package p\n\nimport \"fmt\"\n\nfunc f() {}\n"},
	} {
		got, err := addImport([]byte(c.src), c.imp)
		if err != nil || string(got) != c.want {
			t.Errorf("add %s to\n%s\ngot %v:\n%s\nwant:\n%s", c.imp, c.src, err, got, c.want)
		}
	}
}

// TestLoadChecksTheEditFiles: a defect without an edit file, an edit file that does not read, and
// an edit file no defect uses all make the manifest unusable.
func TestLoadChecksTheEditFiles(t *testing.T) {
	manifest := "defects:\n  - name: a\n    bug: b\n    requirement: R-1\n  - name: c\n    bug: b\n    requirement: R-2\n    edits: a\n"
	edit := "edits:\n  - package: p\n    decl: F\n    old: x\n    new: y\n"
	for _, c := range []struct {
		name  string
		files map[string]string
		ok    bool
	}{
		{"each defect has its edits", map[string]string{"defects.yaml": manifest, "a.yaml": edit}, true},
		{"no edit file", map[string]string{"defects.yaml": manifest}, false},
		{"an unused edit file", map[string]string{"defects.yaml": manifest, "a.yaml": edit, "z.yaml": edit}, false},
		{"an unknown field", map[string]string{"defects.yaml": manifest, "a.yaml": edit + "    file: p/x.go\n"}, false},
		{"no edit", map[string]string{"defects.yaml": manifest, "a.yaml": "edits: []\n"}, false},
		{"an edit without a declaration", map[string]string{"defects.yaml": manifest, "a.yaml": "edits:\n  - package: p\n    old: x\n    new: y\n"}, false},
	} {
		ds, err := Load(writeTree(t, c.files))
		switch {
		case c.ok && (err != nil || len(ds) != 2 || ds[1].editsName() != "a"):
			t.Errorf("%s: got %v, %v", c.name, ds, err)
		case !c.ok && !errors.Is(err, ErrManifest):
			t.Errorf("%s: got %v, want ErrManifest", c.name, err)
		}
	}
}
