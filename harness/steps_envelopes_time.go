package harness

import (
	"fmt"
	"time"

	"github.com/loomcheck/loomcheck/harness/oracle"
)

// floodsInboxAtCaptured puts N signed empty envelopes, each issued at the captured envelope's
// issue time, into the inbox as who: once they evict it from the replay set, the floor equals
// its issue time exactly.
func (s *envelopesSteps) floodsInboxAtCaptured(who string, n int) error {
	if s.captured == nil {
		return harnessErr("no envelope has been captured")
	}
	captured, err := oracle.Parse(s.captured)
	if err != nil {
		return harnessErr("the captured envelope does not parse: %v", err)
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	for range n {
		e := s.draftEnvelope(c)
		e.Text, e.IAT = "", captured.IAT
		if err := s.mustPut(who, oracle.Sign(decodeKey(s.cfg.Signing.Key), e).Wire()); err != nil {
			return err
		}
	}
	return nil
}

// putsEnvelopeOutlived puts an envelope with the text, issued two seconds short of
// maxEnvelopeAgeMs ago (fresh when it is received), into the inbox as who, then waits until the
// clock has passed the instant it would be stale if judged then.
func (s *envelopesSteps) putsEnvelopeOutlived(who, text string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	maxAge := s.cfg.Conversation.MaxEnvelopeAgeMs
	if maxAge <= 0 {
		maxAge = 600_000 // spec/envelopes.md §5, the default
	}
	e := s.draftEnvelope(c)
	e.Text, e.IAT = unescape(text), time.Now().UnixMilli()-maxAge+2_000
	if err := s.mustPut(who, oracle.Sign(decodeKey(s.cfg.Signing.Key), e).Wire()); err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	stale := time.UnixMilli(e.IAT + maxAge + 1)
	select {
	case <-time.After(time.Until(stale)):
		return nil
	case <-ctx.Done():
		return fail("the wait for the envelope to age", "no time left in the step", fmt.Sprintf("the clock past %s", stale.Format(time.RFC3339Nano)))
	}
}
