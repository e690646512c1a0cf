// Package mutation measures how sharp the conformance suite is by mutation testing the reference
// engine: it makes small, plausible changes to the reference's Go code (one per mutant), and runs
// the suite that must notice each one: the mutated package's own tests, then the profiles of the
// in-process conformance suite (TestConformance in package reference/conformance) whose scenarios
// executed the mutated line in the unmutated run. A mutant the suite notices is killed;
// one it does not is a survivor, which either a sharper scenario or test must kill, or which is
// listed, with the reason it cannot change behaviour, in fixtures/mutation/equivalent.yaml.
//
// Why a runner of our own rather than a general mutation tool such as gremlins: gremlins runs
// either the mutated package's own tests or, in integration mode, `go test ./...` over the whole
// module for every mutant. The first misses the conformance suite, the measure that matters here;
// the second runs the kit's self-test and browser tests with every mutant (half an hour each). It
// also copies the module for every mutant. This runner runs exactly the killing suite, in the
// order that kills cheapest first (package tests, then conformance, both -failfast), hands the
// mutated file to the go command as a -overlay (the tree is never copied or written), skips
// mutants on lines no test of the suite executes (measured once with -coverpkg), and tells a
// mutant that hangs (killed by timeout) from one that fails a test.
//
// Mutants are generated from the source with go/ast and go/types (see [Operator]), each with an
// identity that does not move when unrelated lines shift: file, function, operator, the original
// and mutated snippet, and the occurrence among identical mutants of that function.
//
// Usage:
//
//	mutants, err := mutation.Generate(ctx, ".", mutation.Packages)
//	res, err := mutation.Run(ctx, mutation.Options{Root: ".", Mutants: mutants, Log: os.Stderr})
//	err = mutation.Write("reports/mutation", res)
package mutation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Packages are the reference packages mutated by default, as directories relative to the module
// root.
var Packages = []string{
	"reference/store/sqlite", "reference/store/postgres", "reference/kernel", "reference/internal/agent", "reference/internal/conversation",
	"reference/internal/conversation/live", "reference/internal/conversation/participants", "reference/internal/conversation/record",
	"reference/internal/conversation/turn", "reference/internal/conversation/dialogue",
	"reference/internal/envelope", "reference/internal/budget", "reference/internal/gateway", "reference/model", "reference/internal/run",
	"reference/internal/stream", "reference/internal/sessions", "reference/internal/threads",
}

// SecurityPackages are the packages on a security or durability path: an equivalent mutant listed
// in one of them must name the test that proves it cannot change behaviour.
var SecurityPackages = []string{"reference/internal/gateway", "reference/internal/envelope", "reference/kernel", "reference/store", "reference/store/sqlite", "reference/store/postgres", "reference/internal/sessions", "reference/internal/threads"}

// Operator names a kind of mutation.
type Operator string

// The operators, the classic set.
const (
	// ConditionalsBoundary moves a comparison's boundary: < and <=, > and >=.
	ConditionalsBoundary Operator = "conditionals-boundary"
	// ConditionalsNegation negates a comparison: == and !=, < and >=, > and <=.
	ConditionalsNegation Operator = "conditionals-negation"
	// LogicalOperator swaps && and ||.
	LogicalOperator Operator = "logical-operator"
	// Arithmetic swaps + and -, * and /, % for * (numeric operands only), in expressions and
	// assignments.
	Arithmetic Operator = "arithmetic"
	// IncrementDecrement swaps ++ and --.
	IncrementDecrement Operator = "increment-decrement"
	// RemovedNot removes a logical not.
	RemovedNot Operator = "removed-not"
	// RemovedReturn removes an early return that returns a non-nil error.
	RemovedReturn Operator = "removed-return"
	// RemovedContinue removes an unlabelled continue.
	RemovedContinue Operator = "removed-continue"
	// RemovedBreak removes an unlabelled break that is not the last statement of a case.
	RemovedBreak Operator = "removed-break"
	// ConstantOffByOne adds one to an integer literal.
	ConstantOffByOne Operator = "constant-off-by-one"
	// BooleanFlip swaps the constants true and false.
	BooleanFlip Operator = "boolean-flip"
)

// Mutant is one small change to one file of the reference.
type Mutant struct {
	// ID is a short stable hash of the identity fields (File, Func, Operator, Original, Mutated,
	// Occurrence): it does not change when unrelated lines move.
	ID string `json:"id"`
	// Package is the mutated package's directory relative to the module root.
	Package string `json:"package"`
	// File is the mutated file, relative to the module root, with forward slashes.
	File string `json:"file"`
	// Line and Col locate the change (1-based).
	Line int `json:"line"`
	Col  int `json:"col"`
	// Func is the enclosing declaration: "Name", "(*Type).Name", "Type.Name", or "const Name" /
	// "var Name" for package-level values.
	Func string `json:"func"`
	// Operator is the kind of change.
	Operator Operator `json:"operator"`
	// Original is the changed expression or statement as written (whitespace collapsed), and
	// Mutated what it becomes ("" for a removed statement).
	Original string `json:"original"`
	Mutated  string `json:"mutated"`
	// Occurrence counts earlier mutants of the same function with the same operator and snippets
	// (0 for the first), so identical expressions in one function stay apart.
	Occurrence int `json:"occurrence"`

	start, end int    // the byte range of the file the change replaces
	repl       string // what replaces it
}

// String renders a mutant for people: "file:line func: original → mutated (operator)".
//
//	fmt.Println(m) // reference/store/sqlite/sqlite.go:180 clampLimit: limit > MaxRead → limit >= MaxRead (conditionals-boundary)
func (m Mutant) String() string {
	return fmt.Sprintf("%s:%d %s: %s (%s)", m.File, m.Line, m.Func, m.Change(), m.Operator)
}

// Change renders the mutation alone: "original → mutated", or "original → (removed)".
func (m Mutant) Change() string {
	mut := m.Mutated
	if mut == "" {
		mut = "(removed)"
	}
	return m.Original + " → " + mut
}

// Apply returns the source of m.File with the mutation applied; src must be that file's content
// (it is not modified).
//
//	src, _ := os.ReadFile(m.File)
//	os.WriteFile(scratch, m.Apply(src), 0o644)
func (m Mutant) Apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(m.repl))
	out = append(out, src[:m.start]...)
	out = append(out, m.repl...)
	return append(out, src[m.end:]...)
}

func identity(file, fn string, op Operator, orig, mut string, occ int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s\x00%s\x00%d", file, fn, op, orig, mut, occ))
	return hex.EncodeToString(h[:6])
}
