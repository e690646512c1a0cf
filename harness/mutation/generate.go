package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrTypeCheck is returned (wrapped) when a package to mutate does not type-check.
var ErrTypeCheck = errors.New("mutation: package does not type-check")

// Generate parses and type-checks the non-test Go files of each package directory in pkgs
// (relative to root, the module root) and returns every mutant the operators produce, in file
// and source order. It runs `go list -export` once to load the packages' dependencies. Errors:
// the go command's failure, a parse error, or [ErrTypeCheck]. Safe for concurrent use.
//
//	mutants, err := mutation.Generate(ctx, ".", []string{"reference/internal/budget"})
func Generate(ctx context.Context, root string, pkgs []string) ([]Mutant, error) {
	exports, err := exportData(ctx, root, pkgs)
	if err != nil {
		return nil, err
	}
	var all []Mutant
	for _, dir := range pkgs {
		ms, err := generatePackage(root, dir, exports)
		if err != nil {
			return nil, err
		}
		all = append(all, ms...)
	}
	return all, nil
}

// exportData maps import paths to the export data files of the packages' dependencies.
func exportData(ctx context.Context, root string, pkgs []string) (map[string]string, error) {
	args := []string{"list", "-export", "-deps", "-json=ImportPath,Export"}
	for _, p := range pkgs {
		args = append(args, "./"+filepath.ToSlash(p))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("mutation: go list: %w: %s", err, stderr.String())
	}
	m := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("mutation: go list output: %w", err)
		}
		m[p.ImportPath] = p.Export
	}
	return m, nil
}

func generatePackage(root, dir string, exports map[string]string) ([]Mutant, error) {
	names, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	var files []*ast.File
	srcs := map[*ast.File][]byte{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("mutation: %w", err)
		}
		if !buildable(f) {
			continue
		}
		files = append(files, f)
		srcs[f] = src
	}
	if len(files) == 0 {
		return nil, nil
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	info := &types.Info{
		Types: map[ast.Expr]types.TypeAndValue{},
		Uses:  map[*ast.Ident]types.Object{},
	}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(dir, fset, files, info); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTypeCheck, dir, err)
	}
	var out []Mutant
	for _, f := range files {
		rel, err := filepath.Rel(root, fset.File(f.Pos()).Name())
		if err != nil {
			return nil, err
		}
		g := &gen{fset: fset, info: info, src: srcs[f], file: filepath.ToSlash(rel), pkg: filepath.ToSlash(dir), seen: map[string]int{}}
		g.file_(f)
		out = append(out, g.out...)
	}
	return out, nil
}

// buildable reports whether a file has no build constraint that excludes it by default.
func buildable(f *ast.File) bool {
	for _, cg := range f.Comments {
		if cg.Pos() > f.Package {
			break
		}
		for _, c := range cg.List {
			if strings.HasPrefix(c.Text, "//go:build ") && strings.Contains(c.Text, "ignore") {
				return false
			}
		}
	}
	return true
}

type gen struct {
	fset *token.FileSet
	info *types.Info
	src  []byte
	file string
	pkg  string
	fn   string
	seen map[string]int
	out  []Mutant
}

func (g *gen) file_(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Body == nil {
				continue
			}
			g.fn = funcName(d)
			g.walk(d.Body)
		case *ast.GenDecl:
			if d.Tok != token.CONST && d.Tok != token.VAR {
				continue
			}
			for _, s := range d.Specs {
				vs := s.(*ast.ValueSpec)
				g.fn = d.Tok.String() + " " + vs.Names[0].Name
				if len(vs.Values) > 0 {
					g.walk(vs)
				}
			}
		}
	}
}

func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	star := false
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = true, s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	name := types.ExprString(t)
	if star {
		return "(*" + name + ")." + d.Name.Name
	}
	return name + "." + d.Name.Name
}

// walk visits a subtree, keeping track of the statement context removals need.
func (g *gen) walk(root ast.Node) {
	var stack []ast.Node
	ast.Inspect(root, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return false
		}
		g.node(n, stack)
		stack = append(stack, n)
		return true
	})
}

