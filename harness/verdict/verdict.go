// Package verdict holds the errors that classify how a scenario went: a *Failure is the system
// under test breaking a rule, a *HarnessError a fault of the kit itself. Package harness names
// them too (harness.Failure is verdict.Failure); the steps (harness/steps) return them.
package verdict

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors that classify what went wrong.
var (
	// ErrHarness marks a fault of the kit itself: the world failed, a step panicked, the SUT
	// could not be started. It is reported as harness-error, never as a SUT failure.
	ErrHarness = errors.New("harness error")
	// ErrNotApplicable marks a scenario this run cannot judge (a profile the SUT does not
	// claim, a crash against a remote target).
	ErrNotApplicable = errors.New("not applicable")
	// ErrNonConformant is what every *Failure matches.
	ErrNonConformant = errors.New("not conformant")
)

// Failure is the SUT breaking a rule: which operation, what it got, what was wanted.
//
// Timeout is non-zero when the step that failed waited out the kit's step timeout (Options.
// StepTimeout) without seeing what it wanted: the system may be wrong, or only slower than the
// bound (a loaded machine, the race detector). Error then says so and names the knobs that raise
// it (--step-timeout, LOOMCHECK_STEP_TIMEOUT); a timeout is still the system's failure.
//
//	return &harness.Failure{Op: "GET /conversations/c1", Got: "429", Want: "404"}
type Failure struct {
	Requirement string
	Rule        string
	Op          string
	Got         string
	Want        string
	// Detail points at what differs when Got and Want are long: the first difference of two
	// texts or tables, or the counts of a rule about a length.
	Detail  string
	Timeout time.Duration
}

func (f *Failure) Error() string {
	msg := fmt.Sprintf("%s: got %s, want %s", f.Op, f.Got, f.Want)
	if f.Detail != "" {
		msg += "; " + f.Detail
	}
	if f.Timeout > 0 {
		msg += "; " + TimeoutNote(f.Timeout)
	}
	return msg
}

// TimeoutNote is the sentence a failure that ran out of the kit's step timeout d carries: that
// the bound was the kit's, and how to raise it.
//
//	fmt.Println(harness.TimeoutNote(10 * time.Second))
func TimeoutNote(d time.Duration) string {
	return fmt.Sprintf("the kit's step timeout of %s ran out first (a slow machine or the race detector may need more: --step-timeout or LOOMCHECK_STEP_TIMEOUT raises it)", d)
}

// Is makes errors.Is(err, ErrNonConformant) true.
func (f *Failure) Is(target error) bool { return target == ErrNonConformant }

// HarnessError wraps a fault of the kit.
type HarnessError struct{ Err error }

func (e *HarnessError) Error() string { return "harness: " + e.Err.Error() }
func (e *HarnessError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrHarness) true.
func (e *HarnessError) Is(target error) bool { return target == ErrHarness }

// Harness is a *HarnessError of the formatted text (%w wraps as fmt.Errorf does).
func Harness(format string, args ...any) error {
	return &HarnessError{Err: fmt.Errorf(format, args...)}
}
