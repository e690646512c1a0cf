package steps

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
)

// hasStartedConversationID makes who start a conversation with a caller-chosen id, expecting success.
func (s *conversationSteps) hasStartedConversationID(who, id string) error {
	return s.mustStart(who, id, nil)
}

// distinctIDsStatusRepeats expects two conversations to have distinct ids and a status read twice to repeat.
func (s *conversationSteps) distinctIDsStatusRepeats(a, b string) error {
	ca, err := s.conv(a)
	if err != nil {
		return err
	}
	cb, err := s.conv(b)
	if err != nil {
		return err
	}
	if ca.id == "" || ca.id == cb.id {
		return fail("POST /conversations (twice, without an id)", fmt.Sprintf("ids %q and %q", ca.id, cb.id), "two distinct, non-empty ids")
	}
	for _, c := range []*conv{ca, cb} {
		r, err := s.cl.Do(s.ctx, c.owner, http.MethodGet, "/conversations/"+url.PathEscape(c.id), nil, reqOpts{})
		if err != nil {
			return err
		}
		var st status
		if r.Status != http.StatusOK {
			return fail(r.Op, fmt.Sprint(r.Status), "200 and the status of the conversation just started")
		}
		if err := r.JSON(&st); err != nil {
			return err
		}
		if st.ID != c.id {
			return fail(r.Op, fmt.Sprintf("id %q", st.ID), fmt.Sprintf("id %q, as the start answered", c.id))
		}
	}
	return nil
}

// modelStreamsWith scripts the model's next answer as the listed deltas with the given finish.
func (s *modelSteps) modelStreamsWith(parts, form string) error {
	r := world.Reply{Chunks: quoted(parts)}
	switch form {
	case "a keep-alive comment before every event":
		r.KeepAlive = true
	case "every event's data spread over several lines":
		r.MultiLine = true
	case "a usage-only chunk before the end":
		r.UsageChunk = true
	case "a plain JSON answer instead of a stream":
		r.Plain = true
	case "every stream form at once":
		r.KeepAlive, r.MultiLine, r.UsageChunk = true, true, true
	default:
		return harnessErr("unknown form of a model answer %q", form)
	}
	return s.enqueue(r)
}

// chosenIDs requires the chosen-id extension: the scenario is not applicable to a system that does not claim it.
func (s *setupSteps) chosenIDs() error {
	if !s.run.Extensions["chosen-id"] {
		return &HarnessError{Err: fmt.Errorf("%w: the system does not claim the chosen-id extension (discovery)", ErrNotApplicable)}
	}
	return nil
}

