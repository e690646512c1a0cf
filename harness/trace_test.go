package harness_test

import (
	"testing"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/spec"
)

// TestTraceability enforces the catalogue's contract with the features: every requirement has a
// scenario, every @req tag names a catalogued requirement, and every scenario has a profile
// that matches the requirements it proves.
func TestTraceability(t *testing.T) {
	cat, err := spec.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	_, problems, err := harness.Trace(cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
