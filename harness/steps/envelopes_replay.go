package steps

import (
	"fmt"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/oracle"
)

// floodsInbox puts N signed empty envelopes into the inbox as who.
func (s *envelopesSteps) floodsInbox(who string, n int) error {
	for range n {
		payload, err := s.buildEnvelope(who, map[string]string{"text": ""})
		if err != nil {
			return err
		}
		if err := s.mustPut(who, payload); err != nil {
			return err
		}
	}
	return nil
}

// putsEnvelopesCapturingFirst puts the envelopes of the table, one a row and in its order, into
// the inbox as who, and keeps the first as the captured envelope.
func (s *envelopesSteps) putsEnvelopesCapturingFirst(who string, t *godog.Table) error {
	head := t.Rows[0].Cells
	for i, row := range t.Rows[1:] {
		fields := map[string]string{}
		for j, c := range row.Cells {
			fields[head[j].Value] = c.Value
		}
		payload, err := s.buildEnvelope(who, fields)
		if err != nil {
			return err
		}
		if i == 0 {
			s.captured = payload
		}
		if err := s.mustPut(who, payload); err != nil {
			return err
		}
	}
	return nil
}

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

// envelopesReplayVocabulary lists the steps of features/envelopes/replay.feature.
func envelopesReplayVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) floods the conversation's inbox with (\d+) signed empty envelopes$`, a.envelopes.floodsInbox, "puts N signed empty envelopes into the inbox as who"},
		{`^(\w[\w' ]*?) floods the conversation's inbox with (\d+) signed empty envelopes issued when the captured one was$`, a.envelopes.floodsInboxAtCaptured, "puts N signed empty envelopes issued at the captured envelope's issue time into the inbox as who"},
		{`^(\w[\w' ]*?) puts an envelope saying "([^"]*)" into the inbox and waits until its issue time is older than maxEnvelopeAgeMs$`, a.envelopes.putsEnvelopeOutlived, "puts an envelope issued two seconds short of maxEnvelopeAgeMs ago, then waits until the clock passes its staleness"},
		{`^(\w[\w' ]*?) puts these envelopes into the conversation's inbox in turn, capturing the first:$`, a.envelopes.putsEnvelopesCapturingFirst, "puts the envelopes of the table, one a row and in order, into the inbox as who, and keeps the first as the captured one"},
	}
}
