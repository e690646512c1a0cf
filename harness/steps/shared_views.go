package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// clearanceAnswers scripts the clearance service's answer for the principal.
func (s *sharedSteps) clearanceAnswers(raw, who string) error {
	if !json.Valid([]byte(raw)) {
		return harnessErr("%s is not JSON", raw)
	}
	if err := s.world.Clearance().AnswerWith(principals[who].Actor, json.RawMessage(raw)); err != nil {
		return harnessErr("clearance: %v", err)
	}
	return nil
}

// seesRestricted expects who to see the reply to turn N as restricted.
func (s *sharedSteps) seesRestricted(viewer string, turn int64) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if e.Status != "restricted" {
		return fail(fmt.Sprintf("the reply to turn %d as %s sees it", turn, viewer), e.String(), "a restricted placeholder")
	}
	return nil
}

// seesClassed expects who to see the reply to turn N carrying the class.
func (s *sharedSteps) seesClassed(viewer string, turn int64, class string) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if !slices.Contains(e.Classes, class) {
		return fail(fmt.Sprintf("the reply to turn %d", turn), fmt.Sprintf("classes %v", e.Classes), fmt.Sprintf("a class %q", class))
	}
	return nil
}

// readsWholeHistory reads the whole history as who; the answer is kept.
func (s *sharedSteps) readsWholeHistory(who string) error {
	_, err := s.history(s.ctx, who, false)
	return err
}

// clearanceAskedWhole expects the clearance service to have been asked with who's whole identity.
func (s *sharedSteps) clearanceAskedWhole(who string) error {
	p, ok := principals[who]
	if !ok {
		return harnessErr("unknown principal %q", who)
	}
	var asked []string
	for _, c := range s.world.Clearance().Calls() {
		v := c.Viewer
		if v.Tenant == p.Tenant && v.Actor == p.Actor && v.OnBehalfOf == p.OnBehalfOf {
			return nil
		}
		asked = append(asked, identityText(identityMap(v.Tenant, v.Actor, v.OnBehalfOf)))
	}
	return fail("the clearance service", fmt.Sprintf("questions about %v", asked), "a question about "+identityText(identityJSON(who))+", tenant, actor and onBehalfOf")
}

// streamShowsPlaceholder expects who's stream to show turn N's reply only as a restricted placeholder.
func (s *sharedSteps) streamShowsPlaceholder(viewer string, turn int64) error {
	s.mu.Lock()
	st := s.named[viewer+"/resumed"]
	if st == nil {
		st = s.named[viewer+"/"]
	}
	s.mu.Unlock()
	if st == nil {
		var err error
		if st, err = s.streamOf(viewer, ""); err != nil {
			return err
		}
	}
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.WaitFor(ctx, fmt.Sprintf("the reply to turn %d", turn), func(evs []sseEvent, _ bool) bool {
		for _, ev := range messageEvents(evs) {
			var e entry
			if json.Unmarshal([]byte(ev.Data), &e) == nil && e.Role == "assistant" && e.Turn == turn {
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if ev.Event == "delta" || ev.Event == "partial" {
			return fail(st.Op, "live text of another asker's turn", "nothing but the placeholder")
		}
		var e entry
		if ev.Event == "message" && json.Unmarshal([]byte(ev.Data), &e) == nil && e.Role == "assistant" && e.Turn == turn {
			var m map[string]json.RawMessage
			_ = json.Unmarshal([]byte(ev.Data), &m)
			for k := range m {
				if !slices.Contains([]string{"turn", "role", "status", "cursor", "ord", "time", "asker"}, k) {
					return fail(st.Op, ev.Data, "a restricted placeholder holding only turn, role, status, cursor, ord, time and asker")
				}
			}
			if e.Status != "restricted" || e.Text != nil || len(e.Classes) > 0 || e.TurnExecutionID != "" {
				return fail(st.Op, ev.Data, "a restricted placeholder")
			}
		}
	}
	return nil
}

// reconnectsFromFirst opens a new stream as who from the first record.
func (s *sharedSteps) reconnectsFromFirst(who string) error {
	es, err := s.history(s.ctx, s.owner(), false)
	if err != nil || len(es) == 0 {
		return harnessErr("no first record")
	}
	st, err := s.openNamed(who, "", who+"/resumed", map[string]string{"Last-Event-ID": es[0].Cursor}, "")
	if err == nil && st.Status != http.StatusOK {
		return fail(st.Op, fmt.Sprint(st.Status), "200")
	}
	return err
}

// seesNoClass expects who to see the reply to turn N without the class.
func (s *sharedSteps) seesNoClass(viewer string, turn int64, class string) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if slices.Contains(e.Classes, class) {
		return fail(fmt.Sprintf("the reply to turn %d", turn), fmt.Sprintf("classes %v", e.Classes), fmt.Sprintf("no class %q", class))
	}
	return nil
}

// restrictedEntriesCarry expects the restricted entries who sees to carry only turn, role, status, cursor, ord, time and asker.
func (s *sharedSteps) restrictedEntriesCarry(viewer string) error {
	es, err := s.history(s.ctx, viewer, false)
	if err != nil {
		return err
	}
	allowed := []string{"turn", "role", "status", "cursor", "ord", "time", "asker"}
	n := 0
	for _, e := range es {
		if e.Status != "restricted" {
			continue
		}
		n++
		var m map[string]json.RawMessage
		_ = json.Unmarshal(e.raw, &m)
		for k := range m {
			if !slices.Contains(allowed, k) {
				return fail(fmt.Sprintf("record %d as %s sees it", e.Ord, viewer), "a restricted entry with "+k, "only "+strings.Join(allowed, ", "))
			}
		}
	}
	if n == 0 {
		return fail("the history as "+viewer+" sees it", "no restricted entry", "restricted entries to check")
	}
	return nil
}

// requestForHoldsNoEarlier expects the request to the model for the text to hold no earlier turn.
func (s *modelSteps) requestForHoldsNoEarlier(text string) error {
	for _, r := range s.world.Model().Requests() {
		var users []string
		for _, m := range r.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		if len(users) > 0 && users[len(users)-1] == unescape(text) {
			if len(users) > 1 {
				return fail(fmt.Sprintf("request %d to the model", r.Index+1), fmt.Sprintf("%d earlier user messages: %v", len(users)-1, users[:len(users)-1]), "none: the asker is cleared for none of them")
			}
			return nil
		}
	}
	return fail("the model", "no request for "+text, "a request for "+text)
}

// summarizerNeverHanded expects the summarizer never to have been handed the words.
func (s *budgetSteps) summarizerNeverHanded(text string) error {
	for _, r := range s.world.Summarizer().Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, unescape(text)) {
				return fail("the summarizer", "the words of a restricted turn", "only unrestricted turns")
			}
		}
	}
	return nil
}

