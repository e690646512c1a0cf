package harness

import (
	"encoding/json"
	"fmt"

	"github.com/loomcheck/loomcheck/harness/world"
)

// modelSendsMany scripts one answer of N calls of peer.send to analyst and critic in turn, then
// the words.
func (s *threadsSteps) modelSendsMany(match string, n int, reply string) error {
	var calls []world.ToolCall
	for i := range n {
		to := []string{"lab/analyst", "lab/critic"}[i%2]
		b, _ := json.Marshal(map[string]string{"to": to, "text": fmt.Sprintf("note %d", i+1)})
		calls = append(calls, world.ToolCall{ID: s.areas.model.callID(), Name: "peer.send", Arguments: string(b)})
	}
	return s.script(unescape(match), world.Reply{ToolCalls: calls}, world.Reply{Text: unescape(reply)})
}

// peerHoldsEvery makes the peer's answer to every later text wait until released.
func (s *threadsSteps) peerHoldsEvery() error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	s.world.Peer().Always(&world.PeerAnswer{Hold: h})
	return nil
}

// threadsPauseVocabulary lists the steps of features/threads/pause.feature.
func threadsPauseVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the model answers ` + quotedPat + ` by sending (\d+) texts at once to "lab/analyst" and "lab/critic" in turn, then says ` + quotedPat + `$`, a.threads.modelSendsMany, "scripts the model to answer the text with N calls of peer.send in one answer, then with the words"},
		{`^the peer holds every text$`, a.threads.peerHoldsEvery, "makes the peer's answer to every later text wait until released"},
	}
}
