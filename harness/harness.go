// Package harness is the Loom conformance harness. It runs the Gherkin scenarios of features/
// against a system under test (SUT) while playing the world around it (model, tools, summarizer,
// identities, clearances, the error hook, and the process itself: crash and restart), and turns
// what it observed into a report.
//
// The entry point for Go implementers has the standard library's conformance shape:
//
//	func TestConformance(t *testing.T) {
//		harness.Run(t, func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
//			return myimpl.Open(ctx, cfg)
//		})
//	}
//
// Outcomes are kept apart: a scenario fails only when the SUT broke a rule (a *Failure); anything
// the kit itself got wrong is a harness error (ErrHarness), never blamed on the SUT.
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Instance is one running instance of a system under test, served in-process.
type Instance interface {
	// Handler is the instance's HTTP surface (spec/openapi.yaml).
	Handler() http.Handler
	// Crash abandons the instance as SIGKILL would: nothing it does afterwards may reach its
	// durable state, and the data directory must be openable again at once.
	Crash()
	// Close shuts the instance down cleanly.
	Close() error
}

// WriteCrasher is an Instance that can crash itself right after a chosen durable write; the
// crash exploration (harness/explore) needs it, the rest of the kit does not. A durable write is
// one committed change to the instance's durable state (a committed append or transaction).
//
// DurableWrites returns how many the instance committed since it was opened. CrashAfterWrite
// arms a crash right after the n-th durable write from now (n >= 1): that write is durable, and
// nothing the instance does afterwards is (its write path fails or blocks). The returned channel is
// closed when that point is reached; the kit then abandons the instance with Crash, without Close.
// The hook is off until CrashAfterWrite is called; both methods are safe for concurrent use.
//
//	if wc, ok := inst.(harness.WriteCrasher); ok {
//		crashed := wc.CrashAfterWrite(3)
//		<-crashed
//		inst.Crash()
//	}
type WriteCrasher interface {
	DurableWrites() int64
	CrashAfterWrite(n int64) <-chan struct{}
}

// Server is an Instance that serves its HTTP surface itself, on a listener the kit opens, with
// the connection handling its configuration sets: the request and header deadlines and the
// connection cap (spec/http.md, Connections). The in-process driver uses it when an instance
// offers it; otherwise the driver serves Handler with a plain http.Server of its own, and the
// scenarios that judge those limits are not applicable (never passed).
//
// Serve serves ln until the instance is crashed or closed, then returns (the kit ignores what it
// returns). Crash and Close must close ln and every connection accepted from it. Serve is called
// at most once per instance.
//
//	if srv, ok := inst.(harness.Server); ok {
//		go srv.Serve(ln)
//	}
type Server interface {
	Serve(ln net.Listener) error
}

// Factory opens an instance on a configuration. The harness calls it once per scenario with a
// fresh data directory, and again with the same configuration to restart after a crash.
type Factory func(ctx context.Context, cfg sutconfig.SUTConfig) (Instance, error)

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

func harnessErr(format string, args ...any) error {
	return &HarnessError{Err: fmt.Errorf(format, args...)}
}

func fail(op, got, want string) error { return &Failure{Op: op, Got: got, Want: want} }
