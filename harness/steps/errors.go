package steps

import (
	"github.com/loomcheck/loomcheck/harness/verdict"
)

// The outcomes a step returns, by the names the steps use (the same types as package harness's).
type (
	// Failure is the system breaking a rule.
	Failure = verdict.Failure
	// HarnessError is a fault of the kit.
	HarnessError = verdict.HarnessError
)

var (
	// ErrHarness marks a fault of the kit.
	ErrHarness = verdict.ErrHarness
	// ErrNotApplicable marks a scenario the run cannot judge.
	ErrNotApplicable = verdict.ErrNotApplicable
)

func harnessErr(format string, args ...any) error { return verdict.Harness(format, args...) }

func fail(op, got, want string) error { return &Failure{Op: op, Got: got, Want: want} }
