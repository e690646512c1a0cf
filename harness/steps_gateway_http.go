package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

// notesWhatConversationHolds remembers the history, status and participants of the current conversation as who reads them.
func (s *gatewaySteps) notesWhatConversationHolds(who string) error {
	h, err := s.hold(who)
	if err != nil {
		return err
	}
	s.held = &h
	return nil
}

// conversationHoldsExactlyWhatItHeld expects who to read exactly the remembered history, status and participants.
func (s *gatewaySteps) conversationHoldsExactlyWhatItHeld(who string) error {
	if s.held == nil {
		return harnessErr("nobody noted what the conversation held")
	}
	h, err := s.hold(who)
	if err != nil {
		return err
	}
	for _, d := range []struct{ what, got, want string }{
		{"the history", h.history, s.held.history},
		{"the status", h.status, s.held.status},
		{"the participants", h.participants, s.held.participants},
	} {
		if d.got != d.want {
			return fail("GET "+d.what+" after the refused request", clip(d.got, 600), clip(d.want, 600)+" (what it held before)")
		}
	}
	return nil
}

// postsBodyToRoute posts a raw body, with an optional content type, to the named route as who.
func (s *gatewaySteps) postsBodyToRoute(who, body, route, ct string) error {
	raw, err := bodyBytes(body)
	if err != nil {
		return err
	}
	var path string
	switch route {
	case "start":
		path = "/conversations"
	case "runtime start":
		path = "/runtime/executions"
	default:
		c, err := s.conv("")
		if err != nil {
			return err
		}
		path = "/conversations/" + url.PathEscape(c.id) + "/" + route
		if route == "runtime send" {
			path = "/runtime/executions/" + url.PathEscape(c.id) + "/messages"
		}
	}
	if ct == "" {
		ct = "application/json"
	}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, path, nil, reqOpts{rawBody: raw, contentType: ct, offSpec: true})
	s.last = r
	if err != nil {
		return err
	}
	if (route == "runtime start" || route == "runtime send") && !s.run.door {
		return &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
	}
	return nil
}

// answerHasBody expects the last answer's status, and a body equal as JSON to the given one.
func (s *gatewaySteps) answerHasBody(code int, want string) error {
	if s.last == nil {
		return harnessErr("no request has been sent")
	}
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return harnessErr("the expected body %s is not JSON: %v", want, err)
	}
	var g any
	if s.last.status != code || json.Unmarshal(s.last.body, &g) != nil || !reflect.DeepEqual(g, w) {
		return fail(s.last.op, fmt.Sprintf("%d %s", s.last.status, clip(string(s.last.body), 300)), fmt.Sprintf("%d %s", code, want))
	}
	return nil
}

// noAuthentication configures the system with no identity service and no insecure mode.
func (s *gatewaySteps) noAuthentication() error {
	return s.configure(func(c *spec.SUTConfig) {
		c.Identity = spec.IdentityConfig{}
	})
}

// insecureExplicitly configures the system to run without authentication, explicitly.
func (s *gatewaySteps) insecureExplicitly() error {
	return s.configure(func(c *spec.SUTConfig) {
		c.Identity = spec.IdentityConfig{Insecure: true}
	})
}

// discoveryWithHost asks for the discovery document with the given Host header.
func (s *gatewaySteps) discoveryWithHost(host string) error {
	if err := s.sut(); err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, "", http.MethodGet, "/.well-known/loom", nil, reqOpts{host: host})
	s.last = r
	return err
}

// startsWithHost asks to start a conversation with the given Host header, as who or with no credential.
func (s *gatewaySteps) startsWithHost(who, host string) error {
	if err := s.sut(); err != nil {
		return err
	}
	if who == "someone" {
		who = ""
	}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, "/conversations", map[string]any{}, reqOpts{host: host})
	s.last = r
	return err
}

// startsPresenting asks to start a conversation presenting the credential the way named.
func (s *gatewaySteps) startsPresenting(who, how string) error {
	if err := s.sut(); err != nil {
		return err
	}
	o := reqOpts{headers: map[string]string{}}
	path := "/conversations"
	switch how {
	case "an unknown bearer token":
		o.headers["Authorization"] = "Bearer tok-nobody-knows"
	case "her token as a query parameter":
		path += "?access_token=" + url.QueryEscape(tokenOf(who))
		o.offSpec = true
	case "her token in a session cookie":
		o.headers["Cookie"] = "session=" + tokenOf(who)
	}
	r, err := s.cl.do(s.ctx, "", http.MethodPost, path, map[string]any{}, o)
	s.last = r
	return err
}

