package harness

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/oracle"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// clearancesAre scripts the clearance service with the table's clearance per principal.
func (s *sharedSteps) clearancesAre(t *godog.Table) error {
	for _, row := range t.Rows[1:] {
		actor := principals[row.Cells[0].Value].Actor
		if err := s.world.Clearance().Allow(actor, splitList(row.Cells[1].Value)...); err != nil {
			return harnessErr("clearance: %v", err)
		}
	}
	return nil
}

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

// hasStartedShared makes who start a shared conversation with the participants, expecting success.
func (s *sharedSteps) hasStartedShared(who, list string) error {
	var ps []map[string]string
	if n, ok := memberCount(list); ok {
		for range n {
			ps = append(ps, s.newMember())
		}
		return s.mustStart(who, "", map[string]any{"mode": "shared", "participants": ps})
	}
	for _, n := range names(list) {
		if _, ok := principals[n]; !ok {
			return harnessErr("unknown participant %q", n)
		}
		ps = append(ps, identityJSON(n))
	}
	return s.mustStart(who, "", map[string]any{"mode": "shared", "participants": ps})
}

// startsShared asks to start a shared conversation with the participants as who; the answer is kept.
func (s *sharedSteps) startsShared(who, list string) error {
	var ps []map[string]string
	if n, ok := memberCount(list); ok {
		for range n {
			ps = append(ps, s.newMember())
		}
	} else {
		for _, n := range names(list) {
			if _, ok := principals[n]; !ok {
				return harnessErr("unknown participant %q", n)
			}
			ps = append(ps, identityJSON(n))
		}
	}
	_, err := s.start(who, "", map[string]any{"mode": "shared", "participants": ps})
	return err
}

// serviceStartsShared asks to start a conversation in shared mode as the service or a look-alike.
func (s *sharedSteps) serviceStartsShared(who string) error {
	_, err := s.start(who, "", map[string]any{"mode": "shared"})
	return err
}

// seesTurnAnswered waits until who sees turn N answered with the text.
func (s *sharedSteps) seesTurnAnswered(viewer string, turn int64, text string) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if e.Status != "complete" || e.text() != unescape(text) {
		return fail(fmt.Sprintf("the reply to turn %d as %s sees it", turn, viewer), e.String(), fmt.Sprintf("complete %q", unescape(text)))
	}
	return nil
}

// turnOfFails waits until who's turn N failed and expects its reason.
func (s *sharedSteps) turnOfFails(viewer string, turn int64, reason string) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if e.Status != "failed" || e.Reason != reason || e.ErrorID == "" {
		return fail(fmt.Sprintf("the reply to turn %d", turn), e.String(), fmt.Sprintf("failed, reason %q, with an errorId", reason))
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

// changesParticipant adds or removes a participant as who; the answer is kept.
func (s *sharedSteps) changesParticipant(who, op, other string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	var ident map[string]string
	switch _, ok := principals[other]; {
	case ok:
		ident = identityJSON(other)
	case other == "a new member" && op == "adds":
		ident = s.newMember()
	default:
		return harnessErr("unknown principal %q", other)
	}
	wire := map[string]string{"adds": "add", "removes": "remove"}[op]
	body := map[string]any{"op": wire, "identity": ident}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/participants", body, reqOpts{})
	s.last = r
	if err == nil && r.status == http.StatusOK {
		s.partChanges = append(s.partChanges, partChange{Op: wire, Identity: ident, By: identityJSON(who)})
	}
	return err
}

// changesParticipantsWith sends the raw participants change as who; the answer is kept.
func (s *sharedSteps) changesParticipantsWith(who, raw string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	if !json.Valid([]byte(raw)) {
		return harnessErr("%s is not JSON", raw)
	}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/participants", nil, reqOpts{rawBody: []byte(raw), offSpec: true})
	s.last = r
	return err
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

// hasParticipants expects the conversation to have exactly N participants.
func (s *sharedSteps) hasParticipants(n int) error {
	p, c, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, c.owner, http.MethodGet, p+"/participants", nil, reqOpts{})
	if err != nil {
		return err
	}
	var pl struct {
		Participants []map[string]string `json:"participants"`
	}
	if err := r.json(&pl); err != nil {
		return err
	}
	if len(pl.Participants) != n {
		return fail(r.op, fmt.Sprintf("%d participants", len(pl.Participants)), fmt.Sprintf("%d, the owner included", n))
	}
	return nil
}

// seesTurnInterrupted waits until who sees turn N interrupted.
func (s *sharedSteps) seesTurnInterrupted(viewer string, turn int64) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if e.Status != "interrupted" {
		return fail(fmt.Sprintf("the reply to turn %d as %s sees it", turn, viewer), e.String(), "interrupted by the asker's follow-up")
	}
	return nil
}

