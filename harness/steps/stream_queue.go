package steps

import (
	"fmt"
	"net/http"
)

// steersMany steers the messages prefix1 .. prefixN, each of which must be queued.
func (s *steerSteps) steersMany(who, prefix, prefix2 string, n int) error {
	if prefix != prefix2 || n < 1 {
		return harnessErr("the messages %q1 to %q%d do not make a range", prefix, prefix2, n)
	}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		if err := s.steers(who, id, id, ""); err != nil {
			return err
		}
		if err := s.answers(http.StatusAccepted, fmt.Sprintf(`{"messageId": %q, "state": "queued"}`, id)); err != nil {
			return err
		}
	}
	return nil
}

// streamQueueVocabulary lists the steps of features/stream/queue.feature.
func streamQueueVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) steers the messages "(\w*?)1" to "(\w*?)(\d+)", each answered 202 queued$`, a.steer.steersMany, "steers the messages P1 .. PN in order as who, each P<i> with the text and the message id P<i>, and expects each answer to be exactly 202 {messageId: P<i>, state: queued}"},
	}
}
