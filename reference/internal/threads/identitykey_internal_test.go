package threads

import (
	"testing"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestIdentityKeyTellsIdentitiesApart: identities whose fields a NUL-separated list would run
// together (a NUL inside a field) have keys of their own, and an identity without a NUL keeps
// the key stores already hold for it.
func TestIdentityKeyTellsIdentitiesApart(t *testing.T) {
	if got, want := identityKey(loomtype.Identity{Tenant: "acme", Actor: "alice"}), digest("acme", "alice", "")[:32]; got != want {
		t.Fatalf("identity without a NUL: key %s, want the stored form %s", got, want)
	}
	fields := []string{"", "a", "b", "\x00", "a\x00", "\x00b", "a\x00b", "a~b", "a/b", "\x01"}
	seen := map[string]loomtype.Identity{}
	for _, tenant := range fields {
		for _, actor := range fields {
			for _, obo := range fields {
				who := loomtype.Identity{Tenant: tenant, Actor: actor, OnBehalfOf: obo}
				k := identityKey(who)
				if other, dup := seen[k]; dup {
					t.Fatalf("%#v and %#v share the key %s", other, who, k)
				}
				seen[k] = who
			}
		}
	}
}
