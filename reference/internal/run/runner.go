package run

import (
	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Runners of a run (Options.Runner): the canonical loop, one journaled frame per model call and
// per tool call, and the deprecated single frame, the whole loop in one journaled step.
const (
	RunnerLoop        = "loop"
	RunnerSingleFrame = "single-frame"
)

// checkRunner checks the runner options: runner is "", RunnerLoop or RunnerSingleFrame, and
// acceptAtLeastOnce is set only with the single-frame runner, whose refusal it opts out of.
func checkRunner(opt Options) error {
	switch opt.Runner {
	case "", RunnerLoop, RunnerSingleFrame:
	default:
		return loomtype.BadRequest("runner", "")
	}
	if opt.AcceptAtLeastOnce && opt.Runner != RunnerSingleFrame {
		return loomtype.BadRequest("acceptAtLeastOnce", "")
	}
	return nil
}

// runLoop runs the run's loop with the runner its options name.
func (rs *Runs) runLoop(c *kernel.Context, cfg agent.Config, opt Options, msgs []model.Message) (agent.Result, error) {
	if opt.Runner != RunnerSingleFrame {
		return agent.Run(c, cfg, msgs)
	}
	sf := agent.SingleFrame{AcceptAtLeastOnce: opt.AcceptAtLeastOnce, NotIdempotent: func(tool string) bool {
		for _, t := range rs.deps.NotIdempotent {
			if t == tool {
				return true
			}
		}
		return false
	}}
	return agent.RunSingleFrame(c, cfg, sf, msgs)
}