// startsPresentingScheme asks to start a conversation presenting who's token under the given authorization scheme.
func (s *gatewaySteps) startsPresentingScheme(who, scheme string) error {
	if err := s.sut(); err != nil {
		return err
	}
	o := reqOpts{headers: map[string]string{"Authorization": scheme + " " + tokenOf(who)}}
	r, err := s.cl.do(s.ctx, "", http.MethodPost, "/conversations", map[string]any{}, o)
	s.last = r
	return err
}

// streamRefused429 expects the last stream refused with 429 and the error "too many requests".
func (s *gatewaySteps) streamRefused429() error {
	st := s.areas.live.lastStream
	if st == nil {
		return harnessErr("no stream was opened")
	}
	var body struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(st.body, &body)
	if st.status != http.StatusTooManyRequests || body.Error != "too many requests" {
		return fail(st.op, fmt.Sprintf("%d %s", st.status, clip(string(st.body), 120)), `429 {"error":"too many requests"}: the limit is reached`)
	}
	return nil
}

// sendsBodyOfBytes sends a turn in a body of exactly N bytes as who, with or without Content-Length.
func (s *gatewaySteps) sendsBodyOfBytes(who string, size int, how string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	// A well-formed turn, padded with JSON whitespace to exactly size bytes.
	body := []byte(fmt.Sprintf(`{"text":"sized","messageId":%q}`, s.nextMessageID()))
	if len(body) > size {
		return harnessErr("a turn needs at least %d bytes", len(body))
	}
	body = append(body[:len(body)-1], append([]byte(strings.Repeat(" ", size-len(body))), '}')...)
	r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{rawBody: body, offSpec: true, chunked: how == "without a"})
	s.last = r
	return err
}

// sendsTwice sends the same text twice to another's conversation as who; both answers are kept.
func (s *gatewaySteps) sendsTwice(who, text, owner string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	s.answers = nil
	for i := range 2 {
		r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", map[string]any{"text": unescape(text), "messageId": fmt.Sprintf("probe-%d", i)}, reqOpts{})
		if err != nil {
			return err
		}
		s.answers = append(s.answers, r)
	}
	return nil
}

// bothAnswersAre expects both kept answers to carry the status and error code.
func (s *gatewaySteps) bothAnswersAre(code int, e string) error {
	for _, r := range s.answers {
		var body struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(r.body, &body)
		if r.status != code || body.Error != e {
			return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 100)), fmt.Sprintf("%d %q", code, e))
		}
	}
	return nil
}

// sendsFromOrigin sends the text as who from the given Origin.
func (s *gatewaySteps) sendsFromOrigin(who, text, origin string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", map[string]any{"text": unescape(text), "messageId": s.nextMessageID()},
		reqOpts{headers: map[string]string{"Origin": origin}})
	s.last = r
	return err
}

// sendsFromOriginNamedInConnection sends the text times times as who from origin, each request
// naming Origin in its Connection header and closing its connection after it (so that, behind
// several nodes, the requests reach more than one of them); the answers are kept.
func (s *gatewaySteps) sendsFromOriginNamedInConnection(who, text, origin string, times int) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	s.answers = nil
	for range times {
		r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", map[string]any{"text": unescape(text), "messageId": s.nextMessageID()},
			reqOpts{headers: map[string]string{"Origin": origin, "Connection": "Origin, close"}})
		if err != nil {
			return err
		}
		s.answers = append(s.answers, r)
		s.last = r
	}
	return nil
}

// startsClaimingForwarded asks times times as who to start a conversation with the given
// Loom-Forwarded-By header (the header nodes mark their forwards with, spec/nodes.md), each on a
// connection of its own; the answers are kept.
func (s *gatewaySteps) startsClaimingForwarded(who string, times int, by string) error {
	if err := s.sut(); err != nil {
		return err
	}
	s.answers = nil
	for range times {
		r, err := s.cl.do(s.ctx, who, http.MethodPost, "/conversations", map[string]any{},
			reqOpts{headers: map[string]string{"Loom-Forwarded-By": by, "Connection": "close"}})
		if err != nil {
			return err
		}
		s.answers = append(s.answers, r)
		s.last = r
	}
	return nil
}

// everyAnswerIs expects every kept answer to carry the status.
func (s *gatewaySteps) everyAnswerIs(code int) error {
	if len(s.answers) == 0 {
		return harnessErr("no answer was kept")
	}
	for _, r := range s.answers {
		if r.status != code {
			return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 100)), fmt.Sprint(code))
		}
	}
	return nil
}

// statusFromOrigin reads the status of a missing conversation as who from the given Origin.
func (s *gatewaySteps) statusFromOrigin(who, origin string) error {
	if err := s.sut(); err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, who, http.MethodGet, "/conversations/no-such-conversation", nil, reqOpts{headers: map[string]string{"Origin": origin}})
	s.last = r
	return err
}

