package run

import (
	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// DefaultMaxIterationsCeiling is the most model calls a run may ask for (Options.MaxIterations)
// when Deps.MaxIterations sets no ceiling.
const DefaultMaxIterationsCeiling = 64

// ceiling is the most model calls a run may ask for.
func (rs *Runs) ceiling() int {
	if rs.deps.MaxIterations > 0 {
		return rs.deps.MaxIterations
	}
	return DefaultMaxIterationsCeiling
}

// maxIterations is the bound on the model calls of a run started with opt: what it asked for,
// else DefaultMaxIterations, never more than the ceiling.
func (rs *Runs) maxIterations(opt Options) int {
	n := opt.MaxIterations
	if n <= 0 {
		n = DefaultMaxIterations
	}
	return min(n, rs.ceiling())
}

// checkMaxIterations refuses a negative bound and one over the ceiling, by name.
func (rs *Runs) checkMaxIterations(opt Options) error {
	if opt.MaxIterations < 0 || opt.MaxIterations > rs.ceiling() {
		return loomtype.BadRequest("maxIterations", "")
	}
	return nil
}

// grantsOf are the tools owner is granted among the configured ones, as Deps.Allowed answers when
// the run starts; nil when every tool is (no Deps.Allowed). They are recorded with the run, so
// every call it makes, after a restart too, is held to what its owner held when it started.
func (rs *Runs) grantsOf(owner loomtype.Identity) *agent.Grants {
	if rs.deps.Allowed == nil {
		return nil
	}
	g := agent.Grants{Tools: []string{}}
	for _, t := range rs.deps.Tools {
		if rs.deps.Allowed(owner, t.Name) {
			g.Tools = append(g.Tools, t.Name)
		}
	}
	return &g
}

// checkGranted refuses a tools option that names a tool the owner is not granted, as "tools".
func checkGranted(g *agent.Grants, opt Options) error {
	for _, name := range opt.Tools {
		if g != nil && !g.Allows(name) {
			return loomtype.BadRequest("tools", "")
		}
	}
	return nil
}

// grantsConfig holds the run's loop to the grants recorded when it started; a run recorded
// without them is asked of Deps.Allowed at each call, as it was then.
func (rs *Runs) grantsConfig(cfg *agent.Config, owner loomtype.Identity, in input) {
	if in.Grants != nil {
		cfg.Grants = in.Grants
		return
	}
	if rs.deps.Allowed != nil {
		cfg.Allowed = func(tool string) bool { return rs.deps.Allowed(owner, tool) }
	}
}
