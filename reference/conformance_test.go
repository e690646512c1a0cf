package reference_test

import (
	"context"
	"testing"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec"
)

// TestConformance runs the whole conformance suite against the reference engine, in-process.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the conformance suite is not short")
	}
	harness.Run(t, func(ctx context.Context, cfg spec.SUTConfig) (harness.Instance, error) {
		return reference.OpenConfig(ctx, cfg)
	})
}
