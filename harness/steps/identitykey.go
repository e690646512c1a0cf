package steps

import "strings"

// identityKey is an identity's key as spec/http.md defines it ("Identity key"): each field with
// '%', '/' and '~' written %25, %2F and %7E, then tenant "/" actor, and "~" onBehalfOf for a
// delegate. The kit computes it from the spec, never from the engine.
func identityKey(tenant, actor, onBehalfOf string) string {
	esc := strings.NewReplacer("%", "%25", "/", "%2F", "~", "%7E")
	k := esc.Replace(tenant) + "/" + esc.Replace(actor)
	if onBehalfOf != "" {
		k += "~" + esc.Replace(onBehalfOf)
	}
	return k
}
