package quota_test

import (
	"context"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestPrincipalsWhoseNamesHoldSeparatorsAreApart: identities that differ only in where a name's
// separator-like characters fall ("/" between tenant and actor, "~" before the one acted for)
// are different principals, each with bounds and an allowance of its own.
func TestPrincipalsWhoseNamesHoldSeparatorsAreApart(t *testing.T) {
	ctx := context.Background()
	pairs := [][2]loomtype.Identity{
		{{Tenant: "t", Actor: "a~b"}, {Tenant: "t", Actor: "a", OnBehalfOf: "b"}},
		{{Tenant: "t", Actor: "a/b"}, {Tenant: "t/a", Actor: "b"}},
		{{Tenant: "t", Actor: "a", OnBehalfOf: "b~c"}, {Tenant: "t", Actor: "a~b", OnBehalfOf: "c"}},
	}
	for name, open := range backends {
		t.Run(name, func(t *testing.T) {
			sa, _ := open(t)
			q := engine(t, sa, "engine")
			for _, p := range pairs {
				for _, kind := range kinds {
					if err := q.Admit(ctx, quota.Slot{Kind: kind, Who: p[0], ID: "s1"}, 1, 0); err != nil {
						t.Fatalf("%+v: %v", p[0], err)
					}
					if err := q.Admit(ctx, quota.Slot{Kind: kind, Who: p[1], ID: "s2"}, 1, 0); err != nil {
						t.Fatalf("%+v after %+v took its one %s slot: %v", p[1], p[0], kind, err)
					}
				}
				if err := q.Take(ctx, p[0], 1, 0); err != nil {
					t.Fatalf("%+v: %v", p[0], err)
				}
				if err := q.Take(ctx, p[1], 1, 0); err != nil {
					t.Fatalf("%+v after %+v took its one POST: %v", p[1], p[0], err)
				}
			}
		})
	}
}
