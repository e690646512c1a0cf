package selftest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v4"
)

// Edit is one change of a defect: in the Go package in directory Package, inside the top-level
// declaration Decl, the text Old becomes New. The file that holds the declaration is found by
// parsing the package, so a declaration may move between the package's files without changing
// the edit.
type Edit struct {
	// Package is the package's directory, slash-separated, from the module root
	// ("reference/kernel").
	Package string `yaml:"package"`
	// Decl names the declaration: a function ("Open"), a method as its receiver's type name, a
	// dot and its name, whether the receiver is a pointer or not ("Kernel.Open"), or a name a
	// type, var or const declaration declares ("Options"); such a name stands for the whole
	// declaration, the parenthesised group included. A declaration spans from the first line of
	// its doc comment to the end of its last line.
	Decl string `yaml:"decl"`
	// Old is the exact text to find inside the declaration, and New what it becomes.
	Old string `yaml:"old"`
	New string `yaml:"new"`
	// Count is how many times Old occurs inside the declaration (default 1); every occurrence
	// is replaced. Any other number of occurrences fails the edit.
	Count int `yaml:"count,omitempty"`
	// Imports are the import paths New needs, added to the file of the declaration unless it
	// imports them already.
	Imports []string `yaml:"imports,omitempty"`
	// DropImports are the import paths the file no longer uses once Old is gone, removed from
	// the file of the declaration; the file must import them.
	DropImports []string `yaml:"drop-imports,omitempty"`
}

func (e Edit) count() int {
	if e.Count > 0 {
		return e.Count
	}
	return 1
}

// Errors of an edit that does not apply; an *EditError wraps one of them.
var (
	// ErrNoDeclaration: the package declares nothing by the edit's name.
	ErrNoDeclaration = errors.New("the package has no such declaration")
	// ErrDuplicateDeclaration: more than one declaration of the package has the edit's name.
	ErrDuplicateDeclaration = errors.New("the package declares the name more than once")
	// ErrTextCount: the declaration does not hold the edit's old text as many times as it says.
	ErrTextCount = errors.New("the declaration does not hold the old text as many times as the edit says")
	// ErrPackage: the package's directory or one of its files cannot be read or parsed.
	ErrPackage = errors.New("the package cannot be read")
	// ErrImport: an import to add cannot be placed, or one to drop is not imported.
	ErrImport = errors.New("the import cannot be changed")
	// ErrBadEdit: the edit itself is incomplete (no package, declaration or old text).
	ErrBadEdit = errors.New("the edit is incomplete")
)

// EditError is an edit of a defect that does not apply to the tree.
type EditError struct {
	Defect string
	// Index is the edit's place in the defect's list, from 1.
	Index   int
	Package string
	Decl    string
	// File is the file that holds the declaration, when it was found.
	File string
	// Want and Found are the occurrences of the old text the edit states and the declaration
	// holds, for ErrTextCount.
	Want, Found int
	Err         error
}

func (e *EditError) Error() string {
	where := e.Package + " " + e.Decl
	if e.File != "" {
		where += " (" + e.File + ")"
	}
	msg := fmt.Sprintf("defect %s, edit %d, %s: %v", e.Defect, e.Index, where, e.Err)
	if errors.Is(e.Err, ErrTextCount) {
		msg += fmt.Sprintf(": found %d, want %d", e.Found, e.Want)
	}
	return msg
}

func (e *EditError) Unwrap() error { return e.Err }

// ErrEdits is a defect's edit file that cannot be read or used.
var ErrEdits = errors.New("selftest: bad edit file")

// LoadEdits reads the edits of the defect's edit file name (without .yaml) in dir.
func LoadEdits(dir, name string) ([]Edit, error) {
	b, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrEdits, name, err)
	}
	var doc struct {
		Edits []Edit `yaml:"edits"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrEdits, name, err)
	}
	if len(doc.Edits) == 0 {
		return nil, fmt.Errorf("%w: %s lists no edit", ErrEdits, name)
	}
	for i, e := range doc.Edits {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%w: %s, edit %d: %v", ErrEdits, name, i+1, err)
		}
	}
	return doc.Edits, nil
}

func (e Edit) check() error {
	switch {
	case e.Package == "" || e.Decl == "" || e.Old == "":
		return fmt.Errorf("%w: it needs a package, a declaration and an old text", ErrBadEdit)
	case e.Count < 0:
		return fmt.Errorf("%w: a negative count", ErrBadEdit)
	case path.IsAbs(e.Package) || path.Clean(e.Package) != e.Package || strings.HasPrefix(e.Package, ".."):
		return fmt.Errorf("%w: the package %q is not a directory inside the tree", ErrBadEdit, e.Package)
	}
	for _, p := range slices.Concat(e.Imports, e.DropImports) {
		if p == "" || strings.ContainsAny(p, "\"` \t\n") {
			return fmt.Errorf("%w: the import path %q", ErrBadEdit, p)
		}
	}
	return nil
}