// canRead expects who to be able to read the conversation's history.
func (s *sharedSteps) canRead(who string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, who, http.MethodGet, p, nil, reqOpts{})
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return fail(r.op+" as "+who, fmt.Sprint(r.status), "200: a participant reads the conversation")
	}
	return nil
}

// participantsAre expects exactly these participants, each change recorded with who made it.
func (s *sharedSteps) participantsAre(list string) error {
	p, c, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, c.owner, http.MethodGet, p+"/participants", nil, reqOpts{})
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200 and the participants")
	}
	var pl struct {
		Participants []map[string]string `json:"participants"`
		Changes      []partChange        `json:"changes"`
	}
	if err := r.json(&pl); err != nil {
		return err
	}
	var got, want []string
	for _, id := range pl.Participants {
		got = append(got, identityText(id))
	}
	for _, n := range names(list) {
		if _, ok := principals[n]; !ok {
			return harnessErr("unknown participant %q", n)
		}
		want = append(want, identityText(identityJSON(n)))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fail(r.op, fmt.Sprintf("participants %v", got), fmt.Sprintf("%v", want))
	}
	// A system may or may not record the participants a conversation started with (as adds by
	// the owner, first); after them come exactly the changes this scenario made.
	changes := pl.Changes
	owner := identityText(identityJSON(c.owner))
	for len(changes) > len(s.partChanges) && changes[0].Op == "add" && identityText(changes[0].By) == owner {
		changes = changes[1:]
	}
	gotC, wantC := changesText(changes), changesText(s.partChanges)
	if !slices.Equal(gotC, wantC) {
		return fail(r.op, fmt.Sprintf("changes %v", changesText(pl.Changes)), fmt.Sprintf("the changes made, each with who made it: %v", wantC))
	}
	return nil
}

// serviceGetsMissing expects the service (or its other token) to get the missing-conversation 404 on every conversation route.
func (s *sharedSteps) serviceGetsMissing(who string) error {
	return s.sameNotFound(who, false)
}

// ranAsHostKeyed expects who's answer to turn N to have run as the turn execution the host key names for message N.
func (s *sharedSteps) ranAsHostKeyed(viewer string, turn, msg int64) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	want := oracle.TurnExecutionID(decodeKey(s.cfg.Signing.Key), s.current.id, msg)
	if e.TurnExecutionID != want {
		return fail(fmt.Sprintf("the reply to turn %d as its asker sees it", turn), fmt.Sprintf("turnExecutionId %q", e.TurnExecutionID), fmt.Sprintf("%q (spec/envelopes.md)", want))
	}
	return nil
}

// noTurnExecutionID expects turn N to carry no turn execution id, as who sees it.
func (s *sharedSteps) noTurnExecutionID(viewer string, turn int64) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if e.TurnExecutionID != "" {
		return fail(fmt.Sprintf("the reply to turn %d as %s sees it", turn, viewer), "a turnExecutionId", "none: it is shown to its asker only")
	}
	return nil
}

// plantsTurnExecution starts a turn execution as who at the id message N's turn would take, with the text.
func (s *sharedSteps) plantsTurnExecution(who string, msg int64, text string) error {
	return s.plantTurn(who, msg, 1, "planted", text, text)
}

// noRecordHolds expects no record of the history to hold the text.
func (s *sharedSteps) noRecordHolds(text string) error {
	es, err := s.history(s.ctx, s.owner(), false)
	if err != nil {
		return err
	}
	for _, e := range es {
		if strings.Contains(e.text(), unescape(text)) {
			return fail("the history", e.String(), "no record holding "+text)
		}
	}
	return nil
}

