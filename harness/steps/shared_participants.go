package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/oracle"
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/participants", body, reqOpts{})
	s.last = r
	if err == nil && r.Status == http.StatusOK {
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/participants", nil, reqOpts{RawBody: []byte(raw), OffSpec: true})
	s.last = r
	return err
}

// hasParticipants expects the conversation to have exactly N participants.
func (s *sharedSteps) hasParticipants(n int) error {
	p, c, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, c.owner, http.MethodGet, p+"/participants", nil, reqOpts{})
	if err != nil {
		return err
	}
	var pl struct {
		Participants []map[string]string `json:"participants"`
	}
	if err := r.JSON(&pl); err != nil {
		return err
	}
	if len(pl.Participants) != n {
		return fail(r.Op, fmt.Sprintf("%d participants", len(pl.Participants)), fmt.Sprintf("%d, the owner included", n))
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
	r, err := s.cl.Do(s.ctx, who, http.MethodGet, p, nil, reqOpts{})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fail(r.Op+" as "+who, fmt.Sprint(r.Status), "200: a participant reads the conversation")
	}
	return nil
}

// participantsAre expects exactly these participants, each change recorded with who made it.
func (s *sharedSteps) participantsAre(list string) error {
	p, c, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, c.owner, http.MethodGet, p+"/participants", nil, reqOpts{})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 and the participants")
	}
	var pl struct {
		Participants []map[string]string `json:"participants"`
		Changes      []partChange        `json:"changes"`
	}
	if err := r.JSON(&pl); err != nil {
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
		return fail(r.Op, fmt.Sprintf("participants %v", got), fmt.Sprintf("%v", want))
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
		return fail(r.Op, fmt.Sprintf("changes %v", changesText(pl.Changes)), fmt.Sprintf("the changes made, each with who made it: %v", wantC))
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runtime/executions", map[string]any{"id": id, "flow": "conversation.turn", "input": input}, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.Status != http.StatusCreated {
		return &HarnessError{Err: fmt.Errorf("%w: the system lets nobody start a turn execution through the runtime door (%d)", ErrNotApplicable, r.Status)}
	}
	return nil
}

// sharedParticipantsVocabulary lists the steps of features/shared/participants.feature.
func sharedParticipantsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the clearances are:$`, a.shared.clearancesAre, "scripts the clearance service with the table's clearance per principal"},
		{`^(\w[\w' ]*?) has started a shared conversation with (.+)$`, a.shared.hasStartedShared, "makes who start a shared conversation with the participants, expecting success"},
		{`^(\w[\w' ]*?) starts a shared conversation with (.+)$`, a.shared.startsShared, "asks to start a shared conversation with the participants as who; the answer is kept"},
		{`^(the service(?:'s other token| at evil| without a tenant| for alice)?) starts a conversation in shared mode$`, a.shared.serviceStartsShared, "asks to start a conversation in shared mode as the service or a look-alike"},
		{`^(\w[\w' ]*?) sees turn (\d+) answered "((?:[^"\\]|\\.)*)"$`, a.shared.seesTurnAnswered, "waits until who sees turn N answered with the text"},
		{`^(\w[\w' ]*?)'s turn (\d+) fails with reason "([^"]*)"$`, a.shared.turnOfFails, "waits until who's turn N failed and expects its reason"},
		{`^(\w[\w' ]*?) (adds|removes) (\w[\w' ]*?) (?:to|from) the participants$`, a.shared.changesParticipant, "adds or removes a participant as who; the answer is kept"},
		{`^(\w[\w' ]*?) changes the participants with (\{.*\})$`, a.shared.changesParticipantsWith, "sends the raw participants change as who; the answer is kept"},
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
	}
}
