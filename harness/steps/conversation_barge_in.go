package steps

import "github.com/cucumber/godog"

// requestsForHoldMessages expects every request to the model whose last user message is text
// (one at least: a system may repeat a failed call, never change it) to hold exactly the messages
// of the table.
func (s *modelSteps) requestsForHoldMessages(text string, t *godog.Table) error {
	n := 0
	for _, r := range s.world.Model().Requests() {
		if lastUser(r.Messages) != unescape(text) {
			continue
		}
		n++
		if err := s.requestHoldsMessages(r.Index+1, t); err != nil {
			return err
		}
	}
	if n == 0 {
		return fail("the model", "no request for "+text, "a request for "+text)
	}
	return nil
}

// conversationBargeInVocabulary lists the steps of features/conversation/barge_in.feature.
func conversationBargeInVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^every request to the model for "((?:[^"\\]|\\.)*)" holds the messages:$`, a.model.requestsForHoldMessages, "expects the requests to the model whose last user message is the text (at least one) each to hold exactly the messages of the table"},
	}
}