// sameAsFreeID judges the last answer to who's start with a chosen id against what who gets for
// an id nobody has taken, asked right after: the same status, the same headers (Date aside; the
// Location and Content-Length values follow each one's own id), and the same body but for the
// id, each one a conversation of who's own that no other identity of the scenario started. The
// answer must not tell who whether someone else holds the id.
func (s *accessSteps) sameAsFreeID(who string) error {
	got := s.last
	if got == nil {
		return harnessErr("no request has been sent")
	}
	cur := s.current
	s.msgSeq++
	want, err := s.start(who, fmt.Sprintf("free-%d-%d", time.Now().UnixNano(), s.msgSeq), nil)
	s.last, s.current = got, cur
	if err != nil {
		return err
	}
	if want.Status != http.StatusCreated {
		return fail(want.Op+" as "+who, fmt.Sprintf("%d %s", want.Status, clip(string(want.Body), 200)), "201: an id nobody took starts a conversation")
	}
	op := got.Op + " as " + who
	if got.Status != want.Status {
		return fail(op, fmt.Sprintf("%d %s", got.Status, clip(string(got.Body), 200)),
			fmt.Sprintf("what an id nobody took gives: %d %s", want.Status, clip(string(want.Body), 200)))
	}
	var gb, wb map[string]any
	if err := got.JSON(&gb); err != nil {
		return err
	}
	if err := want.JSON(&wb); err != nil {
		return err
	}
	gid, _ := gb["id"].(string)
	wid, _ := wb["id"].(string)
	if gid == "" || gid == wid {
		return fail(op, fmt.Sprintf("the id %q", gid), fmt.Sprintf("a conversation of its own, not the one the free id started (%q)", wid))
	}
	me := identityJSON(who)
	for _, c := range s.convs {
		if c.id == gid && !maps.Equal(identityJSON(c.owner), me) {
			return fail(op, fmt.Sprintf("the id %q, which %s started", gid, c.owner), "a conversation of "+who+"'s own")
		}
	}
	delete(gb, "id")
	delete(wb, "id")
	if gj, wj := mustJSON(gb), mustJSON(wb); gj != wj {
		return fail(op, gj, "what an id nobody took gives, but for the id: "+wj)
	}
	for _, h := range headerNames(got.Header, want.Header) {
		g, w := got.Header.Values(h), want.Header.Values(h)
		switch h {
		case "Date":
			continue
		case nodeHeader:
			continue // the node that served it (spec/nodes.md): where the id's partition is, not what it holds
		case "Location":
			g, w = slices.Clone(g), slices.Clone(w)
			for i := range g {
				g[i] = strings.Replace(g[i], url.PathEscape(gid), "{id}", 1)
			}
			for i := range w {
				w[i] = strings.Replace(w[i], url.PathEscape(wid), "{id}", 1)
			}
		case "Content-Length":
			if len(g) == 1 && len(w) == 1 {
				continue // the body is compared above; its length follows the id's
			}
		}
		if !slices.Equal(g, w) {
			return fail(op, fmt.Sprintf("header %s: %q", h, g), fmt.Sprintf("what an id nobody took gives: %q", w))
		}
	}
	return nil
}

// pagesHoldRecords expects the pages read to hold exactly the listed records, in order.
func (s *historySteps) pagesHoldRecords(want string) error {
	w := strings.Join(strings.Fields(want), "")
	got := strings.Join(s.pages, "|")
	if got != w {
		return fail("the pages read", got, w)
	}
	return nil
}

// sendsUnderRepeatedID sends the text as who under the message id made of unit repeated n
// times, then tail; the answer is kept for the steps that judge it.
func (s *transcriptSteps) sendsUnderRepeatedID(who, text, unit string, n int, tail string) error {
	id, err := repeatedText(unit, n, tail)
	if err != nil {
		return err
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	// An id outside the contract's 1 to 128 printable ASCII characters is sent on purpose.
	body := map[string]any{"text": unescape(text), "messageId": id}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations/"+url.PathEscape(c.id)+"/turns", body, reqOpts{OffSpec: !contractMessageID.MatchString(id)})
	s.last = r
	return err
}

// conversationDialogueVocabulary lists the steps of features/conversation/dialogue.feature.
func conversationDialogueVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) has started a conversation with id "([^"]*)"$`, a.conversation.hasStartedConversationID, "makes who start a conversation with a caller-chosen id, expecting success"},
		{`^conversations "([^"]*)" and "([^"]*)" have distinct ids the status repeats$`, a.conversation.distinctIDsStatusRepeats, "expects two conversations to have distinct ids and a status read twice to repeat"},
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) with (.+)$`, a.model.modelStreamsWith, "scripts the model's next answer as the listed deltas with the given finish"},
		{`^the system takes caller-chosen conversation ids$`, a.setup.chosenIDs, "requires the chosen-id extension: the scenario is not applicable to a system that does not claim it"},
		{`^the answer is exactly what a free id gives (\w[\w' ]*?)$`, a.access.sameAsFreeID, "compares the last answer with what the same request gets at an id nothing holds, as who"},
		{`^the pages hold the records (.+)$`, a.history.pagesHoldRecords, "expects the pages read to hold exactly the listed records, in order"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" under a message id of "((?:[^"\\]|\\.)*)" (\d+) times(?: and then "((?:[^"\\]|\\.)*)")?$`, a.transcript.sendsUnderRepeatedID, "sends the text as who under the message id made of the unit repeated N times, then the tail (Go escapes allowed); the answer is kept"},
	}
}
