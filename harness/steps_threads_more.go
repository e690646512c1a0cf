package harness

import "github.com/loomcheck/loomcheck/harness/world"

// moreSteps are the threads steps that order an answer after a release: the peer's to a text,
// and the model's to a turn.
func (s *threadsSteps) moreSteps() []stepDef {
	const text = `"((?:[^"\\]|\\.)*)"`
	return []stepDef{
		{`^the peer holds the next text, then answers it with (\d+) "([a-z-]+)"$`, s.peerHoldsThenRejects, "makes the peer's answer to the next text wait until released, then be the status and reason"},
		{`^the model answers ` + text + ` by sending (\{[^{}]*\}) after a release, then says ` + text + `$`, s.modelSendsAfterRelease, "scripts the model to answer the text, once released, with one call of peer.send, then with the words"},
	}
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
