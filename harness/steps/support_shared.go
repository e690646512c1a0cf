package steps

import (
	"fmt"
	"strings"
)

// names reads "bob", "bob and carol", "bob, carol and dave".
func names(list string) []string {
	list = strings.ReplaceAll(list, " and ", ", ")
	return splitList(list)
}

// identityJSON is the wire form of a known principal's identity.
func identityJSON(name string) map[string]string {
	p := principals[name]
	return identityMap(p.Tenant, p.Actor, p.OnBehalfOf)
}

// memberCount reads "98 members": that many fresh participants with no token of their own.
func memberCount(list string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(list, "%d members", &n); err != nil || fmt.Sprintf("%d members", n) != list {
		return 0, false
	}
	return n, true
}

// newMember is the wire identity of a fresh participant the scenario has no token for.
func (s *scenario) newMember() map[string]string {
	s.msgSeq++
	return identityMap("acme", fmt.Sprintf("member-%d", s.msgSeq), "")
}

// identityText renders a wire identity as its identity key, with absent fields empty.
func identityText(id map[string]string) string {
	return identityKey(id["tenant"], id["actor"], id["onBehalfOf"])
}

func changesText(cs []partChange) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Op + " " + identityText(c.Identity) + " by " + identityText(c.By)
	}
	return out
}

// identityMap is the wire form of an identity: absent fields are left out.
func identityMap(tenant, actor, onBehalfOf string) map[string]string {
	m := map[string]string{"actor": actor}
	if tenant != "" {
		m["tenant"] = tenant
	}
	if onBehalfOf != "" {
		m["onBehalfOf"] = onBehalfOf
	}
	return m
}

// viewHistory reads the current conversation's history as viewer, waiting until pred holds.
func (s *scenario) viewReply(viewer string, turn int64) (entry, error) {
	es, err := s.waitHistory(viewer, fmt.Sprintf("a reply to turn %d as %s sees it", turn, viewer), func(es []entry) bool {
		_, ok := reply(es, turn)
		return ok
	})
	if err != nil {
		return entry{}, err
	}
	e, _ := reply(es, turn)
	return e, nil
}
