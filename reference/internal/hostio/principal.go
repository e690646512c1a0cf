package hostio

import (
	"context"
	"net/url"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
)

// Headers that name, on a tool call, the principal the system acts for (spec/world.md, Tools).
// Tools.Call sends them for the principal agent.WithPrincipal put on its context.
//
//	_, err := tools.Call(agent.WithPrincipal(ctx, who), "lookup", args, key)
const (
	HeaderTenant     = "Loom-Tenant"
	HeaderActor      = "Loom-Actor"
	HeaderOnBehalfOf = "Loom-On-Behalf-Of"
)

// toolHeaders are the headers of one tool call: its idempotency key and, when ctx carries a
// principal (agent.WithPrincipal), one header per field that is present, percent-encoded as
// UTF-8 (RFC 3986).
func toolHeaders(ctx context.Context, key string) map[string]string {
	h := map[string]string{"Idempotency-Key": key}
	p, ok := agent.PrincipalFrom(ctx)
	if !ok {
		return h
	}
	for name, v := range map[string]string{HeaderTenant: p.Tenant, HeaderActor: p.Actor, HeaderOnBehalfOf: p.OnBehalfOf} {
		if v != "" {
			h[name] = url.PathEscape(v)
		}
	}
	return h
}

// typedFailure keeps a tool's typed failure only when every failure of its chain names a class
// (the form spec/world.md defines); anything else is an untyped, ordinary failure.
func typedFailure(f *agent.Failure) *agent.Failure {
	for c := f; c != nil; c = c.Cause {
		if c.Class == "" {
			return nil
		}
	}
	return f
}
