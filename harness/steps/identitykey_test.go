package steps

import "testing"

// The examples of spec/http.md's identity key, and the pairs the escaping tells apart.
func TestIdentityKeyFollowsTheSpec(t *testing.T) {
	for _, c := range []struct{ tenant, actor, obo, want string }{
		{"acme", "alice", "bob", "acme/alice~bob"},
		{"acme", "alice~bob", "", "acme/alice%7Ebob"},
		{"acme/x", "y", "", "acme%2Fx/y"},
		{"acme", "x/y", "", "acme/x%2Fy"},
		{"acme", "100%", "", "acme/100%25"},
		{"", "", "", "/"},
		{"acmé", "😀", "", "acmé/😀"},
	} {
		if got := identityKey(c.tenant, c.actor, c.obo); got != c.want {
			t.Errorf("identityKey(%q, %q, %q) = %q, want %q", c.tenant, c.actor, c.obo, got, c.want)
		}
	}
}
