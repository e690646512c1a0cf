package reference

import (
	"fmt"
	"slices"
	"sync"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// maxSeenGrants bounds the principals whose grants the identity service answered that a grant
// table keeps; past it the oldest it holds makes way (that principal's next request learns them
// again).
const maxSeenGrants = 1 << 16

// grantTable holds the tools each principal is granted (spec/world.md, Identity): the static
// principals' from the configuration, and each other principal's as the identity service last
// answered for it. A principal it knows nothing of is granted every tool, as one whose grants
// are absent. Keyed by the whole identity (a comparable struct, so the key is injective). Safe for
// concurrent use.
type grantTable struct {
	static map[loomtype.Identity]agent.Grants

	mu    sync.Mutex
	seen  map[loomtype.Identity]agent.Grants
	order []loomtype.Identity // the keys of seen, oldest first
}

// newGrantTable reads the grants of the static principals. Two tokens that speak for one
// identity must grant it the same tools: grants are the principal's, not the token's.
//
// Errors: loomtype.ErrConfig (wrapped) for an identity granted two ways.
func newGrantTable(principals map[string]sutconfig.Principal) (*grantTable, error) {
	t := &grantTable{static: map[loomtype.Identity]agent.Grants{}, seen: map[loomtype.Identity]agent.Grants{}}
	for _, p := range principals {
		who, g := identityOf(p), agent.GrantsOf(p.Grants)
		if had, ok := t.static[who]; ok && (had.All != g.All || !slices.Equal(had.Tools, g.Tools)) {
			return nil, fmt.Errorf("%w: identity.principals grant %s two different sets of tools", loomtype.ErrConfig, who)
		}
		t.static[who] = g
	}
	return t, nil
}

func identityOf(p sutconfig.Principal) loomtype.Identity {
	return loomtype.Identity{Tenant: p.Tenant, Actor: p.Actor, OnBehalfOf: p.OnBehalfOf}
}

// learn keeps the grants a request's principal was resolved with.
func (t *grantTable) learn(p sutconfig.Principal) {
	who := identityOf(p)
	if _, ok := t.static[who]; ok {
		return
	}
	g := agent.GrantsOf(p.Grants)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[who]; !ok {
		if len(t.order) >= maxSeenGrants {
			delete(t.seen, t.order[0])
			t.order = t.order[1:]
		}
		t.order = append(t.order, who)
	}
	t.seen[who] = g
}

// allowed reports whether who may call tool: the deps' Allowed of runs and conversation turns.
func (t *grantTable) allowed(who loomtype.Identity, tool string) bool {
	if g, ok := t.static[who]; ok {
		return g.Allows(tool)
	}
	t.mu.Lock()
	g, ok := t.seen[who]
	t.mu.Unlock()
	return !ok || g.Allows(tool)
}
