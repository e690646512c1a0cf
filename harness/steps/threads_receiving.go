package steps

import "github.com/loomcheck/loomcheck/harness/world"

// peerSends sends a text as the peer on the thread named by its alias.
func (s *threadsSteps) peerSends(txt, from, to, alias string) error {
	s.ready()
	id, ok := s.bound["thread "+alias]
	if !ok {
		id = randomID("t_", 18)
		s.bound["thread "+alias] = id
		s.pairs[alias] = threadPair{role: to, peerRole: from}
	}
	t := world.PeerText{V: 1, Thread: id, Message: randomID("k_", 9), From: from, To: to, Text: unescape(txt)}
	s.bound["message "+t.Text] = t.Message
	s.sent = &t
	_, err := s.postText(t, nil, "Bearer "+world.PeerAcceptToken)
	return err
}

// threadsReceivingVocabulary lists the steps of features/threads/receiving.feature.
func threadsReceivingVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the peer sends ` + quotedPat + ` from "([a-z0-9-]+)" to "([a-z0-9-]+)" on thread "([^"]+)"$`, a.threads.peerSends, "sends a text as the peer on the thread named by its alias (a new random thread id for a new alias)"},
	}
}
