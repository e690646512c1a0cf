package steps

import (
	"net/http"
	"net/url"

	"github.com/loomcheck/loomcheck/harness/world"
)

// answerStopped expects exactly 202 {"stopped": b}.
func (s *threadsSteps) answerStopped(b string) error {
	return s.exactly(http.StatusAccepted, map[string]bool{"stopped": b == "true"})
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

// threadsStopVocabulary lists the steps of features/threads/stop.feature.
func threadsStopVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the answer is stopped (true|false)$`, a.threads.answerStopped, "expects the last answer to be exactly 202 {\"stopped\": b}"},
		{`^the model answers ` + quotedPat + ` by sending (\{[^{}]*\}) after a release, then says ` + quotedPat + `$`, a.threads.modelSendsAfterRelease, "scripts the model to answer the text, once released, with one call of peer.send, then with the words"},
		{`^` + namePat + ` stops the agent conversation of thread "([^"]+)"$`, a.threads.stops, "stops the agent of the thread's conversation as who"},
	}
}

// stops stops the agent of the thread's conversation as who.
func (s *threadsSteps) stops(who, alias string) error {
	id, err := s.acID(alias)
	if err != nil {
		return err
	}
	s.probe(who, http.MethodPost, "/agent-conversations/no-such-agent-conversation/stop", nil)
	_, err = s.request(who, http.MethodPost, "/agent-conversations/"+url.PathEscape(id)+"/stop", nil, reqOpts{})
	return err
}
