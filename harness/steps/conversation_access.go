package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// getsMissingOnEveryRoute asks every conversation route as who and expects each answer to equal the one a missing conversation gets.
func (s *accessSteps) getsMissingOnEveryRoute(who string) error {
	return s.sameNotFound(who, s.run.Door)
}

// startsDoorTurnClaimingOwn starts a turn execution with the given id through the runtime door, its input naming who's own conversation.
func (s *accessSteps) startsDoorTurnClaimingOwn(who, id string) error {
	if err := s.sut(); err != nil {
		return err
	}
	id = s.own(id)
	// The door starts a turn execution only for a conversation its caller may touch: the
	// input names one of hers beside the start input it imitates.
	own, err := s.start(who, "", nil)
	if err != nil {
		return err
	}
	if own.Status != http.StatusCreated {
		return fail(own.Op, fmt.Sprintf("%d %s", own.Status, clip(string(own.Body), 200)), "201: a conversation of her own")
	}
	input := map[string]any{"v": 1, "owner": identityJSON(who), "mode": "owner", "conversationId": s.current.id}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runtime/executions", map[string]any{"id": id, "flow": "conversation.turn", "input": input}, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.Status != http.StatusCreated {
		// A system may confine the door to the named conversation's own turn ids, where
		// no conversation id can be: the pretender is then made there.
		id = "turn:" + s.current.id + ":" + id
		if r, err = s.cl.Do(s.ctx, who, http.MethodPost, "/runtime/executions", map[string]any{"id": id, "flow": "conversation.turn", "input": input}, reqOpts{}); err != nil {
			return err
		}
		s.last = r
	}
	if r.Status != http.StatusCreated {
		return &HarnessError{Err: fmt.Errorf("%w: the system lets nobody start a turn execution through the runtime door (%d)", ErrNotApplicable, r.Status)}
	}
	c := &conv{name: id, id: id, owner: who}
	s.convs[id] = c
	s.current = c
	return nil
}

// sendsToRoute sends the method to the named route of the current conversation as who.
func (s *accessSteps) sendsToRoute(who, method, suffix string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	var body []byte
	if method != http.MethodGet {
		body = []byte("{}")
	}
	r, err := s.cl.Do(s.ctx, who, method, p+suffix, nil, reqOpts{RawBody: body, OffSpec: true, Unrouted: true})
	s.last = r
	return err
}

// wrongMethod sends the method to the route of the current conversation and to the same route
// of a conversation that does not exist, as who, and expects the same answer to both (status,
// Allow and body): the uniform 404, or a 405 {"error":"method not allowed"} whose Allow names
// methods but not the one sent (spec/http.md, Routes and methods).
func (s *accessSteps) wrongMethod(who, method, suffix string) error {
	_, c, err := s.convPath("")
	if err != nil {
		return err
	}
	var body []byte
	if method != http.MethodGet {
		body = []byte("{}")
	}
	ask := func(id string) (*response, error) {
		return s.cl.Do(s.ctx, who, method, "/conversations/"+url.PathEscape(id)+suffix, nil,
			reqOpts{RawBody: body, OffSpec: true, Unrouted: true})
	}
	got, err := ask(c.id)
	if err != nil {
		return err
	}
	s.last = got
	want, err := ask("missing-" + c.id)
	if err != nil {
		return err
	}
	op := got.Op + " as " + who
	gotText := fmt.Sprintf("%d Allow %q %s", got.Status, got.Header.Get("Allow"), clip(string(got.Body), 120))
	switch b := compact(got.Body); {
	case got.Status == http.StatusNotFound && bytes.Equal(b, []byte(`{"error":"not found"}`)):
	case got.Status == http.StatusMethodNotAllowed && bytes.Equal(b, []byte(`{"error":"method not allowed"}`)) &&
		allowOmits(got.Header.Get("Allow"), method):
	default:
		return fail(op, gotText, `404 {"error":"not found"}, or 405 {"error":"method not allowed"} with an Allow naming the route's methods, not `+method)
	}
	if got.Status != want.Status || got.Header.Get("Allow") != want.Header.Get("Allow") || !bytes.Equal(compact(got.Body), compact(want.Body)) {
		return fail(op, gotText, fmt.Sprintf("the answer at a conversation that does not exist: %d Allow %q %s",
			want.Status, want.Header.Get("Allow"), clip(string(want.Body), 120)))
	}
	return nil
}

