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

// requestHoldsTurnsAsSent expects request N to the model to hold exactly the listed turns,
// oldest first, each as the kit sent its question and scripted its reply, then the text, and
// nothing else.
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
		want = append(want, "user: "+q, "assistant: "+r)
	}
	want = append(want, "user: "+unescape(text))
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	got := renderMessages(req.Messages)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fail(fmt.Sprintf("request %d to the model (every message, in order)", i), clip(describeAll(req.Messages), 400),
			fmt.Sprintf("the questions and replies of turns %s, each whole, then %q", list, unescape(text)))
	}
	return nil
}

// durabilityCarryVocabulary lists the steps of features/durability/carry.feature.
func durabilityCarryVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) has had (\d+) turns? answered with a reply of (\d+) "((?:[^"\\]|\\.)*)"$`, a.durability.hasHadTurnsWithRepliesOf, "has N turns answered as who, each reply the quoted text repeated N times"},
		{`^request (\d+) to the model holds exactly turns (.+) as sent and answered, then "((?:[^"\\]|\\.)*)"$`, a.durability.requestHoldsTurnsAsSent, "expects request N to the model to hold the listed turns, oldest first, each question and reply exactly as the kit sent and scripted them, then the text, and nothing else"},
	}
}
