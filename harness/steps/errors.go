package steps

import (
	"github.com/loomcheck/loomcheck/harness/sut"
	"github.com/loomcheck/loomcheck/harness/verdict"
)

// The outcomes a step returns and the system it drives, by the names the steps use (the same
// types as package harness's).
type (
	// Failure is the system breaking a rule.
	Failure = verdict.Failure
	// HarnessError is a fault of the kit.
	HarnessError = verdict.HarnessError
	// Factory opens an in-process instance.
	Factory = sut.Factory
	// Instance is an in-process instance.
	Instance = sut.Instance
)

var (
	// ErrHarness marks a fault of the kit.
	ErrHarness = verdict.ErrHarness
	// ErrNotApplicable marks a scenario the run cannot judge.
	ErrNotApplicable = verdict.ErrNotApplicable
)

func harnessErr(format string, args ...any) error { return verdict.Harness(format, args...) }

func fail(op, got, want string) error { return &Failure{Op: op, Got: got, Want: want} }