// ApplyEdits applies the defect's edits in order to the Go files under root (a later edit sees
// what an earlier one wrote) and returns the content of every file they change, by its
// slash-separated path from root. root is only read.
func ApplyEdits(root, defect string, edits []Edit) (map[string][]byte, error) {
	changed := map[string][]byte{}
	read := func(rel string) ([]byte, error) {
		if b, ok := changed[rel]; ok {
			return b, nil
		}
		return os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	}
	for i, e := range edits {
		fail := func(file string, err error) error {
			return &EditError{Defect: defect, Index: i + 1, Package: e.Package, Decl: e.Decl, File: file, Err: err}
		}
		if err := e.check(); err != nil {
			return nil, fail("", err)
		}
		rel, src, start, end, err := findDecl(root, e.Package, e.Decl, read)
		if err != nil {
			return nil, fail(rel, err)
		}
		body := string(src[start:end])
		if n := strings.Count(body, e.Old); n != e.count() {
			ee := fail(rel, ErrTextCount).(*EditError)
			ee.Want, ee.Found = e.count(), n
			return nil, ee
		}
		out := slices.Concat(src[:start], []byte(strings.ReplaceAll(body, e.Old, e.New)), src[end:])
		for _, p := range e.Imports {
			if out, err = addImport(out, p); err != nil {
				return nil, fail(rel, fmt.Errorf("%w: adding %q: %v", ErrImport, p, err))
			}
		}
		for _, p := range e.DropImports {
			if out, err = dropImport(out, p); err != nil {
				return nil, fail(rel, fmt.Errorf("%w: dropping %q: %v", ErrImport, p, err))
			}
		}
		changed[rel] = out
	}
	return changed, nil
}

// findDecl finds the one top-level declaration named decl among the files of the package in dir
// that the build would compile (test files excluded), and returns its file's path from root,
// the file's content and the declaration's byte range in it.
func findDecl(root, dir, decl string, read func(string) ([]byte, error)) (rel string, src []byte, start, end int, err error) {
	pkg, err := build.Default.ImportDir(filepath.Join(root, filepath.FromSlash(dir)), 0)
	if err != nil {
		return "", nil, 0, 0, fmt.Errorf("%w: %v", ErrPackage, err)
	}
	found := 0
	for _, name := range slices.Concat(pkg.GoFiles, pkg.CgoFiles) {
		r := path.Join(dir, name)
		b, err := read(r)
		if err != nil {
			return "", nil, 0, 0, fmt.Errorf("%w: %v", ErrPackage, err)
		}
		idx, err := indexDecls(r, b)
		if err != nil {
			return r, nil, 0, 0, fmt.Errorf("%w: %v", ErrPackage, err)
		}
		for _, rg := range idx[decl] {
			found++
			if found > 1 {
				return r, nil, 0, 0, ErrDuplicateDeclaration
			}
			rel, src = r, b
			start, end = rg[0], rg[1]
		}
	}
	if found == 0 {
		return "", nil, 0, 0, ErrNoDeclaration
	}
	return rel, src, start, end, nil
}

// declIndex is the top-level declarations of one Go file: for each name a declaration declares
// (declNames), the byte range (declRange) of each declaration that declares it.
type declIndex map[string][][2]int

// declIndexes holds the index of each file read so far, by its path and a hash of its content:
// every edit of the named defects looks its declaration up among all the files of its package,
// and most packages hold many edits, so parsing each file again for each edit was most of what
// applying the defects cost.
var declIndexes sync.Map // string: path, NUL, SHA-256 of the content -> declIndex

// indexDecls is the index of the file at rel (from the module root) whose content is src.
func indexDecls(rel string, src []byte) (declIndex, error) {
	sum := sha256.Sum256(src)
	key := rel + "\x00" + string(sum[:])
	if idx, ok := declIndexes.Load(key); ok {
		return idx.(declIndex), nil
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	idx := declIndex{}
	for _, d := range f.Decls {
		for _, name := range declNames(d) {
			start, end := declRange(fset, f, d, src)
			idx[name] = append(idx[name], [2]int{start, end})
		}
	}
	declIndexes.Store(key, idx)
	return idx, nil
}

// declNames is the names the declaration d declares, each once: a function's funcName, the types,
// constants and variables of a declaration other than an import ("_" left out).
func declNames(d ast.Decl) []string {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return []string{funcName(d)}
	case *ast.GenDecl:
		if d.Tok == token.IMPORT {
			return nil
		}
		var names []string
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.Name != "_" {
						names = append(names, n.Name)
					}
				}
			}
		}
		slices.Sort(names)
		return slices.Compact(names)
	}
	return nil
}

// funcName is "Name" for a function and "Type.Name" for a method, whatever its receiver's form
// (pointer or not, type parameters or not).
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.ParenExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + d.Name.Name
		}
		return d.Name.Name
	}
}

