package agent

import "slices"

// Grants are the tools a principal may call (spec/world.md, Identity): every tool when All, else
// exactly the tools named. The zero Grants allows no tool.
//
//	g := agent.GrantsOf(p.Grants) // nil: every tool; []string{}: none
//	if !g.Allows("transfer") { ... }
type Grants struct {
	All   bool     `json:"all,omitempty"`
	Tools []string `json:"tools,omitempty"`
}

// GrantsOf reads a principal's grants as the configuration writes them: absent (nil) is every
// tool, a list (an empty one included) exactly the tools it names.
func GrantsOf(tools []string) Grants {
	if tools == nil {
		return Grants{All: true}
	}
	return Grants{Tools: slices.Clone(tools)}
}

// Allows reports whether g lets its principal call tool.
func (g Grants) Allows(tool string) bool { return g.All || slices.Contains(g.Tools, tool) }

// Permitted is the one grant check of the loop, made before every tool call of every runner: the
// call is the principal's only when cfg.Grants (nil: every tool) and cfg.Allowed (nil: every
// tool) both allow it. A call it refuses is an authority denial: never made, and the run ends
// Failed with reason "denied".
func Permitted(cfg Config, tool string) bool {
	if cfg.Grants != nil && !cfg.Grants.Allows(tool) {
		return false
	}
	return cfg.Allowed == nil || cfg.Allowed(tool)
}
