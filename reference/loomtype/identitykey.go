package loomtype

import "strings"

// keyEscaper writes the three characters an identity key gives a meaning to as escapes, so that
// no field of an identity can hold a separator of the key.
var keyEscaper = strings.NewReplacer("%", "%25", "/", "%2F", "~", "%7E")

// Key is the identity's key (spec/http.md, Identity key): each field with "%" written "%25",
// "/" written "%2F" and "~" written "%7E", then the tenant, "/", the actor and, when there is
// one, "~" and onBehalfOf. Two different identities never have the same key, so it is what
// everything kept per identity is kept under (memory scopes, who may stop a turn or see its
// live text, read markers, presence, branches). An identity whose fields hold none of the
// three characters keeps the plain tenant/actor~onBehalfOf form.
//
//	loomtype.Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"}.Key() // "acme/alice~bob"
//	loomtype.Identity{Tenant: "acme", Actor: "alice~bob"}.Key()                 // "acme/alice%7Ebob"
//	loomtype.Identity{Tenant: "acme/x", Actor: "y"}.Key()                       // "acme%2Fx/y"
func (i Identity) Key() string {
	k := keyEscaper.Replace(i.Tenant) + "/" + keyEscaper.Replace(i.Actor)
	if i.OnBehalfOf != "" {
		k += "~" + keyEscaper.Replace(i.OnBehalfOf)
	}
	return k
}

// ParseIdentityKey is the identity whose Key is key; ok is false when key is no identity's key
// (no "/", an escape other than the three Key writes, "~" with nothing after it).
//
//	who, ok := loomtype.ParseIdentityKey("acme/alice%7Ebob") // {acme, alice~bob}, true
func ParseIdentityKey(key string) (who Identity, ok bool) {
	tenant, rest, found := strings.Cut(key, "/")
	if !found {
		return Identity{}, false
	}
	actor, obo, _ := strings.Cut(rest, "~")
	who = Identity{Tenant: unescapeKey(tenant), Actor: unescapeKey(actor), OnBehalfOf: unescapeKey(obo)}
	if who.Key() != key {
		return Identity{}, false
	}
	return who, true
}

// unescapeKey undoes keyEscaper; a malformed escape is left as it is, which the caller's
// comparison with the re-encoded key then refuses.
func unescapeKey(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	return strings.NewReplacer("%25", "%", "%2F", "/", "%7E", "~").Replace(s)
}
