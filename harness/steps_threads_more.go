package harness

import (
	"net/http"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

// moreSteps are the threads steps that order an answer after a release: the peer's to a text,
// and the model's to a turn.
func (s *threadsSteps) moreSteps() []stepDef {
	return []stepDef{
		{`^the peer holds the next text, then answers it with (\d+) "([a-z-]+)"$`, s.peerHoldsThenRejects, "makes the peer's answer to the next text wait until released, then be the status and reason"},
		{`^the model answers ` + quotedPat + ` by sending (\{[^{}]*\}) after a release, then says ` + quotedPat + `$`, s.modelSendsAfterRelease, "scripts the model to answer the text, once released, with one call of peer.send, then with the words"},
		{`^"([^"]+)" says ` + quotedPat + ` to "([a-z0-9-]+)" under key "([^"]+)"$`, s.saysUnderKey, "runs a turn in who's conversation with the role under the Idempotency-Key, opening the conversation first when the scenario has not; the answer is left to the next step"},
		{`^"([^"]+)" creates task "[^"]+" titled ` + quotedPat + ` under key "([^"]+)"$`, s.createsTaskUnderKey, "creates a task with the title under the Idempotency-Key; the answer (and the task's id) is left to the next step"},
		{`^"([^"]+)" starts a run of "([a-z0-9-]+)" on task "([^"]+)" with ` + quotedPat + ` under key "([^"]+)"$`, s.startsRunUnderKey, "starts a run of the role on the task with the prompt under the Idempotency-Key; the answer is left to the next step"},
		{`^the box has a second connection "field" to the same peer$`, s.secondConnection, "adds the connection field to the box's configuration: the kit's peer again, under accept token " + fieldAcceptToken + ", owner olga"},
		{`^the peer posts on the connection "field" (\{.*\})$`, s.peerPostsOnField, "posts the body to the box's texts as the peer, with the connection field's accept token"},
	}
}

// saysUnderKey runs a turn in who's conversation with the role under a client key.
func (s *threadsSteps) saysUnderKey(who, txt, role, key string) error {
	s.ready()
	if _, ok := s.bound["conv "+who+" "+role]; !ok {
		if err := s.opensConversation(who, role); err != nil {
			return err
		}
	}
	_, err := s.call(who, http.MethodPost, "/roles/"+role+"/conversation/messages", map[string]string{"text": unescape(txt)},
		map[string]string{"Idempotency-Key": s.own(key)})
	return err
}

// createsTaskUnderKey creates a task under a client key; the task's alias is bound by the
// placeholder of the step that checks the answer.
func (s *threadsSteps) createsTaskUnderKey(who, title, key string) error {
	s.ready()
	_, err := s.call(who, http.MethodPost, "/tasks", map[string]any{"title": unescape(title)}, map[string]string{"Idempotency-Key": s.own(key)})
	return err
}

// startsRunUnderKey starts a run on the task under a client key.
func (s *threadsSteps) startsRunUnderKey(who, role, alias, prompt, key string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	_, err = s.call(who, http.MethodPost, "/tasks/"+id+"/runs", map[string]string{"role": role, "prompt": unescape(prompt)},
		map[string]string{"Idempotency-Key": s.own(key)})
	return err
}

// peerHoldsThenRejects makes the peer's answer to the next text wait until released, and then be
// the status and reason: the box has the text in hand, not yet answered, until the scenario says.
func (s *threadsSteps) peerHoldsThenRejects(status int, reason string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	if err := s.world.Peer().Script(world.PeerAnswer{Hold: h, Status: status, Reason: reason}); err != nil {
		return harnessErr("script the peer: %v", err)
	}
	return nil
}

// modelSendsAfterRelease scripts the model to answer the text with one call of peer.send once
// "the model is released", then with the words. A turn whose execution ended before the release
// asks no more: the call is never made.
func (s *threadsSteps) modelSendsAfterRelease(match, args, reply string) error {
	h := s.world.NewHold()
	s.areas.model.holds = append(s.areas.model.holds, h)
	call := s.sendCall(args)
	call.Hold = h
	return s.script(unescape(match), call, world.Reply{Text: unescape(reply)})
}

// fieldAcceptToken is the token the peer presents on the second connection, field.
const fieldAcceptToken = "field-accept-4Kp9w"

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
