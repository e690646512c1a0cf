package agent

import (
	"context"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying who a tool call is made for. The loop puts Config.Principal
// on the context of every tool call, so a ToolRunner can name it to the tool (hostio.Tools sends
// it as the Loom-Tenant, Loom-Actor and Loom-On-Behalf-Of headers).
//
//	ctx = agent.WithPrincipal(ctx, loomtype.Identity{Tenant: "acme", Actor: "alice"})
func WithPrincipal(ctx context.Context, p loomtype.Identity) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal put on ctx; ok is false when there is none.
//
//	if p, ok := agent.PrincipalFrom(ctx); ok { req.Header.Set("Loom-Actor", url.PathEscape(p.Actor)) }
func PrincipalFrom(ctx context.Context) (loomtype.Identity, bool) {
	p, ok := ctx.Value(principalKey{}).(loomtype.Identity)
	return p, ok
}
