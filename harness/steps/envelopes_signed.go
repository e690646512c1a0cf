package steps

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/oracle"
	"github.com/loomcheck/loomcheck/harness/world"
)

// putsEnvelope puts the envelope of the table, signed with the current key, into the current conversation's inbox as who.
func (s *envelopesSteps) putsEnvelope(who string, t *godog.Table) error {
	payload, err := s.buildEnvelope(who, tableFields(t))
	if err != nil {
		return err
	}
	return s.mustPut(who, payload)
}

// putsEnvelopeInto puts the envelope of the table into another's conversation's inbox as who.
func (s *envelopesSteps) putsEnvelopeInto(who, owner string, t *godog.Table) error {
	payload, err := s.buildEnvelope(who, tableFields(t))
	if err != nil {
		return err
	}
	_, err = s.putInbox(who, payload)
	return err
}

// signsAndPuts signs an envelope with one value of a field and puts it in with another value.
func (s *envelopesSteps) signsAndPuts(who, member, signed, member2, sent string) error {
	if member != member2 {
		return harnessErr("the step changes %s into %s: one member at a time", member, member2)
	}
	payload, err := s.tamperedEnvelope(member, signed, sent)
	if err != nil {
		return err
	}
	return s.mustPut(who, payload)
}

// putsEnvelopeWithMAC puts an envelope into the inbox as who whose MAC is the given one.
func (s *envelopesSteps) putsEnvelopeWithMAC(who, how string) error {
	payload, err := s.badMAC(how)
	if err != nil {
		return err
	}
	return s.mustPut(who, payload)
}

// putsUnsignedEnvelopes puts N envelopes signed with a key nobody holds into the inbox as who.
func (s *envelopesSteps) putsUnsignedEnvelopes(who string, n int) error {
	for i := range n {
		payload, err := s.buildEnvelope(who, map[string]string{"text": fmt.Sprintf("forged %d", i), "signed with": "a key nobody holds"})
		if err != nil {
			return err
		}
		if err := s.mustPut(who, payload); err != nil {
			return err
		}
	}
	return nil
}

// keyReplaced replaces the signing key (the old one forgotten) and restarts the system.
func (s *envelopesSteps) keyReplaced() error { return s.rotateKey(false) }

// droppedKeyListedAgain lists the key the last rotation dropped as a previous key again (the
// current key stays), as an operator who dropped it too soon would, and restarts the system.
func (s *envelopesSteps) droppedKeyListedAgain() error {
	if s.oldKey == "" {
		return harnessErr("no key has been rotated")
	}
	if err := s.crash(); err != nil {
		return err
	}
	s.cfg.Signing.PreviousKeys = []string{s.oldKey}
	s.drv.Reconfigure(s.cfg)
	return s.restart()
}

// envelopeSignedWithCurrentKey expects turn N's envelope to verify with the current key.
func (s *envelopesSteps) envelopeSignedWithCurrentKey(turn int64) error {
	text, err := s.userText(turn)
	if err != nil {
		return err
	}
	raw, err := s.captureEnvelope(s.owner(), text)
	if err != nil {
		return err
	}
	e, err := oracle.Parse(raw)
	if err != nil {
		return fail("the envelope of turn "+fmt.Sprint(turn), "an envelope that does not parse ("+err.Error()+"): "+string(raw), "an envelope per spec/envelopes.md")
	}
	if oracle.Verify([][]byte{decodeKey(s.cfg.Signing.Key)}, e) != nil {
		return fail("the envelope of turn "+fmt.Sprint(turn), "a signature the current key does not make", "a signature under the current key")
	}
	return nil
}

// ranAsKeyedTurnExecution expects who's answer to turn N to have run as the turn execution the current or previous key names for message N.
func (s *envelopesSteps) ranAsKeyedTurnExecution(viewer string, turn, msg int64) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if s.oldKey == "" {
		return harnessErr("no key has been rotated")
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	cur := oracle.TurnExecutionID(decodeKey(s.cfg.Signing.Key), c.id, msg)
	prev := oracle.TurnExecutionID(decodeKey(s.oldKey), c.id, msg)
	if e.TurnExecutionID != cur && e.TurnExecutionID != prev {
		return fail(fmt.Sprintf("the reply to turn %d as its asker sees it", turn), fmt.Sprintf("turnExecutionId %q", e.TurnExecutionID),
			fmt.Sprintf("%q (the current key) or %q (the previous one), spec/envelopes.md §7", cur, prev))
	}
	return nil
}

// cannotReadLog expects who's request for another's conversation log refused as a missing conversation.
func (s *envelopesSteps) cannotReadLog(who, owner string) error {
	_, r, err := s.rawLog(who)
	if err != nil {
		return err
	}
	if r == nil || r.Status != http.StatusNotFound || string(compact(r.Body)) != `{"error":"not found"}` {
		return fail(opOf(r), fmt.Sprintf("%d %s", statusOf(r), clip(string(r.Body), 100)), `404 {"error":"not found"}`)
	}
	return nil
}

