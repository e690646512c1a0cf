package harness

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

// peerSendsMany sends n texts as the peer on the thread, "text 1" to "text n", and expects each
// to be acknowledged (the first answer that is not ends the step).
func (s *threadsSteps) peerSendsMany(n int, from, to, alias string) error {
	for i := 1; i <= n; i++ {
		if err := s.peerSends(fmt.Sprintf("text %d", i), from, to, alias); err != nil {
			return err
		}
		if err := s.answerAck(); err != nil {
			return err
		}
	}
	return nil
}

// peerPosts posts the body as it is with the accept token.
func (s *threadsSteps) peerPosts(body string) error {
	_, err := s.postText(nil, []byte(body), "Bearer "+world.PeerAcceptToken)
	return err
}

// peerPostsWithToken posts a well-formed text with no token or the named one.
func (s *threadsSteps) peerPostsWithToken(alias, tok string) error {
	s.ready()
	t := world.PeerText{V: 1, Thread: randomID("t_", 18), Message: randomID("k_", 9), From: "analyst", To: "planner", Text: "hello"}
	s.bound["thread "+alias] = t.Thread
	s.sent = &t
	auth := ""
	switch {
	case tok == "the send token":
		auth = "Bearer " + world.PeerSendToken
	case strings.HasPrefix(tok, "the token "):
		auth = "Bearer " + strings.Trim(strings.TrimPrefix(tok, "the token "), `"`)
	}
	_, err := s.postText(t, nil, auth)
	return err
}

// peerPostsSized posts a text of the size from analyst to planner.
func (s *threadsSteps) peerPostsSized(n int, alias string) error {
	s.ready()
	t := world.PeerText{V: 1, Thread: randomID("t_", 18), Message: randomID("k_", 9), From: "analyst", To: "planner", Text: strings.Repeat("é", n/2) + strings.Repeat("x", n%2)}
	s.bound["thread "+alias] = t.Thread
	s.pairs[alias] = threadPair{role: "planner", peerRole: "analyst"}
	s.sent = &t
	_, err := s.postText(t, nil, "Bearer "+world.PeerAcceptToken)
	return err
}

// answerSame expects the last answer to equal the one before it.
func (s *threadsSteps) answerSame() error {
	if s.prev == nil || s.last == nil {
		return harnessErr("two answers are needed")
	}
	want := fmt.Sprintf("%d %s", s.prev.status, canonJSON(string(s.prev.body)))
	got := fmt.Sprintf("%d %s", s.last.status, canonJSON(string(s.last.body)))
	if got != want {
		return fail(s.last.op, got, "the answer before it: "+want)
	}
	return nil
}

// answerBadRequest expects exactly 400 bad-request naming the member.
func (s *threadsSteps) answerBadRequest(member string) error {
	return s.exactly(http.StatusBadRequest, map[string]string{"reason": "bad-request", "detail": member})
}

// secondConnection adds the connection field to the box's configuration: the kit's peer at the
// same address, which the peer reaches under a token of its own.
func (s *threadsSteps) secondConnection() error {
	if s.run.remoteCfg != nil || s.started {
		return harnessErr("the second connection is configured before the system starts")
	}
	return s.configure(func(c *spec.SUTConfig) {
		if len(c.Threads.Connections) == 0 {
			return // not connected: the peer's posts on field are refused, and the scenario says so
		}
		lab := c.Threads.Connections[0]
		c.Threads.Connections = append(c.Threads.Connections, spec.ConnectionConfig{ID: "field", URL: lab.URL,
			Send: lab.Send, Accept: fieldAcceptToken, Owner: lab.Owner})
	})
}

// peerPostsOnField posts the body to the box's texts as the peer, on the connection field.
func (s *threadsSteps) peerPostsOnField(body string) error {
	_, err := s.postText(nil, []byte(body), "Bearer "+fieldAcceptToken)
	return err
}

// threadsWireVocabulary lists the steps of features/threads/wire.feature.
func threadsWireVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the peer sends (\d+) texts from "([a-z0-9-]+)" to "([a-z0-9-]+)" on thread "([^"]+)", each acknowledged$`, a.threads.peerSendsMany, "sends N texts, \"text 1\" to \"text N\", as the peer on the thread and expects a 200 ack for each"},
		{`^the peer posts (\{.*\})$`, a.threads.peerPosts, "posts the body to the box's texts as the peer, with the accept token"},
		{`^the peer posts a text on thread "([^"]+)" with (no token|the token "[^"]*"|the send token)$`, a.threads.peerPostsWithToken, "posts a well-formed text with no token or the named one"},
		{`^the peer posts a text of (\d+) bytes on thread "([^"]+)"$`, a.threads.peerPostsSized, "posts a text of the size from analyst to planner"},
		{`^the answer is the same as before$`, a.threads.answerSame, "expects the last answer to equal the one before it, status and body"},
		{`^the answer is 400 bad-request "(\w+)"$`, a.threads.answerBadRequest, "expects the last answer to be exactly 400 {\"reason\": \"bad-request\", \"detail\": member}"},
		{`^the box has a second connection "field" to the same peer$`, a.threads.secondConnection, "adds the connection field to the box's configuration: the kit's peer again, under accept token " + fieldAcceptToken + ", owner olga"},
		{`^the peer posts on the connection "field" (\{.*\})$`, a.threads.peerPostsOnField, "posts the body to the box's texts as the peer, with the connection field's accept token"},
	}
}