// streamEvents expects who's stream to have got exactly the table's events.
func (s *liveSteps) streamEvents(who string, t *godog.Table) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	return s.exactEvents(st, t)
}

// toolWithoutClass declares a tool the host gives no data class.
func (s *sharedSteps) toolWithoutClass(name string) error {
	return s.configure(func(c *sutconfig.SUTConfig) {
		c.Tools.Definitions = append(c.Tools.Definitions, sutconfig.ToolDef{Name: name,
			Description: "the " + name + " tool", Parameters: map[string]any{"type": "object"}})
	})
}

// sharedViewsVocabulary lists the steps of features/shared/views.feature.
func sharedViewsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tool "(\w+)" is declared with no class$`, a.shared.toolWithoutClass, "declares a tool the host gives no data class"},
		{`^the request to the model for "((?:[^"\\]|\\.)*)" holds no earlier turns$`, a.model.requestForHoldsNoEarlier, "expects the request to the model for the text to hold no earlier turn"},
		{`^the summarizer was never handed the words "((?:[^"\\]|\\.)*)"$`, a.budget.summarizerNeverHanded, "expects the summarizer never to have been handed the words"},
		{`^(\w[\w' ]*?)'s stream got exactly these events:$`, a.live.streamEvents, "expects who's stream to have got exactly the table's events"},
		{`^the clearance service answers (.+) for (\w+)$`, a.shared.clearanceAnswers, "scripts the clearance service's answer for the principal"},
		{`^(\w[\w' ]*?) sees the reply to turn (\d+) as restricted$`, a.shared.seesRestricted, "expects who to see the reply to turn N as restricted"},
		{`^(\w[\w' ]*?) sees the reply to turn (\d+) classed "([^"]*)"$`, a.shared.seesClassed, "expects who to see the reply to turn N carrying the class"},
		{`^(\w[\w' ]*?) reads the whole history$`, a.shared.readsWholeHistory, "reads the whole history as who; the answer is kept"},
		{`^the clearance service was asked about (\w[\w' ]*?)'s whole identity$`, a.shared.clearanceAskedWhole, "expects the clearance service to have been asked with who's whole identity"},
		{`^(\w+)'s stream shows the reply to turn (\d+) only as a restricted placeholder$`, a.shared.streamShowsPlaceholder, "expects who's stream to show turn N's reply only as a restricted placeholder"},
		{`^(\w+) reconnects from the first record$`, a.shared.reconnectsFromFirst, "opens a new stream as who from the first record"},
		{`^(\w[\w' ]*?) sees the reply to turn (\d+) with no class "([^"]*)"$`, a.shared.seesNoClass, "expects who to see the reply to turn N without the class"},
		{`^the restricted entries (\w+) sees carry only turn, role, status, cursor, ord, time and asker$`, a.shared.restrictedEntriesCarry, "expects the restricted entries who sees to carry only turn, role, status, cursor, ord, time and asker"},
	}
}