// errorHookToldWhy expects the error hook to have been told why turn N failed.
func (s *sharedSteps) errorHookToldWhy(turn int64) error {
	e, err := s.waitReply(turn)
	if err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.ErrorHook().WaitErrors(ctx, 1); err != nil {
		return fail("the error hook", "no report", "the cause of the failed turn")
	}
	for _, r := range s.world.ErrorHook().Errors() {
		if r.ErrorID == e.ErrorID && r.Error != "" {
			return nil
		}
	}
	return fail("the error hook", fmt.Sprintf("%d reports, none with errorId %s", len(s.world.ErrorHook().Errors()), e.ErrorID), "the cause, under the record's errorId")
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
	evs, err := st.waitFor(ctx, fmt.Sprintf("the reply to turn %d", turn), func(evs []sseEvent, _ bool) bool {
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
			return fail(st.op, "live text of another asker's turn", "nothing but the placeholder")
		}
		var e entry
		if ev.Event == "message" && json.Unmarshal([]byte(ev.Data), &e) == nil && e.Role == "assistant" && e.Turn == turn {
			var m map[string]json.RawMessage
			_ = json.Unmarshal([]byte(ev.Data), &m)
			for k := range m {
				if !slices.Contains([]string{"turn", "role", "status", "cursor", "ord", "time", "asker"}, k) {
					return fail(st.op, ev.Data, "a restricted placeholder holding only turn, role, status, cursor, ord, time and asker")
				}
			}
			if e.Status != "restricted" || e.Text != nil || len(e.Classes) > 0 || e.TurnExecutionID != "" {
				return fail(st.op, ev.Data, "a restricted placeholder")
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
	if err == nil && st.status != http.StatusOK {
		return fail(st.op, fmt.Sprint(st.status), "200")
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

// partChange is one recorded participant change on the wire.
type partChange struct {
	Op       string            `json:"op"`
	Identity map[string]string `json:"identity"`
	By       map[string]string `json:"by"`
}

// plantTurn starts, through the runtime door and as who, a turn execution at the id the host key
// derives for message msg of the current conversation, with an input naming turn, messageID and
// text and a model request of one user message, told. A system that lets nobody start one makes
// the scenario not applicable.
func (s *sharedSteps) plantTurn(who string, msg, turn int64, messageID, text, told string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	id := oracle.TurnExecutionID(decodeKey(s.cfg.Signing.Key), c.id, msg)
	input := map[string]any{"v": 1, "conversationId": c.id, "ord": msg, "turn": turn, "asker": identityJSON(who),
		"messageId": messageID, "text": text, "messages": []map[string]string{{"role": "user", "content": told}}}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, "/runtime/executions", map[string]any{"id": id, "flow": "conversation.turn", "input": input}, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.status != http.StatusCreated {
		return &HarnessError{Err: fmt.Errorf("%w: the system lets nobody start a turn execution through the runtime door (%d)", ErrNotApplicable, r.status)}
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

// sharedParticipantsVocabulary lists the steps of features/shared/participants.feature.
func sharedParticipantsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the tool "(\w+)" is declared with no class$`, a.shared.toolWithoutClass, "declares a tool the host gives no data class"},
		{`^the request to the model for "((?:[^"\\]|\\.)*)" holds no earlier turns$`, a.model.requestForHoldsNoEarlier, "expects the request to the model for the text to hold no earlier turn"},
		{`^the summarizer was never handed the words "((?:[^"\\]|\\.)*)"$`, a.budget.summarizerNeverHanded, "expects the summarizer never to have been handed the words"},
		{`^(\w[\w' ]*?)'s stream got exactly these events:$`, a.live.streamEvents, "expects who's stream to have got exactly the table's events"},
		{`^the clearances are:$`, a.shared.clearancesAre, "scripts the clearance service with the table's clearance per principal"},
		{`^the clearance service answers (.+) for (\w+)$`, a.shared.clearanceAnswers, "scripts the clearance service's answer for the principal"},
		{`^(\w[\w' ]*?) has started a shared conversation with (.+)$`, a.shared.hasStartedShared, "makes who start a shared conversation with the participants, expecting success"},
		{`^(\w[\w' ]*?) starts a shared conversation with (.+)$`, a.shared.startsShared, "asks to start a shared conversation with the participants as who; the answer is kept"},
		{`^(the service(?:'s other token| at evil| without a tenant| for alice)?) starts a conversation in shared mode$`, a.shared.serviceStartsShared, "asks to start a conversation in shared mode as the service or a look-alike"},
		{`^(\w[\w' ]*?) sees turn (\d+) answered "((?:[^"\\]|\\.)*)"$`, a.shared.seesTurnAnswered, "waits until who sees turn N answered with the text"},
		{`^(\w[\w' ]*?)'s turn (\d+) fails with reason "([^"]*)"$`, a.shared.turnOfFails, "waits until who's turn N failed and expects its reason"},
		{`^(\w[\w' ]*?) sees the reply to turn (\d+) as restricted$`, a.shared.seesRestricted, "expects who to see the reply to turn N as restricted"},
		{`^(\w[\w' ]*?) sees the reply to turn (\d+) classed "([^"]*)"$`, a.shared.seesClassed, "expects who to see the reply to turn N carrying the class"},
		{`^(\w[\w' ]*?) (adds|removes) (\w[\w' ]*?) (?:to|from) the participants$`, a.shared.changesParticipant, "adds or removes a participant as who; the answer is kept"},
		{`^(\w[\w' ]*?) changes the participants with (\{.*\})$`, a.shared.changesParticipantsWith, "sends the raw participants change as who; the answer is kept"},
		{`^(\w[\w' ]*?) reads the whole history$`, a.shared.readsWholeHistory, "reads the whole history as who; the answer is kept"},
		{`^the clearance service was asked about (\w[\w' ]*?)'s whole identity$`, a.shared.clearanceAskedWhole, "expects the clearance service to have been asked with who's whole identity"},
		{`^the conversation has (\d+) participants$`, a.shared.hasParticipants, "expects the conversation to have exactly N participants"},
		{`^(\w[\w' ]*?) sees turn (\d+) interrupted$`, a.shared.seesTurnInterrupted, "waits until who sees turn N interrupted"},
		{`^(\w[\w' ]*?) can read the conversation$`, a.shared.canRead, "expects who to be able to read the conversation's history"},
		{`^the participants are (.+), each change recorded with who made it$`, a.shared.participantsAre, "expects exactly these participants, each change recorded with who made it"},
		{`^(the service(?:'s other token)?) gets the same 404 as for a missing conversation on the conversation routes$`, a.shared.serviceGetsMissing, "expects the service (or its other token) to get the missing-conversation 404 on every conversation route"},
		{`^(\w+) sees that (?:his|her) answer to turn (\d+) ran as the turn execution the host key names for message (\d+)$`, a.shared.ranAsHostKeyed, "expects who's answer to turn N to have run as the turn execution the host key names for message N"},
		{`^(\w+) sees no turn execution id on turn (\d+)$`, a.shared.noTurnExecutionID, "expects turn N to carry no turn execution id, as who sees it"},
		{`^(\w+) plants a turn execution at the id of message (\d+), saying "([^"]*)"$`, a.shared.plantsTurnExecution, "starts a turn execution as who at the id message N's turn would take, with the text"},
		{`^(\w+) plants a turn execution at the id of message (\d+) for turn (\d+), message id "([^"]*)" and text "([^"]*)", whose model is told "([^"]*)"$`, a.shared.plantTurn, "plants a turn execution at message N's id with the given turn, message id, text and model words"},
		{`^no record holds "((?:[^"\\]|\\.)*)"$`, a.shared.noRecordHolds, "expects no record of the history to hold the text"},
		{`^the error hook was told why turn (\d+) failed$`, a.shared.errorHookToldWhy, "expects the error hook to have been told why turn N failed"},
		{`^(\w+)'s stream shows the reply to turn (\d+) only as a restricted placeholder$`, a.shared.streamShowsPlaceholder, "expects who's stream to show turn N's reply only as a restricted placeholder"},
		{`^(\w+) reconnects from the first record$`, a.shared.reconnectsFromFirst, "opens a new stream as who from the first record"},
		{`^(\w[\w' ]*?) sees the reply to turn (\d+) with no class "([^"]*)"$`, a.shared.seesNoClass, "expects who to see the reply to turn N without the class"},
		{`^the restricted entries (\w+) sees carry only turn, role, status, cursor, ord, time and asker$`, a.shared.restrictedEntriesCarry, "expects the restricted entries who sees to carry only turn, role, status, cursor, ord, time and asker"},
	}
}
