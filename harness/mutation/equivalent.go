package mutation

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"go.yaml.in/yaml/v4"
)

// EquivalentEntry is one reviewed survivor that cannot change behaviour, identified by what does
// not move when unrelated lines shift.
type EquivalentEntry struct {
	// File is the file relative to the module root.
	File string `yaml:"file" json:"file"`
	// Func is the enclosing declaration, as in [Mutant.Func].
	Func string `yaml:"func" json:"func"`
	// Operator is the mutation's operator.
	Operator Operator `yaml:"operator" json:"operator"`
	// Original and Mutated are the snippets, as in [Mutant.Original] and [Mutant.Mutated].
	Original string `yaml:"original" json:"original"`
	Mutated  string `yaml:"mutated" json:"mutated"`
	// Occurrence, when set, picks one of several identical mutants of the function.
	Occurrence *int `yaml:"occurrence,omitempty" json:"occurrence,omitempty"`
	// Reason says why the mutant cannot change behaviour.
	Reason string `yaml:"reason" json:"reason"`
	// Test names a test that proves it (required in [SecurityPackages]): "pkg.TestName" with pkg
	// the package directory relative to the module root, e.g. "reference/store.TestAppend".
	Test string `yaml:"test,omitempty" json:"test,omitempty"`
}

// Matches reports whether the entry names m: every identity field equal, and the occurrence too
// when the entry gives one.
//
//	if e.Matches(m) { fmt.Println("equivalent:", e.Reason) }
func (e EquivalentEntry) Matches(m Mutant) bool {
	return e.File == m.File && e.Func == m.Func && e.Operator == m.Operator && e.Original == m.Original &&
		e.Mutated == m.Mutated && (e.Occurrence == nil || *e.Occurrence == m.Occurrence)
}

// String renders the entry like a mutant.
func (e EquivalentEntry) String() string {
	return fmt.Sprintf("%s %s: %s → %s (%s)", e.File, e.Func, e.Original, e.Mutated, e.Operator)
}

// ErrEquivalentFile is returned (wrapped) for an equivalent file that cannot be read or parsed.
var ErrEquivalentFile = errors.New("mutation: bad equivalent file")

// LoadEquivalent reads an equivalent file: a YAML document with a list `equivalent:` of entries.
// A missing file is an empty list.
//
//	eq, err := mutation.LoadEquivalent("fixtures/mutation/equivalent.yaml")
func LoadEquivalent(path string) ([]EquivalentEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEquivalentFile, err)
	}
	var doc struct {
		Equivalent []EquivalentEntry `yaml:"equivalent"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrEquivalentFile, path, err)
	}
	return doc.Equivalent, nil
}

// InSecurityPath reports whether a file belongs to one of [SecurityPackages].
//
//	mutation.InSecurityPath("reference/store/sqlite/sqlite.go") // true
func InSecurityPath(file string) bool {
	return slices.ContainsFunc(SecurityPackages, func(p string) bool {
		return len(file) > len(p) && file[:len(p)] == p && file[len(p)] == '/'
	})
}