// allowOmits says whether an Allow header names at least one method, and not method.
func allowOmits(allow, method string) bool {
	named := false
	for _, m := range strings.Split(allow, ",") {
		m = strings.TrimSpace(m)
		if strings.EqualFold(m, method) {
			return false
		}
		named = named || m != ""
	}
	return named
}

// answerIsMissingConversations expects the last answer to be exactly the 404 {"error":"not found"} a missing conversation gets.
func (s *accessSteps) answerIsMissingConversations() error {
	if s.last == nil {
		return harnessErr("no request has been sent")
	}
	if s.last.Status != http.StatusNotFound || !bytes.Equal(compact(s.last.Body), []byte(`{"error":"not found"}`)) {
		return fail(s.last.Op, fmt.Sprintf("%d %s %s", s.last.Status, s.last.Header.Get("Content-Type"), clip(string(s.last.Body), 120)), `404 {"error":"not found"}`)
	}
	return nil
}

// getsMissingOnConversationRoutes asks the conversation routes of the current conversation as who and expects the missing-conversation 404 on each.
func (s *accessSteps) getsMissingOnConversationRoutes(who string) error {
	return s.sameNotFound(who, false)
}

// probe is one request a stranger tries on a conversation.
type probe struct {
	method, path string
	body         any
	stream       bool
}

func probes(id string, door bool) []probe {
	p := "/conversations/" + url.PathEscape(id)
	out := []probe{
		{method: http.MethodGet, path: p},
		{method: http.MethodPost, path: p + "/turns", body: map[string]any{"text": "let me in", "messageId": "probe-1"}},
		{method: http.MethodPost, path: p + "/close", body: map[string]any{}},
		{method: http.MethodGet, path: p + "/history"},
		{method: http.MethodGet, path: p + "/history?direction=backward&cursor=0.1"},
		{method: http.MethodGet, path: p + "/events", stream: true},
		{method: http.MethodGet, path: p + "/participants"},
		{method: http.MethodPost, path: p + "/participants", body: map[string]any{"op": "add", "identity": map[string]any{"tenant": "evil", "actor": "mallory"}}},
	}
	if door {
		r := "/runtime/executions/" + url.PathEscape(id)
		out = append(out,
			probe{method: http.MethodPost, path: r + "/messages", body: map[string]any{"messageId": "probe-2", "payload": map[string]any{"kind": "user"}}},
			probe{method: http.MethodGet, path: r + "/log"})
	}
	return out
}

// try sends one probe and returns its status and body.
func (s *scenario) try(who string, p probe) (int, []byte, error) {
	if p.stream {
		st, err := s.cl.OpenStream(s.ctx, who, p.path, nil)
		if err != nil {
			return 0, nil, err
		}
		if st.Status == http.StatusOK {
			st.Close()
		}
		return st.Status, st.Body, nil
	}
	r, err := s.cl.Do(s.ctx, who, p.method, p.path, p.body, reqOpts{})
	if err != nil {
		return 0, nil, err
	}
	return r.Status, r.Body, nil
}

// sameNotFound checks that who gets, on every route of the current conversation, exactly the
// answer a conversation that does not exist gets; door adds the runtime door's routes (when the
// system has one). It only reads the run's state, which scenarios running at once share.
func (s *scenario) sameNotFound(who string, door bool) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	missing := "missing-" + c.id
	for i, p := range probes(c.id, door) {
		code, body, err := s.try(who, p)
		if err != nil {
			return err
		}
		mp := probes(missing, door)[i]
		mcode, mbody, err := s.try(who, mp)
		if err != nil {
			return err
		}
		op := p.method + " " + p.path + " as " + who
		if code != http.StatusNotFound || !bytes.Equal(compact(body), []byte(`{"error":"not found"}`)) {
			return fail(op, fmt.Sprintf("%d %s", code, clip(string(body), 200)), `404 {"error":"not found"}`)
		}
		if mcode != code || !bytes.Equal(body, mbody) {
			return fail(op, fmt.Sprintf("%d %q", code, body), fmt.Sprintf("the same answer as for a missing conversation: %d %q", mcode, mbody))
		}
	}
	return nil
}