// declRange is the byte range of d in src: from the start of the line of its doc comment (or of
// the declaration when it has none) to the end of its last line, the newline excluded.
func declRange(fset *token.FileSet, f *ast.File, d ast.Decl, src []byte) (start, end int) {
	pos := d.Pos()
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Doc != nil {
			pos = d.Doc.Pos()
		}
	case *ast.GenDecl:
		if d.Doc != nil {
			pos = d.Doc.Pos()
		}
	}
	start = fset.Position(pos).Offset
	end = fset.Position(d.End()).Offset
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	if i := bytes.IndexByte(src[end:], '\n'); i >= 0 {
		end += i
	} else {
		end = len(src)
	}
	return start, end
}

// addImport adds the import path to the Go file src unless the file imports it already: into the
// parenthesised import block, in sorted place within the first group of its kind (standard
// library or not; a new group of its own when there is none), or as a new import declaration
// after the package clause when the file imports nothing in parentheses.
func addImport(src []byte, imp string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	for _, s := range f.Imports {
		if p, _ := strconv.Unquote(s.Path.Value); p == imp {
			return src, nil
		}
	}
	var block *ast.GenDecl
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT && g.Lparen.IsValid() {
			block = g
			break
		}
	}
	var at int
	var text string
	if block == nil {
		// No parenthesised block: a declaration of its own after the package clause.
		at, text = lineEnd(src, fset.Position(f.Name.End()).Offset), "\nimport "+strconv.Quote(imp)+"\n"
	} else {
		at, text = importPlace(fset, src, block, imp)
	}
	return slices.Concat(src[:at], []byte(text), src[at:]), nil
}

// importPlace is where in src, and as what text, the import of imp goes into the parenthesised
// import block: in sorted place within the first group of its kind, or as a group of its own.
func importPlace(fset *token.FileSet, src []byte, block *ast.GenDecl, imp string) (int, string) {
	line := "\t" + strconv.Quote(imp) + "\n"
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	groups := importGroups(fset, block)
	std := isStd(imp)
	for _, g := range groups {
		p0, _ := strconv.Unquote(g[0].Path.Value)
		if isStd(p0) != std {
			continue
		}
		for _, s := range g {
			p, _ := strconv.Unquote(s.Path.Value)
			if p > imp {
				return lineStart(src, off(specStart(s))), line
			}
		}
		return lineEnd(src, off(g[len(g)-1].End())), line
	}
	// No group of its kind: the standard library's comes first, any other last.
	if len(groups) == 0 {
		return lineStart(src, off(block.Rparen)), line
	}
	if std {
		return lineStart(src, off(specStart(groups[0][0]))), line + "\n"
	}
	last := groups[len(groups)-1]
	return lineEnd(src, off(last[len(last)-1].End())), "\n" + line
}

// importGroups is the import block's groups: runs of specs not separated by a blank line.
func importGroups(fset *token.FileSet, block *ast.GenDecl) [][]*ast.ImportSpec {
	var groups [][]*ast.ImportSpec
	lastLine := 0
	for _, s := range block.Specs {
		is := s.(*ast.ImportSpec)
		l := fset.Position(is.Pos()).Line
		if is.Doc != nil {
			l = fset.Position(is.Doc.Pos()).Line
		}
		if len(groups) == 0 || l > lastLine+1 {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], is)
		lastLine = fset.Position(is.End()).Line
	}
	return groups
}

// specStart is where an import spec begins: its doc comment, when it has one.
func specStart(s *ast.ImportSpec) token.Pos {
	if s.Doc != nil {
		return s.Doc.Pos()
	}
	return s.Pos()
}

// lineStart is the offset in src of the start of the line that holds offset o.
func lineStart(src []byte, o int) int {
	for o > 0 && src[o-1] != '\n' {
		o--
	}
	return o
}

// lineEnd is the offset in src just past the end of the line that holds offset o.
func lineEnd(src []byte, o int) int {
	if i := bytes.IndexByte(src[o:], '\n'); i >= 0 {
		return o + i + 1
	}
	return len(src)
}

// dropImport removes the lines of the import of path imp (its doc comment included) from the Go
// file src, or the whole declaration when it imports imp alone.
func dropImport(src []byte, imp string) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.IMPORT {
			continue
		}
		for _, s := range g.Specs {
			is := s.(*ast.ImportSpec)
			if p, _ := strconv.Unquote(is.Path.Value); p != imp {
				continue
			}
			var from, to token.Pos = is.Pos(), is.End()
			if is.Doc != nil {
				from = is.Doc.Pos()
			}
			if !g.Lparen.IsValid() {
				from, to = g.Pos(), g.End()
				if g.Doc != nil {
					from = g.Doc.Pos()
				}
			}
			start, end := fset.Position(from).Offset, fset.Position(to).Offset
			for start > 0 && src[start-1] != '\n' {
				start--
			}
			if i := bytes.IndexByte(src[end:], '\n'); i >= 0 {
				end += i + 1
			} else {
				end = len(src)
			}
			return slices.Concat(src[:start], src[end:]), nil
		}
	}
	return nil, errors.New("the file does not import it")
}

// isStd reports whether an import path is the standard library's: its first element has no dot.
func isStd(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}
