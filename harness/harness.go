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
	"time"

	"github.com/loomcheck/loomcheck/harness/steps"
	"github.com/loomcheck/loomcheck/harness/sut"
	"github.com/loomcheck/loomcheck/harness/verdict"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Instance is one running instance of a system under test, served in-process (sut.Instance:
// Handler, Crash, Close).
type Instance = sut.Instance

// WriteCrasher is an Instance that can crash itself right after a chosen durable write; the
// crash exploration (harness/explore) needs it, the rest of the kit does not (sut.WriteCrasher).
//
//	if wc, ok := inst.(harness.WriteCrasher); ok {
//		crashed := wc.CrashAfterWrite(3)
//		<-crashed
//		inst.Crash()
//	}
type WriteCrasher = sut.WriteCrasher

// Server is an Instance that serves its HTTP surface itself, on a listener the kit opens, with
// the connection handling its configuration sets (sut.Server).
//
//	if srv, ok := inst.(harness.Server); ok {
//		go srv.Serve(ln)
//	}
type Server = sut.Server

// Factory opens an instance on a configuration. The harness calls it once per scenario with a
// fresh data directory, and again with the same configuration to restart after a crash.
type Factory = sut.Factory

// Databases makes and removes the server databases of Options.Databases (sut.Databases).
//
//	opt.Databases = myDatabases{admin: "postgres://loom@127.0.0.1/postgres"}
type Databases = sut.Databases

// Sentinel errors that classify what went wrong (the same values as package verdict's).
var (
	// ErrHarness marks a fault of the kit itself: the world failed, a step panicked, the SUT
	// could not be started. It is reported as harness-error, never as a SUT failure.
	ErrHarness = verdict.ErrHarness
	// ErrNotApplicable marks a scenario this run cannot judge (a profile the SUT does not
	// claim, a crash against a remote target).
	ErrNotApplicable = verdict.ErrNotApplicable
	// ErrNonConformant is what every *Failure matches.
	ErrNonConformant = verdict.ErrNonConformant
)

// Failure is the SUT breaking a rule: which operation, what it got, what was wanted
// (verdict.Failure, where its fields are described).
//
//	return &harness.Failure{Op: "GET /conversations/c1", Got: "429", Want: "404"}
type Failure = verdict.Failure

// TimeoutNote is the sentence a failure that ran out of the kit's step timeout d carries: that
// the bound was the kit's, and how to raise it.
//
//	fmt.Println(harness.TimeoutNote(10 * time.Second))
func TimeoutNote(d time.Duration) string { return verdict.TimeoutNote(d) }

// HarnessError wraps a fault of the kit (verdict.HarnessError).
type HarnessError = verdict.HarnessError

func harnessErr(format string, args ...any) error { return verdict.Harness(format, args...) }

// ContractRequirement is the requirement every exchange is checked against: a violation is one
// finding of the run under it, and fails only the scenarios that judge it.
const ContractRequirement = steps.ContractRequirement

// Step is one step of the kit's vocabulary, as `loomcheck steps` lists it (steps.Step: its
// pattern, the step file it lives in, and what it does).
type Step = steps.Step

// Vocabulary is every step the kit defines, area by area in a fixed order; each pattern is a
// valid regular expression. It runs nothing and is safe for concurrent use.
//
//	for _, st := range harness.Vocabulary() {
//		fmt.Printf("%-12s %s\n", st.Area, st.Pattern)
//	}
func Vocabulary() []Step { return steps.Vocabulary() }

// RemoteConfig is the configuration a remote target must be started with to be judged by a run
// whose world is w: the configuration every scenario starts from, with a fresh signing key. Give
// the same document to the run (Options.RemoteConfig), so it knows the key and the settings.
//
//	cfg := harness.RemoteConfig(w, sutconfig.SUTConfig{Listen: "127.0.0.1:8080", DataDir: "loom-data"})
func RemoteConfig(w *world.World, base sutconfig.SUTConfig) sutconfig.SUTConfig {
	return steps.RemoteConfig(w, base)
}

// SettingDefault returns the default schemas/sut-config.schema.json writes beside the setting
// at path ("conversation.maxScan"), and whether it writes one.
func SettingDefault(path string) (any, bool) { return steps.SettingDefault(path) }
