package explore_test

import (
	"context"
	"fmt"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/explore"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Exploring an in-process implementation: its instances implement harness.WriteCrasher (the
// reference engine's do). Here, the plain dialogue at three of its crash points.
func ExampleRun() {
	factory := func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
		return reference.OpenConfig(ctx, cfg)
	}
	rep, err := explore.Run(context.Background(), explore.Options{Factory: factory, Dialogues: []string{"plain"}, MaxPoints: 3})
	if err != nil {
		fmt.Println("harness error:", err)
		return
	}
	d := rep.Dialogues[0]
	fmt.Printf("%s: %d crash points, %d findings\n", d.Name, len(d.Points), rep.Findings)
	// Output: plain: 3 crash points, 0 findings
}