// sameAsOwner checks that who, another token for owner's very identity, gets on every reading
// route of the current conversation exactly the answer owner gets: the same status and the same
// body; that owner reads them all (the runtime door aside, which a shared conversation's
// participants may not read either: in owner mode the owner reads it too); and that its event
// stream opens.
func (s *accessSteps) sameAsOwner(who, owner string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	p := "/conversations/" + url.PathEscape(c.id)
	reads := []string{p, p + "/history", p + "/history?direction=backward&limit=1", p + "/participants"}
	if s.run.Door {
		reads = append(reads, "/runtime/executions/"+url.PathEscape(c.id)+"/log")
	}
	shared := false
	for _, path := range reads {
		want, err := s.cl.Do(s.ctx, owner, http.MethodGet, path, nil, reqOpts{})
		if err != nil {
			return err
		}
		if path == p {
			var st struct {
				Mode string `json:"mode"`
			}
			_ = json.Unmarshal(want.Body, &st)
			shared = st.Mode == "shared"
		}
		got, err := s.cl.Do(s.ctx, who, http.MethodGet, path, nil, reqOpts{})
		if err != nil {
			return err
		}
		if want.Status != http.StatusOK && !(shared && strings.HasPrefix(path, "/runtime/")) {
			return fail(want.Op+" as "+owner, fmt.Sprintf("%d %s", want.Status, clip(string(want.Body), 200)), "200: the owner reads")
		}
		if got.Status != want.Status || !bytes.Equal(compact(got.Body), compact(want.Body)) {
			return fail(got.Op+" as "+who, fmt.Sprintf("%d %s", got.Status, clip(string(got.Body), 200)),
				fmt.Sprintf("what %s gets, the same identity: %d %s", owner, want.Status, clip(string(want.Body), 200)))
		}
	}
	st, err := s.cl.OpenStream(s.ctx, who, p+"/events", nil)
	if err != nil {
		return err
	}
	defer st.Close()
	if st.Status != http.StatusOK {
		return fail(st.Op+" as "+who, fmt.Sprintf("%d %s", st.Status, clip(string(st.Body), 200)), "200 and an event stream: the owner's identity")
	}
	return nil
}

// injectTurn starts, through the runtime door and as who, a turn execution of the shared-mode turn
// flow whose input names the current conversation, turn and who as its asker, and whose model is
// told text: what any principal can try against a conversation that is not theirs. The answer is
// kept for the next step to judge (a system with no runtime door makes the scenario not
// applicable).
func (s *accessSteps) injectTurn(who string, turn int64, text string) error {
	if !s.run.Door {
		return &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	s.msgSeq++
	// Inside the conversation's own turn ids (spec/http.md, the runtime door), where a system
	// may confine the door's starts.
	id := fmt.Sprintf("turn:%s:injected-%d", c.id, s.msgSeq)
	text = unescape(text)
	input := map[string]any{"v": 1, "conversationId": c.id, "ord": turn, "turn": turn, "asker": identityJSON(who),
		"messageId": id, "text": text, "messages": []map[string]string{{"role": "user", "content": text}}}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runtime/executions", map[string]any{"id": id, "flow": "conversation.turn", "input": input}, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	s.injected = text
	s.injectedBy, s.injectedID = who, id
	return nil
}

// injectionSettled waits, when the runtime door started the turn execution injectTurn asked for,
// until the model has finished answering its request and then until the execution's log, read by
// its starter, says it is done: whatever live text it could hand to the conversation's streams it
// has handed by then, so a later event of the owner's own turn is a sentinel after it. A refused
// start leaves nothing to wait for.
func (s *accessSteps) injectionSettled() error {
	if s.last == nil || s.injected == "" {
		return harnessErr("no turn execution has been started through the runtime door")
	}
	if s.last.Status != http.StatusCreated {
		return nil
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range s.world.Model().Requests() {
			if r.Finished && lastUserOf(r.Messages) == s.injected {
				return s.executionDone(ctx, s.injectedBy, s.injectedID)
			}
		}
		select {
		case <-ctx.Done():
			return fail("the model", "no finished request for "+s.injected, "the started turn execution's model call, finished")
		case <-tick.C:
		}
	}
}

// executionDone reads the runtime door's log of the execution id, as who, page after page, until
// it says done (the execution has ended and the log is read to its end); it polls while it is not.
func (s *scenario) executionDone(ctx context.Context, who, id string) error {
	op := "GET /runtime/executions/" + id + "/log"
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	cursor := ""
	for {
		q := "?limit=500"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := s.cl.Do(ctx, who, http.MethodGet, "/runtime/executions/"+url.PathEscape(id)+"/log"+q, nil, reqOpts{})
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fail(op, fmt.Sprint(r.Status), "200: the starter reads its own execution's log")
		}
		var p struct {
			NextCursor string `json:"nextCursor"`
			Done       bool   `json:"done"`
		}
		if err := r.JSON(&p); err != nil {
			return err
		}
		if p.Done {
			return nil
		}
		if p.NextCursor != "" && p.NextCursor != cursor {
			cursor = p.NextCursor
			continue
		}
		select {
		case <-ctx.Done():
			return fail(op, "an execution not done", "the started turn execution done, its model having answered")
		case <-tick.C:
		}
	}
}

