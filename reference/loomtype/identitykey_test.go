package loomtype_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// keyFields are field values that try every way a key could run two identities together: the
// separators and the escape character alone, doubled, at either end, spelled as the escapes
// themselves, empty, and multi-byte and astral characters.
var keyFields = []string{
	"", "a", "alice", "/", "~", "%", "//", "~~", "%%", "/~", "~/", "a/", "/a", "a~", "~a", "a/b", "a~b",
	"%2F", "%7E", "%25", "%2f", "%7e", "%252F", "a%2Fb", "%/", "%~", "zoë", "ö/ü", "𝔘~𝔫", "🙂", "🙂/🙂~🙂%",
	"\x00", "a\x00b", " ", "tenant/actor~obo",
}

// Every identity built from keyFields has a key of its own, and the key gives the identity back.
func TestIdentityKeyIsInjectiveAndRoundTrips(t *testing.T) {
	seen := map[string]loomtype.Identity{}
	for _, tenant := range keyFields {
		for _, actor := range keyFields {
			for _, obo := range keyFields {
				who := loomtype.Identity{Tenant: tenant, Actor: actor, OnBehalfOf: obo}
				k := who.Key()
				if other, dup := seen[k]; dup {
					t.Fatalf("%#v and %#v share the key %q", other, who, k)
				}
				seen[k] = who
				back, ok := loomtype.ParseIdentityKey(k)
				require.True(t, ok, "key %q of %#v", k, who)
				require.Equal(t, who, back, "key %q", k)
				require.Equal(t, k, who.String())
			}
		}
	}
	require.Len(t, seen, len(keyFields)*len(keyFields)*len(keyFields))
}

// The pairs a plain tenant/actor~onBehalfOf joining runs together have different keys, and an
// identity without any of the three characters keeps the plain form.
func TestIdentityKeySeparatesTheOldCollisions(t *testing.T) {
	for _, c := range []struct {
		who  loomtype.Identity
		want string
	}{
		{loomtype.Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"}, "acme/alice~bob"},
		{loomtype.Identity{Tenant: "acme", Actor: "alice~bob"}, "acme/alice%7Ebob"},
		{loomtype.Identity{Tenant: "acme/x", Actor: "y"}, "acme%2Fx/y"},
		{loomtype.Identity{Tenant: "acme", Actor: "x/y"}, "acme/x%2Fy"},
		{loomtype.Identity{Actor: "alice"}, "/alice"},
		{loomtype.Identity{Tenant: "acme", Actor: "50%"}, "acme/50%25"},
		{loomtype.Identity{Tenant: "acme", Actor: "zoë", OnBehalfOf: "🙂"}, "acme/zoë~🙂"},
	} {
		require.Equal(t, c.want, c.who.Key(), "%#v", c.who)
	}
}

// A text that no identity has as its key is refused, not read as some identity.
func TestParseIdentityKeyRefusesWhatNoKeyIs(t *testing.T) {
	for _, k := range []string{"", "alice", "acme/alice~", "acme/a%2fb", "acme/a%", "acme/a%41", "a/b/c", "a/b~c~d", "a/b~c/d"} {
		who, ok := loomtype.ParseIdentityKey(k)
		require.False(t, ok, "%q", k)
		require.Equal(t, loomtype.Identity{}, who, "%q", k)
	}
}

// FuzzIdentityKey: two identities share a key only when they are the same identity, and a key
// always parses back to its identity.
func FuzzIdentityKey(f *testing.F) {
	f.Add("acme", "alice~bob", "", "acme", "alice", "bob")
	f.Add("acme/x", "y", "", "acme", "x/y", "")
	f.Add("%2F", "a", "", "/", "a", "")
	f.Fuzz(func(t *testing.T, t1, a1, o1, t2, a2, o2 string) {
		x := loomtype.Identity{Tenant: t1, Actor: a1, OnBehalfOf: o1}
		y := loomtype.Identity{Tenant: t2, Actor: a2, OnBehalfOf: o2}
		if (x.Key() == y.Key()) != x.Equal(y) {
			t.Fatalf("%#v and %#v: keys %q and %q", x, y, x.Key(), y.Key())
		}
		back, ok := loomtype.ParseIdentityKey(x.Key())
		if !ok || back != x {
			t.Fatalf("%#v: key %q parses to %#v, %v", x, x.Key(), back, ok)
		}
	})
}
