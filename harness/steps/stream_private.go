package steps

import "encoding/json"

// sendsPrivate posts a private message: the enc as the step wrote it, never a text.
func (s *steerSteps) sendsPrivate(who, id, enc string) error {
	if !json.Valid([]byte(enc)) {
		return harnessErr("the enc %s is not JSON", enc)
	}
	body := map[string]any{"messageId": id, "enc": json.RawMessage(enc)}
	return s.post(who, "/messages", body, reqOpts{})
}

// streamPrivateVocabulary lists the steps of features/stream/private.feature.
func streamPrivateVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) sends the private message "([^"]*)" sealed as (\{.*\})$`, a.steer.sendsPrivate, "posts a private message under the id with the JSON as its enc, as who; the answer is kept"},
	}
}