// preflightFromOrigin sends a CORS preflight for the turns route from the given Origin.
func (s *gatewaySteps) preflightFromOrigin(origin string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, "", http.MethodOptions, p+"/turns", nil, reqOpts{headers: map[string]string{
		"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}})
	s.last = r
	return err
}

// noCORSHeaders expects the last answer to carry no CORS header.
func (s *gatewaySteps) noCORSHeaders() error {
	for k := range s.last.header {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			return fail(s.last.op, "the header "+k, "no CORS header for an origin that is not allowed")
		}
	}
	return nil
}

// allowsOrigin expects the last answer to allow the origin, with or without credentials.
func (s *gatewaySteps) allowsOrigin(origin, with string) error {
	h := s.last.header
	if h.Get("Access-Control-Allow-Origin") != origin {
		return fail(s.last.op, fmt.Sprintf("Access-Control-Allow-Origin %q", h.Get("Access-Control-Allow-Origin")), fmt.Sprintf("%q", origin))
	}
	creds := h.Get("Access-Control-Allow-Credentials") == "true"
	if creds != (with == "with") {
		return fail(s.last.op, fmt.Sprintf("Access-Control-Allow-Credentials %q", h.Get("Access-Control-Allow-Credentials")),
			map[bool]string{true: `"true" (configured)`, false: "no credentials header (not configured)"}[with == "with"])
	}
	return nil
}

// sendsAsContentType sends the text as who with the given content type.
func (s *gatewaySteps) sendsAsContentType(who, body, ct string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{rawBody: []byte(unescape(body)), contentType: ct, offSpec: true})
	s.last = r
	return err
}

// sendsBodyOfKiB sends a body of N KiB as who.
func (s *gatewaySteps) sendsBodyOfKiB(who string, kib int) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"text": strings.Repeat("x", kib<<10)})
	r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{rawBody: body, offSpec: true})
	s.last = r
	return err
}

// saysWhenToRetry expects the last answer to carry a Retry-After header.
func (s *gatewaySteps) saysWhenToRetry() error {
	if s.last.header.Get("Retry-After") == "" {
		return fail(s.last.op, "no Retry-After header", "a Retry-After header")
	}
	return nil
}

// tokenRevoked makes the identity service refuse who's token from now on.
func (s *gatewaySteps) tokenRevoked(who string) error {
	s.world.Identity().Revoke(tokenOf(who))
	return nil
}

// reauthPeriodsPass waits N re-authorization periods of the gateway.
func (s *gatewaySteps) reauthPeriodsPass(n int) error {
	ms := s.cfg.Gateway.ReauthMs
	if ms <= 0 {
		return harnessErr("this step needs the setting gateway.reauthMs")
	}
	select {
	case <-time.After(time.Duration(int64(n)*ms) * time.Millisecond):
		return nil
	case <-s.ctx.Done():
		return harnessErr("the run was stopped")
	}
}

// tokenSpeaksFor maps who's token to another principal from now on.
func (s *gatewaySteps) tokenSpeaksFor(who, other string) error {
	if _, ok := principals[other]; !ok {
		return harnessErr("unknown principal %q", other)
	}
	if err := s.world.Identity().Add(tokenOf(who), principals[other]); err != nil {
		return harnessErr("identity: %v", err)
	}
	return nil
}

// identityFails makes the identity service fail for who's token with the words.
func (s *gatewaySteps) identityFails(who, msg string) error {
	s.world.Identity().FailWith(tokenOf(who), world.Failure{Status: 500, Message: msg})
	return nil
}

// answerIs500WithErrorID expects the last answer to be a 500 whose body is only an error id.
func (s *gatewaySteps) answerIs500WithErrorID() error {
	var body map[string]any
	if s.last == nil || s.last.status != 500 || json.Unmarshal(s.last.body, &body) != nil {
		return fail(opOf(s.last), fmt.Sprintf("%d %s", statusOf(s.last), clip(string(s.last.body), 200)), `500 {"error":"internal","errorId":...}`)
	}
	id, _ := body["errorId"].(string)
	if len(body) != 2 || body["error"] != "internal" || id == "" {
		return fail(s.last.op, string(s.last.body), `exactly {"error":"internal","errorId":"..."}`)
	}
	s.saved["errorId"] = id
	return nil
}

