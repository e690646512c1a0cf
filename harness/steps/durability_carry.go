package steps

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/harness/world"
)

// hasHadTurnsWithRepliesOf has N turns answered as who, each asked as "question K" and answered
// with the unit repeated count times, and keeps each turn's question and reply.
func (s *durabilitySteps) hasHadTurnsWithRepliesOf(who string, n, count int, unit string) error {
	unit = unescape(unit)
	for range n {
		s.turns++
		text := fmt.Sprintf("question %d", s.turns)
		reply := strings.Repeat(unit, count)
		if err := s.world.Model().EnqueueFor(text, world.Reply{Text: reply}); err != nil {
			return harnessErr("script the model: %v", err)
		}
		if err := s.mustSend(who, text, s.nextMessageID(), nil); err != nil {
			return err
		}
		t, err := s.waitAnswered(who, text)
		if err != nil {
			return err
		}
		s.turnNo = t
		s.turnText[t] = text
		if s.replies == nil {
			s.replies = map[int64]string{}
		}
		s.replies[t] = reply
	}
	return nil
}

// hasHadTurnEdited has one turn answered as who: the text sent as an edit of turn t's accepted
// user record, answered with the unit repeated count times. It keeps the turn's text, its reply
// and the prompt the model must be sent for it (spec/prompt.md section 1): one data line quoting
// the first 500 code points of turn t's text, then the text.
func (s *durabilitySteps) hasHadTurnEdited(who string, t int64, text string, count int, unit string) error {
	text, unit = unescape(text), unescape(unit)
	es, err := s.history(s.ctx, who, true)
	if err != nil {
		return err
	}
	var edited *entry
	for i := range es {
		if es[i].Turn == t && es[i].Role == "user" && es[i].Status == "accepted" {
			edited = &es[i]
		}
	}
	if edited == nil {
		return fail("the history", describeEntries(es), fmt.Sprintf("an accepted user record of turn %d to edit", t))
	}
	quote := edited.text()
	if r := []rune(quote); len(r) > 500 {
		quote = string(r[:500])
	}
	reply := strings.Repeat(unit, count)
	if err := s.world.Model().EnqueueFor(text, world.Reply{Text: reply}); err != nil {
		return harnessErr("script the model: %v", err)
	}
	if err := s.mustSend(who, text, s.nextMessageID(), map[string]any{"editOf": edited.Ord}); err != nil {
		return err
	}
	n, err := s.waitAnswered(who, text)
	if err != nil {
		return err
	}
	s.turns++
	s.turnNo = n
	s.turnText[n] = text
	if s.replies == nil {
		s.replies = map[int64]string{}
	}
	if s.prompts == nil {
		s.prompts = map[int64]string{}
	}
	s.replies[n] = reply
	s.prompts[n] = editPrompt(quote, text)
	return nil
}

// requestHoldsTurnsAsSent expects request N to the model to hold exactly the listed turns (none
// when the list is empty), oldest first, each as the kit sent its question (an edit's with the quote line the model must
// have been sent before it) and scripted its reply, then the text, and nothing else.
func (s *durabilitySteps) requestHoldsTurnsAsSent(i int, list, text string) error {
	var want []string
	for _, p := range splitList(list) {
		t, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return harnessErr("turn %q is not a number", p)
		}
		q, okQ := s.turnText[t]
		r, okR := s.replies[t]
		if !okQ || !okR {
			return harnessErr("turn %d was not had with a scripted reply in this scenario", t)
		}
		if p, ok := s.prompts[t]; ok {
			q = p
		}
		want = append(want, "user: "+q, "assistant: "+r)
	}
	want = append(want, "user: "+unescape(text))
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	got := renderMessages(req.Messages)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		expected := fmt.Sprintf("the questions and replies of turns %s, each whole, then %q", list, unescape(text))
		if len(want) == 1 {
			expected = fmt.Sprintf("no earlier turn, only %q", unescape(text))
		}
		return fail(fmt.Sprintf("request %d to the model (every message, in order)", i), clip(describeAll(req.Messages), 400), expected)
	}
	return nil
}

// durabilityCarryVocabulary lists the steps of features/durability/carry.feature.
func durabilityCarryVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) has had (\d+) turns? answered with a reply of (\d+) "((?:[^"\\]|\\.)*)"$`, a.durability.hasHadTurnsWithRepliesOf, "has N turns answered as who, each reply the quoted text repeated N times"},
		{`^(\w[\w' ]*?) has had turn (\d+) edited as "((?:[^"\\]|\\.)*)" and answered with a reply of (\d+) "((?:[^"\\]|\\.)*)"$`, a.durability.hasHadTurnEdited, "has one turn answered as who, the text sent as an edit of turn N and its reply the quoted text repeated N times"},
		{`^request (\d+) to the model holds exactly (?:turns (.+) as sent and answered|no earlier turn), then "((?:[^"\\]|\\.)*)"$`, a.durability.requestHoldsTurnsAsSent, "expects request N to the model to hold the listed turns (or none), oldest first, each question (an edit's after its quote line) and reply exactly as the kit sent and scripted them, then the text, and nothing else"},
	}
}
