package agent

import (
	"errors"
	"fmt"
	"slices"
)

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

// ErrDenied is matched (errors.Is) by every authority denial: a call of a tool the principal is
// not granted, made by the model or by the run itself (its write-back).
var ErrDenied = errors.New("denied")

// DeniedError is an authority denial of one tool: Permitted refused it, so it was never called.
// It is what the error hook is told under the denial's error id.
//
//	var d *agent.DeniedError
//	if errors.As(err, &d) { log.Print("no grant for ", d.Tool) }
type DeniedError struct {
	Tool string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("tool %q denied: the asker has no grant for it", e.Tool)
}

// Is makes every DeniedError match ErrDenied.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// Authorize is Permitted as an error: nil when the principal of cfg may call tool, else a
// *DeniedError naming it.
func Authorize(cfg Config, tool string) error {
	if !Permitted(cfg, tool) {
		return &DeniedError{Tool: tool}
	}
	return nil
}