// lastUserOf is the content of the last user message of a model request.
func lastUserOf(msgs []world.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// headerNames are the names of the headers of a and b, sorted.
func headerNames(a, b http.Header) []string {
	var out []string
	for _, h := range []http.Header{a, b} {
		for k := range h {
			if !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// doorIDProbe has who start, through the runtime door, a turn execution whose input names a
// conversation of who's own, once at the id of owner's conversation and once at an id nothing
// holds: the two answers must be the same, status and body (an execution id taken by what who
// may not touch is no more visible than a conversation is). A system that starts either makes
// the other id's answer the one to match, and leaves owner's conversation as it was.
func (s *accessSteps) doorIDProbe(who, owner string) error {
	if !s.run.Door {
		return &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
	}
	var victim *conv
	for _, c := range s.convs {
		if c.owner == owner {
			victim = c
		}
	}
	if victim == nil {
		return harnessErr("%s has started no conversation", owner)
	}
	cur := s.current
	own, err := s.start(who, "", nil)
	s.current = cur
	if err != nil {
		return err
	}
	if own.Status != http.StatusCreated {
		return fail(own.Op, fmt.Sprintf("%d %s", own.Status, clip(string(own.Body), 200)), "201: a conversation of her own")
	}
	var st status
	if err := own.JSON(&st); err != nil {
		return err
	}
	try := func(id string) (*response, error) {
		input := map[string]any{"v": 1, "conversationId": st.ID, "ord": 1, "turn": 1, "asker": identityJSON(who),
			"messageId": "probe", "text": "probe", "messages": []map[string]string{{"role": "user", "content": "probe"}}}
		return s.cl.Do(s.ctx, who, http.MethodPost, "/runtime/executions", map[string]any{"id": id, "flow": "conversation.turn", "input": input}, reqOpts{})
	}
	taken, err := try(victim.id)
	if err != nil {
		return err
	}
	free, err := try("missing-" + victim.id)
	if err != nil {
		return err
	}
	s.last = taken
	if taken.Status != free.Status || !bytes.Equal(compact(taken.Body), compact(free.Body)) {
		return fail(taken.Op+" as "+who+" at the id of "+owner+"'s conversation", fmt.Sprintf("%d %s", taken.Status, clip(string(taken.Body), 200)),
			fmt.Sprintf("what an id nothing holds gets: %d %s", free.Status, clip(string(free.Body), 200)))
	}
	return nil
}

// modelStreamsWaitsThenStreams scripts the model to stream the deltas to the text, wait, then stream more once released.
func (s *modelSteps) modelStreamsWaitsThenStreams(parts, match, more string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Chunks: quoted(parts), Hold: h, After: []string{unescape(more)}}); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

// streamEventsBeforeLiveAtMost is streamEventsBefore where the table's live text of a turn is the
// most the stream may show: spec/http.md orders live text after the records committed before it
// but does not promise that every delta of a reply arrives before the reply's record, so a stream
// may show a beginning of each listed delta's text, or none of it; every other event is exact.
func (s *liveSteps) streamEventsBeforeLiveAtMost(who string, turn int64, t *godog.Table) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	return s.eventsBefore(st, t, turn, liveAtMost)
}

// startsNamingOwner asks to start a conversation as who, under the chosen id when one is given,
// with a body that names another principal as its owner (a member the contract does not have);
// the answer is kept.
func (s *accessSteps) startsNamingOwner(who, id, owner string) error {
	if _, ok := principals[owner]; !ok {
		return harnessErr("unknown principal %q", owner)
	}
	if err := s.sut(); err != nil {
		return err
	}
	body := map[string]any{"owner": identityJSON(owner)}
	if id != "" {
		body["id"] = s.own(id)
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations", body, reqOpts{OffSpec: true})
	s.last = r
	return err
}

// startsWithMembers asks to start a conversation as who under the chosen id, the body holding
// the given members beside the id; the answer is kept.
func (s *accessSteps) startsWithMembers(who, id, members string) error {
	var body map[string]any
	if err := json.Unmarshal([]byte(members), &body); err != nil {
		return harnessErr("the members %s are not a JSON object: %v", members, err)
	}
	if err := s.sut(); err != nil {
		return err
	}
	body["id"] = s.own(id)
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations", body, reqOpts{OffSpec: true})
	s.last = r
	return err
}

// conversationAccessVocabulary lists the steps of features/conversation/access.feature.
func conversationAccessVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) to "((?:[^"\\]|\\.)*)" and waits, then streams "((?:[^"\\]|\\.)*)"$`, a.model.modelStreamsWaitsThenStreams, "scripts the model to stream the deltas to the text, wait, then stream more once released"},
		{`^(\w[\w' ]*?) gets the same 404 as for a missing conversation on every route$`, a.access.getsMissingOnEveryRoute, "asks every conversation route as who and expects each answer to equal the one a missing conversation gets"},
		{`^(\w[\w' ]*?) is answered on every route exactly as (\w+) is$`, a.access.sameAsOwner, "asks every conversation route as who and expects each answer to equal the one the owner gets"},
		{`^(\w[\w' ]*?) starts a turn execution "([^"]*)" through the runtime door, its input claiming to be (?:her|his) own conversation$`, a.access.startsDoorTurnClaimingOwn, "starts a turn execution with the given id through the runtime door, its input naming who's own conversation"},
		{`^(\w[\w' ]*?) starts a conversation(?: with id "([^"]*)")? naming (\w[\w' ]*?) as its owner$`, a.access.startsNamingOwner, "asks to start a conversation as who, under the chosen id if given, with a body naming another principal as its owner; the answer is kept"},
		{`^(\w[\w' ]*?) starts a conversation with id "([^"]*)" and the members (\{.*\})$`, a.access.startsWithMembers, "asks to start a conversation as who under the chosen id, with the given members beside the id in its body; the answer is kept"},
		{`^(\w[\w' ]*?) sends (GET|POST|PUT|DELETE|PATCH) to the conversation's route "([^"]*)"$`, a.access.sendsToRoute, "sends the method to the named route of the current conversation as who"},
		{`^(\w[\w' ]*?) sending (GET|POST|PUT|DELETE|PATCH) to the conversation's route "([^"]*)" is answered exactly as at a conversation that does not exist, with the uniform 404 or a 405$`, a.access.wrongMethod, "sends the method to the route of the current conversation and of a missing one as who, and expects the same answer, the uniform 404 or a 405 with Allow"},
		{`^the answer is exactly the one a conversation that does not exist gets$`, a.access.answerIsMissingConversations, "expects the last answer to be exactly the 404 {\"error\":\"not found\"} a missing conversation gets"},
		{`^(\w[\w' ]*?) gets the same 404 as for a missing conversation on the conversation routes of it$`, a.access.getsMissingOnConversationRoutes, "asks the conversation routes of the current conversation as who and expects the missing-conversation 404 on each"},
		{`^(\w[\w' ]*?) starts a turn execution for turn (\d+) of the conversation through the runtime door, saying "((?:[^"\\]|\\.)*)"$`, a.access.injectTurn, "starts a turn execution for the turn through the runtime door as who, with the given user text"},
		{`^that turn execution has been refused, or its model call has ended$`, a.access.injectionSettled, "waits until the door's turn execution was refused or its model call ended"},
		{`^(\w[\w' ]*?) starting a turn execution for her own conversation at the id of (\w+)'s conversation is answered exactly as at an id nothing holds$`, a.access.doorIDProbe, "starts a door turn execution for who's own conversation at another's conversation id and compares with a free id"},
		{`^(\w[\w' ]*?)'s stream got these events before the message of turn (\d+), each turn's live text at most the table's:$`, a.live.streamEventsBeforeLiveAtMost, "expects who's stream to have got the table's events before turn N's message, where a turn's live text may stop short of the table's (the spec does not promise every delta before the reply's record)"},
	}
}