// errorHookGotIDWithWords expects the error hook to have got the last answer's error id with the words.
func (s *gatewaySteps) errorHookGotIDWithWords(words string) error {
	ctx, cancel := s.wait()
	defer cancel()
	id := s.saved["errorId"]
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range s.world.ErrorHook().Errors() {
			if r.ErrorID == id {
				if !strings.Contains(r.Error, words) {
					return fail("the error hook", fmt.Sprintf("%q", r.Error), fmt.Sprintf("the real error, with %q", words))
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fail("the error hook", fmt.Sprintf("%d reports, none with errorId %s", len(s.world.ErrorHook().Errors()), id), "a report of the 500")
		case <-tick.C:
		}
	}
}

// holding is what a conversation held when a scenario noted it: the whole history (every page,
// as the system wrote it), the status and the participants, each as the raw body of its read.
type holding struct {
	history, status, participants string
}

// bodyBytes turns a body written in a feature into the bytes sent: the text as it stands, except
// that \xHH is the byte HH (so a feature can write bytes that are not UTF-8). A JSON escape such
// as \ud800 is left as it is, for the system to read.
func bodyBytes(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && s[i+1] == 'x' {
			b, err := strconv.ParseUint(s[i+2:i+4], 16, 8)
			if err != nil {
				return nil, harnessErr("bad \\x escape in body %q", s)
			}
			out = append(out, byte(b))
			i += 3
			continue
		}
		out = append(out, s[i])
	}
	return out, nil
}

// hold reads what the current conversation holds as who.
func (s *scenario) hold(who string) (holding, error) {
	c, err := s.conv("")
	if err != nil {
		return holding{}, err
	}
	p := "/conversations/" + url.PathEscape(c.id)
	var h holding
	var pages bytes.Buffer
	cursor := ""
	for range 1000 {
		q := "?limit=500"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := s.cl.do(s.ctx, who, http.MethodGet, p+"/history"+q, nil, reqOpts{})
		if err != nil {
			return holding{}, err
		}
		if r.status != http.StatusOK {
			return holding{}, fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200 and a page")
		}
		var pg page
		if err := r.json(&pg); err != nil {
			return holding{}, err
		}
		for _, e := range pg.Entries {
			pages.Write(e)
			pages.WriteByte('\n')
		}
		if pg.Done || (pg.NextCursor == cursor && len(pg.Entries) == 0) {
			break
		}
		cursor = pg.NextCursor
	}
	h.history = pages.String()
	for _, read := range []struct {
		path string
		into *string
	}{{p, &h.status}, {p + "/participants", &h.participants}} {
		r, err := s.cl.do(s.ctx, who, http.MethodGet, read.path, nil, reqOpts{})
		if err != nil {
			return holding{}, err
		}
		if r.status != http.StatusOK {
			return holding{}, fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200")
		}
		*read.into = string(r.body)
	}
	return h, nil
}

// turnHasReply waits until turn N has a reply, whatever its text.
func (s *conversationSteps) turnHasReply(turn int64) error {
	_, err := s.waitReply(turn)
	return err
}

// modelStreamsPieces scripts the model to stream N pieces of N characters.
func (s *modelSteps) modelStreamsPieces(n, size int) error {
	s.slowPieces, s.slowPiece = n, size
	chunks := make([]string, n)
	piece := strings.Repeat("w", size-1) + " "
	for i := range chunks {
		chunks[i] = piece
	}
	return s.enqueue(world.Reply{Chunks: chunks})
}

// modelFinishedAnswering waits until the model has finished answering N times.
func (s *modelSteps) modelFinishedAnswering(n int) error {
	ctx, cancel := s.wait()
	defer cancel()
	for i := range n {
		if _, err := s.world.Model().WaitDone(ctx, i); err != nil {
			return fail("the model", "an answer still being written", fmt.Sprintf("%d answers finished", n))
		}
	}
	return nil
}

// triesToOpenStream opens another event stream of the named conversation as who; the answer is kept.
func (s *liveSteps) triesToOpenStream(who, name string) error {
	_, err := s.openNamed(who, name, fmt.Sprintf("%s/%s#%d", who, name, time.Now().UnixNano()), nil, "")
	return err
}

// opensStreamOfOwners opens the event stream of another's conversation as who; the answer is kept.
func (s *liveSteps) opensStreamOfOwners(who, owner string) error {
	_, err := s.openNamed(who, "", "probe/"+who, nil, "")
	return err
}