func (g *gen) node(n ast.Node, stack []ast.Node) {
	switch n := n.(type) {
	case *ast.BinaryExpr:
		g.binary(n)
	case *ast.AssignStmt:
		switch n.Tok {
		case token.ADD_ASSIGN, token.SUB_ASSIGN, token.MUL_ASSIGN, token.QUO_ASSIGN:
			if len(n.Lhs) == 1 && g.numeric(n.Lhs[0]) {
				to := map[token.Token]token.Token{token.ADD_ASSIGN: token.SUB_ASSIGN, token.SUB_ASSIGN: token.ADD_ASSIGN,
					token.MUL_ASSIGN: token.QUO_ASSIGN, token.QUO_ASSIGN: token.MUL_ASSIGN}[n.Tok]
				g.token(n, n.TokPos, n.Tok, to, Arithmetic)
			}
		}
	case *ast.IncDecStmt:
		to := token.DEC
		if n.Tok == token.DEC {
			to = token.INC
		}
		g.token(n, n.TokPos, n.Tok, to, IncrementDecrement)
	case *ast.UnaryExpr:
		if n.Op == token.NOT {
			g.add(n, RemovedNot, n.OpPos, n.OpPos+1, "")
		}
	case *ast.Ident:
		if n.Name != "true" && n.Name != "false" {
			return
		}
		if _, ok := g.info.Uses[n].(*types.Const); !ok || g.info.Uses[n].Pkg() != nil {
			return
		}
		to := "false"
		if n.Name == "false" {
			to = "true"
		}
		g.add(around(n, stack), BooleanFlip, n.Pos(), n.End(), to)
	case *ast.BasicLit:
		if n.Kind != token.INT || g.skipLiteral(n, stack) {
			return
		}
		v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil || v == 1<<63-1 {
			return
		}
		g.add(around(n, stack), ConstantOffByOne, n.Pos(), n.End(), strconv.FormatInt(v+1, 10))
	case *ast.ReturnStmt:
		if !g.early(stack) || !g.returnsError(n) {
			return
		}
		g.add(n, RemovedReturn, n.Pos(), n.End(), "")
	case *ast.BranchStmt:
		if n.Label != nil {
			return
		}
		switch n.Tok {
		case token.CONTINUE:
			g.add(n, RemovedContinue, n.Pos(), n.End(), "")
		case token.BREAK:
			if lastInCase(n, stack) {
				return // removing it changes nothing: a case ends there anyway
			}
			g.add(n, RemovedBreak, n.Pos(), n.End(), "")
		}
	}
}

var (
	boundary = map[token.Token]token.Token{token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR}
	negation = map[token.Token]token.Token{token.EQL: token.NEQ, token.NEQ: token.EQL, token.LSS: token.GEQ,
		token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR}
	arith = map[token.Token]token.Token{token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO,
		token.QUO: token.MUL, token.REM: token.MUL}
)

func (g *gen) binary(n *ast.BinaryExpr) {
	if to, ok := boundary[n.Op]; ok {
		g.token(n, n.OpPos, n.Op, to, ConditionalsBoundary)
	}
	if to, ok := negation[n.Op]; ok {
		g.token(n, n.OpPos, n.Op, to, ConditionalsNegation)
	}
	switch n.Op {
	case token.LAND:
		g.token(n, n.OpPos, n.Op, token.LOR, LogicalOperator)
	case token.LOR:
		g.token(n, n.OpPos, n.Op, token.LAND, LogicalOperator)
	}
	if to, ok := arith[n.Op]; ok && g.numeric(n) {
		g.token(n, n.OpPos, n.Op, to, Arithmetic)
	}
}

// numeric reports whether an expression's type is an integer or floating-point number.
func (g *gen) numeric(e ast.Expr) bool {
	tv, ok := g.info.Types[e]
	if !ok || tv.Type == nil {
		return false
	}
	b, ok := tv.Type.Underlying().(*types.Basic)
	return ok && b.Info()&(types.IsInteger|types.IsFloat) != 0
}

func (g *gen) returnsError(r *ast.ReturnStmt) bool {
	errType := types.Universe.Lookup("error").Type()
	for _, e := range r.Results {
		if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
			continue
		}
		tv, ok := g.info.Types[e]
		if ok && tv.Type != nil && types.Identical(tv.Type, errType) {
			return true
		}
		if ok && tv.Type != nil && types.Implements(tv.Type, errType.Underlying().(*types.Interface)) && !types.IsInterface(tv.Type) {
			return true
		}
	}
	return false
}

