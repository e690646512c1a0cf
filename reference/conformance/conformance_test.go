package conformance_test

import (
	"context"
	"runtime/debug"
	"testing"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestConformance runs the whole conformance suite against the reference engine, in-process, as
// one subtest per profile, each a run of its own narrowed to that profile. The profiles run two at
// a time (go test's -parallel, which defaults to the number of CPUs, bounds them).
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite is not short")
	}
	// The suite allocates briskly; a heap allowed to grow four times past what is live before
	// it is collected (instead of twice) spends about a fifth less CPU under the race detector,
	// for about twice the memory.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	cat, err := spec.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range cat.ProfileNames() {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			// The tag hands godog the profile's scenarios alone; the profile alone would leave it
			// every scenario of the features to walk, each of another profile bound and matched
			// step by step before it is skipped, in each of the profiles' runs.
			harness.RunWith(t, harness.Options{Factory: open, Profiles: []string{p}, Tags: "@profile:" + p, StepTimeout: stepTimeout})
		})
	}
}

// stepTimeout bounds every wait of a step here: three times the kit's default (LOOMCHECK_STEP_TIMEOUT
// or 10 s, 40 s under the race detector), so that a machine busy with other work slows this gate
// rather than failing it. Every wait ends as soon as what it waits for is seen; only a step that
// fails waits it out.
var stepTimeout = 3 * harness.DefaultStepTimeout()

func open(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
	return reference.OpenConfig(ctx, cfg)
}