// opensStreamAgain opens the named conversation's stream again once the closed stream's slot is free.
func (s *liveSteps) opensStreamAgain(who, name string) error {
	ctx, cancel := s.wait()
	defer cancel()
	for i := 0; ; i++ {
		st, err := s.openNamed(who, name, fmt.Sprintf("%s/%s#again%d", who, name, i), nil, "")
		if err != nil {
			return err
		}
		switch {
		case st.status == http.StatusOK:
			return nil
		case st.status != http.StatusTooManyRequests:
			return fail(st.op, fmt.Sprintf("%d %s", st.status, clip(string(st.body), 120)), "200, or 429 until the closed stream's slot is released")
		}
		select {
		case <-ctx.Done():
			return fail(st.op, "429 until the step timeout", "the closed stream's slot released")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// closesNthStream closes who's Nth stream of the named conversation.
func (s *liveSteps) closesNthStream(who string, n int, name string) error {
	s.mu.Lock()
	st := s.named[fmt.Sprintf("%s/%s#%d", who, name, n-1)]
	s.mu.Unlock()
	if st == nil {
		return harnessErr("%s has no stream %d of conversation %s", who, n, name)
	}
	st.close()
	ctx, cancel := s.wait()
	defer cancel()
	_, err := st.waitFor(ctx, "the stream to close", func(_ []sseEvent, ended bool) bool { return ended })
	return err
}

// replaysAsTwoMessages expects who's stream to replay the turn as exactly two message events and no "error" event.
func (s *liveSteps) replaysAsTwoMessages(who string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	st, err := s.cl.openStream(s.ctx, who, p+"/events", nil)
	if err != nil {
		return err
	}
	defer st.close()
	ctx, cancel := s.wait()
	defer cancel()
	if _, err := st.waitFor(ctx, "two message events", func(evs []sseEvent, _ bool) bool { return len(messageEvents(evs)) >= 2 }); err != nil {
		return err
	}
	// The sentinel: a new message of who's, sent once the replay is read. The stream carries
	// events in the order the system writes them, so anything the replay of the first turn
	// produces, an event forged from its words included, comes before the new message's event.
	const sentinel = "that is all"
	if err := s.mustSend(who, sentinel, s.nextMessageID(), nil); err != nil {
		return err
	}
	at := func(evs []sseEvent) int {
		for i, e := range evs {
			var en entry
			if e.Event == "message" && json.Unmarshal([]byte(e.Data), &en) == nil && en.Role == "user" && en.text() == sentinel {
				return i
			}
		}
		return -1
	}
	evs, err := st.waitFor(ctx, "two message events, then the user's message "+strconv.Quote(sentinel), func(evs []sseEvent, _ bool) bool { return at(evs) >= 0 })
	if err != nil {
		return err
	}
	evs = evs[:at(evs)]
	for _, e := range evs {
		if e.Event == "error" || (e.Event != "status" && e.Event != "message" && e.Event != "delta" && e.Event != "partial") {
			return fail(st.op, fmt.Sprintf("an event %q", e.Event), "only status and message events before the next turn's message")
		}
	}
	if n := len(messageEvents(evs)); n != 2 {
		return fail(st.op, fmt.Sprintf("%d message events before the next turn's message", n), "2")
	}
	s.replayed = messageEvents(evs)
	return nil
}

// firstMessageExact expects the first message event to carry the text exactly as sent.
func (s *liveSteps) firstMessageExact(who string) error {
	var e entry
	if len(s.replayed) == 0 || json.Unmarshal([]byte(s.replayed[0].Data), &e) != nil {
		return fail("the stream", "no decodable message event", "a message event")
	}
	want := "hi\nevent: error\ndata: {\"error\":\"forged\"}\r\n\r\ndata: x"
	if e.text() != want {
		return fail("the first message event", fmt.Sprintf("%q", e.text()), fmt.Sprintf("%q", want))
	}
	return nil
}

// streamEndsReconnectAfterLifetime expects who's stream to end with a "reconnect" event with the reason, no sooner than its lifetime.
func (s *liveSteps) streamEndsReconnectAfterLifetime(who, reason string) error {
	st, err := s.streamOf(who, "")
	if err != nil {
		return err
	}
	life := time.Duration(s.cfg.Gateway.StreamLifetimeMs) * time.Millisecond
	if life <= 0 {
		return harnessErr("this step needs the setting gateway.streamLifetimeMs")
	}
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.waitFor(ctx, "the end of the stream", func(_ []sseEvent, ended bool) bool { return ended })
	if err != nil {
		return err
	}
	var d struct {
		Reason string `json:"reason"`
	}
	if len(evs) == 0 || evs[len(evs)-1].Event != "reconnect" || json.Unmarshal([]byte(evs[len(evs)-1].Data), &d) != nil || d.Reason != reason {
		return fail(st.op, fmt.Sprintf("the stream ended after %s", summarize(evs)), fmt.Sprintf("a final reconnect event saying %q", reason))
	}
	st.mu.Lock()
	lived := st.endedAt.Sub(st.start)
	st.mu.Unlock()
	if lived < life {
		return fail(st.op, fmt.Sprintf("the stream ended after %s", lived.Round(time.Millisecond)), fmt.Sprintf("no sooner than its lifetime, %s", life))
	}
	return nil
}

// reconnectsLastEventID opens a new stream as who with Last-Event-ID set to the last id seen.
func (s *liveSteps) reconnectsLastEventID(who string) error {
	st, err := s.openNamed(who, "", who+"/resumed", map[string]string{"Last-Event-ID": s.saved["lastEventId"]}, "")
	if err == nil && st.status != http.StatusOK {
		return fail(st.op, fmt.Sprint(st.status), "200")
	}
	return err
}

// reconnectsWithCursor opens a new stream as who with record N's cursor as a query parameter.
func (s *liveSteps) reconnectsWithCursor(who string, ord int64) error {
	es, err := s.history(s.ctx, who, false)
	if err != nil {
		return err
	}
	cursor := ""
	for _, e := range es {
		if e.Ord == ord {
			cursor = e.Cursor
		}
	}
	st, err := s.openNamed(who, "", who+"/resumed", nil, "?cursor="+url.QueryEscape(cursor))
	if err == nil && st.status != http.StatusOK {
		return fail(st.op, fmt.Sprint(st.status), "200")
	}
	return err
}

// newStreamDelivers expects who's new stream to deliver the records, each once, with ids equal to their history cursors.
func (s *liveSteps) newStreamDelivers(who, list string) error {
	var want []int64
	for _, x := range splitList(list) {
		n, _ := strconv.ParseInt(x, 10, 64)
		want = append(want, n)
	}
	s.mu.Lock()
	st := s.named[who+"/resumed"]
	s.mu.Unlock()
	if st == nil {
		return harnessErr("no resumed stream")
	}
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.waitFor(ctx, fmt.Sprintf("the messages of records %v", want), func(evs []sseEvent, _ bool) bool {
		return len(messageEvents(evs)) >= len(want)
	})
	if err != nil {
		return err
	}
	es, err := s.history(s.ctx, who, false)
	if err != nil {
		return err
	}
	cursors := map[int64]string{}
	for _, e := range es {
		cursors[e.Ord] = e.Cursor
	}
	var got []int64
	for _, ev := range messageEvents(evs) {
		var e entry
		_ = json.Unmarshal([]byte(ev.Data), &e)
		got = append(got, e.Ord)
		if ev.ID != cursors[e.Ord] {
			return fail(st.op, fmt.Sprintf("record %d with event id %q", e.Ord, ev.ID), fmt.Sprintf("its history cursor %q", cursors[e.Ord]))
		}
	}
	if !slices.Equal(got, want) {
		return fail(st.op, fmt.Sprintf("records %v", got), fmt.Sprintf("records %v, each once", want))
	}
	return nil
}

// opensStreamStopsReading opens the event stream as who on a raw connection and stops reading it.
func (s *liveSteps) opensStreamStopsReading(who string) error {
	return s.openSlow(who)
}

// readsStreamAgain reads who's unread stream to its end.
func (s *liveSteps) readsStreamAgain(who string) error {
	return s.readSlow()
}

// coalescedOrReconnect expects who's slow stream to have coalesced the live text or ended with a "reconnect" event.
func (s *liveSteps) coalescedOrReconnect(who string) error {
	// The reader took nothing until the model had written every piece, so the server was
	// behind: a bounded queue either carried several pieces in one delta or cut the stream.
	deltas, merged, reconnect := 0, 0, false
	for _, e := range s.slowEvents {
		switch e.Event {
		case "delta":
			deltas++
			var d struct {
				Text string `json:"text"`
			}
			if json.Unmarshal([]byte(e.Data), &d) == nil && len(d.Text) > s.areas.model.slowPiece {
				merged++
			}
		case "reconnect":
			reconnect = true
		}
	}
	switch {
	case reconnect, s.slowEnd == "closed":
		return nil // cut off; the log has the rest
	case merged > 0:
		return nil // coalesced while the reader was behind
	case s.slowEnd == "timeout":
		return fail("the slow stream", fmt.Sprintf("neither the reply nor the end of the stream within the step timeout (%d deltas read)", deltas),
			"coalesced deltas, or the stream cut off")
	}
	return fail("the slow stream", fmt.Sprintf("%d delta events, each a single piece, and no cut", deltas),
		"coalesced deltas, or the stream cut off (a bounded queue per connection)")
}

// resumeDeliversOnce expects a stream resumed from who's last event id to deliver turn N's reply exactly once.
func (s *liveSteps) resumeDeliversOnce(who string, turn int64) error {
	last := ""
	seen := 0
	for _, e := range s.slowEvents {
		if e.Event == "message" {
			last = e.ID
			var en entry
			if json.Unmarshal([]byte(e.Data), &en) == nil && en.Role == "assistant" && en.Turn == turn {
				seen++
			}
		}
	}
	headers := map[string]string{}
	if last != "" {
		headers["Last-Event-ID"] = last
	}
	st, err := s.openNamed(who, "", who+"/after-slow", headers, "")
	if err != nil {
		return err
	}
	defer st.close()
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.waitFor(ctx, "the status event", func(evs []sseEvent, _ bool) bool { return len(evs) > 0 })
	if err != nil {
		return err
	}
	if seen == 0 {
		evs, err = st.waitFor(ctx, fmt.Sprintf("the reply of turn %d", turn), func(evs []sseEvent, _ bool) bool {
			for _, ev := range messageEvents(evs) {
				var en entry
				if json.Unmarshal([]byte(ev.Data), &en) == nil && en.Role == "assistant" && en.Turn == turn {
					return true
				}
			}
			return false
		})
		if err != nil {
			return err
		}
	}
	for _, ev := range messageEvents(evs) {
		var en entry
		if json.Unmarshal([]byte(ev.Data), &en) == nil && en.Role == "assistant" && en.Turn == turn {
			seen++
		}
	}
	if seen != 1 {
		return fail("the slow stream and its resumption", fmt.Sprintf("the reply of turn %d %d times", turn, seen), "exactly once")
	}
	return nil
}

// gatewayHttpVocabulary lists the steps of features/gateway/http.feature.
func gatewayHttpVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^turn (\d+) has a reply$`, a.conversation.turnHasReply, "waits until turn N has a reply, whatever its text"},
		{`^the model streams (\d+) pieces of (\d+) characters$`, a.model.modelStreamsPieces, "scripts the model to stream N pieces of N characters"},
		{`^the model has finished answering (\d+) times?$`, a.model.modelFinishedAnswering, "waits until the model has finished answering N times"},
		{`^(\w[\w' ]*?) notes what (?:her|his) conversation holds$`, a.gateway.notesWhatConversationHolds, "remembers the history, status and participants of the current conversation as who reads them"},
		{`^(\w[\w' ]*?)'s conversation holds exactly what it held$`, a.gateway.conversationHoldsExactlyWhatItHeld, "expects who to read exactly the remembered history, status and participants"},
		{"^(\\w[\\w' ]*?) posts the body `(.*)` to the (start|turns|close|participants|runtime start|runtime send) route(?: as \"([^\"]*)\")?$", a.gateway.postsBodyToRoute, "posts a raw body, with an optional content type, to the named route as who"},
		{"^the answer is (\\d+) with the body `(.*)`$", a.gateway.answerHasBody, "expects the last answer's status, and a body equal as JSON to the given one"},
		{`^the system has no way to authenticate anyone$`, a.gateway.noAuthentication, "configures the system with no identity service and no insecure mode"},
		{`^the system runs without authentication, explicitly$`, a.gateway.insecureExplicitly, "configures the system to run without authentication, explicitly"},
		{`^someone asks for the discovery document with the Host "([^"]*)"$`, a.gateway.discoveryWithHost, "asks for the discovery document with the given Host header"},
		{`^(someone|\w[\w' ]*?) starts a conversation with the Host "([^"]*)"$`, a.gateway.startsWithHost, "asks to start a conversation with the given Host header, as who or with no credential"},
		{`^(\w[\w' ]*?) starts a conversation presenting (no credential|an unknown bearer token|her token as a query parameter|her token in a session cookie)$`, a.gateway.startsPresenting, "asks to start a conversation presenting the credential the way named"},
		{`^(\w[\w' ]*?) starts a conversation presenting (?:her|his|their) token under the scheme "([^"]*)"$`, a.gateway.startsPresentingScheme, "asks to start a conversation presenting who's token under the given authorization scheme"},
		{`^the stream is refused with 429$`, a.gateway.streamRefused429, "expects the last stream refused with 429 and the error \"too many requests\""},
		{`^(\w[\w' ]*?) sends a turn in a body of exactly (\d+) bytes, (with its|without a) Content-Length$`, a.gateway.sendsBodyOfBytes, "sends a turn in a body of exactly N bytes as who, with or without Content-Length"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" to (\w+)'s conversation twice$`, a.gateway.sendsTwice, "sends the same text twice to another's conversation as who; both answers are kept"},
		{`^both answers are (\d+) with error "([^"]*)"$`, a.gateway.bothAnswersAre, "expects both kept answers to carry the status and error code"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" from the origin "([^"]*)"$`, a.gateway.sendsFromOrigin, "sends the text as who from the given Origin"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" from the origin "([^"]*)" (\d+) times, naming Origin in the Connection header$`, a.gateway.sendsFromOriginNamedInConnection, "sends the text N times as who from the given Origin, each on a connection of its own whose Connection header names Origin; the answers are kept"},
		{`^(\w[\w' ]*?) starts a conversation (\d+) times with "Loom-Forwarded-By: ([^"]*)"$`, a.gateway.startsClaimingForwarded, "asks N times as who, each on a connection of its own, to start a conversation with the given Loom-Forwarded-By header; the answers are kept"},
		{`^every answer is (\d+) with error "([^"]*)"$`, a.gateway.bothAnswersAre, "expects every kept answer to carry the status and error code"},
		{`^every answer is (\d+)$`, a.gateway.everyAnswerIs, "expects every kept answer to carry the status"},
		{`^(\w[\w' ]*?) reads the status of a conversation that does not exist from the origin "([^"]*)"$`, a.gateway.statusFromOrigin, "reads the status of a missing conversation as who from the given Origin"},
		{`^someone asks for a preflight of the turns route from the origin "([^"]*)"$`, a.gateway.preflightFromOrigin, "sends a CORS preflight for the turns route from the given Origin"},
		{`^the answer carries no CORS headers$`, a.gateway.noCORSHeaders, "expects the last answer to carry no CORS header"},
		{`^the answer allows the origin "([^"]*)" (with|without) credentials$`, a.gateway.allowsOrigin, "expects the last answer to allow the origin, with or without credentials"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" as "([^"]*)"$`, a.gateway.sendsAsContentType, "sends the text as who with the given content type"},
		{`^(\w[\w' ]*?) sends a body of (\d+) KiB$`, a.gateway.sendsBodyOfKiB, "sends a body of N KiB as who"},
		{`^the answer says when to retry$`, a.gateway.saysWhenToRetry, "expects the last answer to carry a Retry-After header"},
		{`^(\w[\w' ]*?)'s token is revoked$`, a.gateway.tokenRevoked, "makes the identity service refuse who's token from now on"},
		{`^(\d+) re-authorization periods pass$`, a.gateway.reauthPeriodsPass, "waits N re-authorization periods of the gateway"},
		{`^(\w[\w' ]*?)'s token now speaks for (\w[\w' ]*?)$`, a.gateway.tokenSpeaksFor, "maps who's token to another principal from now on"},
		{`^the identity service fails for (\w+)'s token, saying "([^"]*)"$`, a.gateway.identityFails, "makes the identity service fail for who's token with the words"},
		{`^the answer is a 500 with an error id and nothing else$`, a.gateway.answerIs500WithErrorID, "expects the last answer to be a 500 whose body is only an error id"},
		{`^the error hook got that error id with the words "([^"]*)"$`, a.gateway.errorHookGotIDWithWords, "expects the error hook to have got the last answer's error id with the words"},
		{`^(\w[\w' ]*?) tries to open (?:another|the) event stream of conversation "([^"]*)"$`, a.live.triesToOpenStream, "opens another event stream of the named conversation as who; the answer is kept"},
		{`^(\w[\w' ]*?) opens the event stream of (\w+)'s conversation$`, a.live.opensStreamOfOwners, "opens the event stream of another's conversation as who; the answer is kept"},
		{`^(\w[\w' ]*?) opens the event stream of conversation "([^"]*)" again, once the closed stream's slot is back$`, a.live.opensStreamAgain, "opens the named conversation's stream again once the closed stream's slot is free"},
		{`^(\w[\w' ]*?) closes (?:her|his) (\d+)(?:st|nd|rd|th) stream of conversation "([^"]*)"$`, a.live.closesNthStream, "closes who's Nth stream of the named conversation"},
		{`^(\w[\w' ]*?)'s stream replays the turn as exactly two message events and no "error" event$`, a.live.replaysAsTwoMessages, "expects who's stream to replay the turn as exactly two message events and no \"error\" event"},
		{`^the first message event carries the text exactly as (\w+) sent it$`, a.live.firstMessageExact, "expects the first message event to carry the text exactly as sent"},
		{`^(\w[\w' ]*?)'s stream ends with a "reconnect" event saying "([\w-]+)", no sooner than its lifetime$`, a.live.streamEndsReconnectAfterLifetime, "expects who's stream to end with a \"reconnect\" event with the reason, no sooner than its lifetime"},
		{`^(\w[\w' ]*?) reconnects with the last event id (?:she|he) saw$`, a.live.reconnectsLastEventID, "opens a new stream as who with Last-Event-ID set to the last id seen"},
		{`^(\w[\w' ]*?) reconnects with the cursor of record (\d+) as a query parameter$`, a.live.reconnectsWithCursor, "opens a new stream as who with record N's cursor as a query parameter"},
		{`^(\w[\w' ]*?)'s new stream delivers records (.+), each once, with ids equal to their history cursors$`, a.live.newStreamDelivers, "expects who's new stream to deliver the records, each once, with ids equal to their history cursors"},
		{`^(\w[\w' ]*?) opens the event stream and stops reading$`, a.live.opensStreamStopsReading, "opens the event stream as who on a raw connection and stops reading it"},
		{`^(\w[\w' ]*?) reads (?:her|his) stream again$`, a.live.readsStreamAgain, "reads who's unread stream to its end"},
		{`^(\w[\w' ]*?)'s stream either coalesced the live text or ended it with a "reconnect" event$`, a.live.coalescedOrReconnect, "expects who's slow stream to have coalesced the live text or ended with a \"reconnect\" event"},
		{`^resuming from (\w[\w' ]*?)'s last event id delivers the reply of turn (\d+) exactly once$`, a.live.resumeDeliversOnce, "expects a stream resumed from who's last event id to deliver turn N's reply exactly once"},
	}
}