// errorHookToldOnce expects the error hook to have been told about turn N once, with its error id and the words.
func (s *envelopesSteps) errorHookToldOnce(turn int64, words string) error {
	e, err := s.waitReply(turn)
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.ErrorHook().WaitErrors(ctx, 1); err != nil {
		return fail("the error hook", "no report", "one report of the failure")
	}
	var found int
	for _, r := range s.world.ErrorHook().Errors() {
		if r.ErrorID == e.ErrorID {
			found++
			if !strings.Contains(r.Error, unescape(words)) || r.ConversationID != s.current.id || int64(r.Turn) != turn {
				return fail("the error hook", fmt.Sprintf("%+v", r), fmt.Sprintf("the real error (with %q) for %s turn %d", words, s.current.id, turn))
			}
		}
	}
	if found != 1 {
		return fail("the error hook", fmt.Sprintf("%d reports with errorId %s", found, e.ErrorID), "exactly one")
	}
	return nil
}

// appearsNowhere expects the text in nothing who can read: history, status, log and streams.
func (s *envelopesSteps) appearsNowhere(secret, who string) error {
	return s.nowhere(who, unescape(secret))
}

// errorHookToldOnceEach expects one report of each listed failed turn's error id, and no other
// report of those turns. Reports arrive in the order they were made (spec/world.md), so once the
// last turn's report is in, any report made before it, a replay's included, is in too.
func (s *edgeSteps) errorHookToldOnceEach(list string) error {
	turns := splitList(list)
	ids := map[string]int64{}
	var last string
	for _, t := range turns {
		var n int64
		if _, err := fmt.Sscan(t, &n); err != nil {
			return harnessErr("turn %q is not a number", t)
		}
		e, err := s.waitReply(n)
		if err != nil {
			return err
		}
		if e.ErrorID == "" {
			return fail(fmt.Sprintf("turn %d", n), "no errorId", "a failed turn with an errorId")
		}
		ids[e.ErrorID], last = n, e.ErrorID
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !slices.ContainsFunc(s.world.ErrorHook().Errors(), func(r world.ErrorReport) bool { return r.ErrorID == last }) {
		select {
		case <-ctx.Done():
			return fail("the error hook", fmt.Sprintf("%d reports, none with errorId %s", len(s.world.ErrorHook().Errors()), last), "a report of turn "+turns[len(turns)-1])
		case <-tick.C:
		}
	}
	got := map[int64]int{}
	for _, r := range s.world.ErrorHook().Errors() {
		if n, ok := ids[r.ErrorID]; ok {
			got[n]++
		} else if r.ConversationID == s.current.id && slices.Contains(turns, fmt.Sprint(r.Turn)) {
			got[int64(r.Turn)]++
		}
	}
	for _, n := range ids {
		if got[n] != 1 {
			return fail("the error hook", fmt.Sprintf("%d reports of turn %d", got[n], n), "exactly one")
		}
	}
	return nil
}

// envelopesSignedVocabulary lists the steps of features/envelopes/signed.feature.
func envelopesSignedVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) puts an envelope into the conversation's inbox:$`, a.envelopes.putsEnvelope, "puts the envelope of the table, signed with the current key, into the current conversation's inbox as who"},
		{`^(\w[\w' ]*?) puts an envelope into (\w+)'s conversation's inbox:$`, a.envelopes.putsEnvelopeInto, "puts the envelope of the table into another's conversation's inbox as who"},
		{`^(\w[\w' ]*?) signs an envelope with (\w[\w ]*?) "([^"]*)" and puts it into the inbox with (\w[\w ]*?) "([^"]*)"$`, a.envelopes.signsAndPuts, "signs an envelope with one value of a field and puts it in with another value"},
		{`^(\w[\w' ]*?) puts an envelope into the conversation's inbox whose MAC is (.+)$`, a.envelopes.putsEnvelopeWithMAC, "puts an envelope into the inbox as who whose MAC is the given one"},
		{`^(\w[\w' ]*?) puts (\d+) envelopes signed with a key nobody holds into the conversation's inbox$`, a.envelopes.putsUnsignedEnvelopes, "puts N envelopes signed with a key nobody holds into the inbox as who"},
		{`^the signing key is replaced and the system restarted$`, a.envelopes.keyReplaced, "replaces the signing key (the old one forgotten) and restarts the system"},
		{`^the dropped key is listed again as a previous key and the system restarted$`, a.envelopes.droppedKeyListedAgain, "lists the key the last rotation dropped as a previous key again and restarts the system"},
		{`^the envelope of turn (\d+) is signed with the current key$`, a.envelopes.envelopeSignedWithCurrentKey, "expects turn N's envelope to verify with the current key"},
		{`^(\w+) sees that (?:his|her) answer to turn (\d+) ran as a turn execution the current or the previous key names for message (\d+)$`, a.envelopes.ranAsKeyedTurnExecution, "expects who's answer to turn N to have run as the turn execution the current or previous key names for message N"},
		{`^(\w[\w' ]*?) cannot read the log of (\w+)'s conversation$`, a.envelopes.cannotReadLog, "expects who's request for another's conversation log refused as a missing conversation"},
		{`^the error hook was told about turn (\d+) once, with its error id and the words "((?:[^"\\]|\\.)*)"$`, a.envelopes.errorHookToldOnce, "expects the error hook to have been told about turn N once, with its error id and the words"},
		{`^"((?:[^"\\]|\\.)*)" appears nowhere (\w[\w' ]*?) can read$`, a.envelopes.appearsNowhere, "expects the text in nothing who can read: history, status, log and streams"},
		{`^the error hook was told about turns (.+) once each$`, a.edge.errorHookToldOnceEach, "expects one report of each listed failed turn's error id, and no other report of those turns"},
	}
}