// early reports whether a statement sits in a block nested in the function body (an if, a case, a
// loop), rather than at the body's top level where removing it would leave a function without
// its final return.
func (g *gen) early(stack []ast.Node) bool {
	depth := 0
	for i := len(stack) - 1; i >= 0; i-- {
		switch stack[i].(type) {
		case *ast.FuncLit:
			return depth > 1
		case *ast.BlockStmt, *ast.CaseClause, *ast.CommClause:
			depth++
		}
	}
	return depth > 1
}

func lastInCase(b *ast.BranchStmt, stack []ast.Node) bool {
	if len(stack) == 0 {
		return false
	}
	switch c := stack[len(stack)-1].(type) {
	case *ast.CaseClause:
		return len(c.Body) > 0 && c.Body[len(c.Body)-1] == b && g2switch(stack[:len(stack)-1])
	case *ast.CommClause:
		return len(c.Body) > 0 && c.Body[len(c.Body)-1] == b
	}
	return false
}

// g2switch reports whether the innermost enclosing switch statement is a switch (not a loop), so
// that the break leaves the switch.
func g2switch(stack []ast.Node) bool {
	for i := len(stack) - 1; i >= 0; i-- {
		switch stack[i].(type) {
		case *ast.SwitchStmt, *ast.TypeSwitchStmt:
			return true
		case *ast.ForStmt, *ast.RangeStmt:
			return false
		}
	}
	return false
}

// skipLiteral leaves out integer literals whose change is equivalent by construction or cannot
// compile: array lengths, the capacity argument of make, the base and bit size of strconv calls,
// and octal file modes.
func (g *gen) skipLiteral(n *ast.BasicLit, stack []ast.Node) bool {
	if len(n.Value) > 1 && n.Value[0] == '0' && n.Value[1] != 'x' && n.Value[1] != 'X' {
		return true // a file mode
	}
	if len(stack) == 0 {
		return false
	}
	switch p := stack[len(stack)-1].(type) {
	case *ast.ArrayType:
		return p.Len == n
	case *ast.CallExpr:
		if id, ok := p.Fun.(*ast.Ident); ok && id.Name == "make" && len(p.Args) == 3 && p.Args[2] == n {
			return true
		}
		if sel, ok := p.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "strconv" && p.Args[0] != n {
				return true
			}
		}
	}
	return false
}

// around is the node whose text shows a literal in place: its parent expression or statement.
func around(n ast.Node, stack []ast.Node) ast.Node {
	if len(stack) == 0 {
		return n
	}
	switch p := stack[len(stack)-1].(type) {
	case ast.Expr, *ast.ReturnStmt, *ast.AssignStmt, *ast.ValueSpec, *ast.SendStmt, *ast.IncDecStmt:
		return p
	}
	return n
}

func (g *gen) token(n ast.Node, pos token.Pos, from, to token.Token, op Operator) {
	g.add(n, op, pos, pos+token.Pos(len(from.String())), to.String())
}

// add records a mutant replacing [from, to) with repl; n is the expression or statement whose
// text is the mutant's snippet.
func (g *gen) add(n ast.Node, op Operator, from, to token.Pos, repl string) {
	base := g.fset.File(n.Pos()).Base()
	ns, ne := int(n.Pos())-base, int(n.End())-base
	fs, fe := int(from)-base, int(to)-base
	orig := collapse(string(g.src[ns:ne]))
	mut := ""
	if fs != ns || fe != ne || repl != "" {
		mut = collapse(string(g.src[ns:fs]) + repl + string(g.src[fe:ne]))
	}
	key := g.fn + "\x00" + string(op) + "\x00" + orig + "\x00" + mut
	occ := g.seen[key]
	g.seen[key] = occ + 1
	p := g.fset.Position(from)
	g.out = append(g.out, Mutant{
		ID: identity(g.file, g.fn, op, orig, mut, occ), Package: g.pkg, File: g.file, Line: p.Line, Col: p.Column,
		Func: g.fn, Operator: op, Original: orig, Mutated: mut, Occurrence: occ,
		start: fs, end: fe, repl: repl,
	})
}

// collapse joins a snippet's lines and runs of white space into single spaces, and shortens a long
// one in the middle, so that a snippet reads on one line.
func collapse(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:100]) + " … " + string(r[len(r)-50:])
	}
	return s
}
