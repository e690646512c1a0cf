package harness_test

import (
	"context"
	"testing"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestConformance is how a third-party Go implementation runs the whole conformance suite from
// its own tests; here the reference engine stands in for it.
func testConformance(t *testing.T) {
	harness.Run(t, func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
		return reference.OpenConfig(ctx, cfg) // your implementation here
	})
}

// A factory opens a fresh instance per scenario, and again on the same configuration to restart
// it after a crash. Call harness.Run from a test function with it (this example compiles but,
// having no output, is not run: the whole suite is TestConformance in package
// reference/conformance).
func ExampleRun() {
	_ = testConformance
}
