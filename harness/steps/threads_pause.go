package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

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
		{`^` + namePat + ` (pauses|unpauses|revokes|reads) the connection "lab"$`, a.threads.connectionOp, "pauses, unpauses, revokes or reads the connection as who"},
		{`^the answer is the connection "lab" (open|paused|revoked)$`, a.threads.answerConnection, "expects the last answer to be exactly 200 {\"id\": \"lab\", \"state\": S}"},
	}
}

// answerConnection expects exactly 200 {"id": "lab", "state": S}.
func (s *threadsSteps) answerConnection(state string) error {
	return s.exactly(http.StatusOK, map[string]string{"id": world.PeerConnection, "state": state})
}

// connectionOp pauses, unpauses, revokes or reads the connection as who.
func (s *threadsSteps) connectionOp(who, op string) error {
	method, tail := http.MethodPost, "/"+strings.TrimSuffix(op, "s")
	if op == "reads" {
		method, tail = http.MethodGet, ""
	}
	s.probe(who, method, "/connections/no-such-connection"+tail, nil)
	if method == http.MethodGet {
		_, err := s.request(who, method, "/connections/"+world.PeerConnection+tail, nil, reqOpts{})
		return err
	}
	_, err := s.request(who, method, "/connections/"+world.PeerConnection+tail, nil, reqOpts{})
	return err
}
