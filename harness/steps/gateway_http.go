package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, path, nil, reqOpts{RawBody: raw, ContentType: ct, OffSpec: true})
	s.last = r
	if err != nil {
		return err
	}
	if (route == "runtime start" || route == "runtime send") && !s.run.Door {
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
	if s.last.Status != code || json.Unmarshal(s.last.Body, &g) != nil || !reflect.DeepEqual(g, w) {
		return fail(s.last.Op, fmt.Sprintf("%d %s", s.last.Status, clip(string(s.last.Body), 300)), fmt.Sprintf("%d %s", code, want))
	}
	return nil
}

// noAuthentication configures the system with no identity service and no insecure mode.
func (s *gatewaySteps) noAuthentication() error {
	return s.configure(func(c *sutconfig.SUTConfig) {
		c.Identity = sutconfig.IdentityConfig{}
	})
}

// insecureExplicitly configures the system to run without authentication, explicitly.
func (s *gatewaySteps) insecureExplicitly() error {
	return s.configure(func(c *sutconfig.SUTConfig) {
		c.Identity = sutconfig.IdentityConfig{Insecure: true}
	})
}

// discoveryWithHost asks for the discovery document with the given Host header.
func (s *gatewaySteps) discoveryWithHost(host string) error {
	if err := s.sut(); err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, "", http.MethodGet, "/.well-known/loom", nil, reqOpts{Host: host})
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations", map[string]any{}, reqOpts{Host: host})
	s.last = r
	return err
}

// startsPresenting asks to start a conversation presenting the credential the way named.
func (s *gatewaySteps) startsPresenting(who, how string) error {
	if err := s.sut(); err != nil {
		return err
	}
	o := reqOpts{Headers: map[string]string{}}
	path := "/conversations"
	switch how {
	case "an unknown bearer token":
		o.Headers["Authorization"] = "Bearer tok-nobody-knows"
	case "her token as a query parameter":
		path += "?access_token=" + url.QueryEscape(tokenOf(who))
		o.OffSpec = true
	case "her token in a session cookie":
		o.Headers["Cookie"] = "session=" + tokenOf(who)
	}
	r, err := s.cl.Do(s.ctx, "", http.MethodPost, path, map[string]any{}, o)
	s.last = r
	return err
}

// startsPresentingScheme asks to start a conversation presenting who's token under the given authorization scheme.
func (s *gatewaySteps) startsPresentingScheme(who, scheme string) error {
	if err := s.sut(); err != nil {
		return err
	}
	o := reqOpts{Headers: map[string]string{"Authorization": scheme + " " + tokenOf(who)}}
	r, err := s.cl.Do(s.ctx, "", http.MethodPost, "/conversations", map[string]any{}, o)
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
	_ = json.Unmarshal(st.Body, &body)
	if st.Status != http.StatusTooManyRequests || body.Error != "too many requests" {
		return fail(st.Op, fmt.Sprintf("%d %s", st.Status, clip(string(st.Body), 120)), `429 {"error":"too many requests"}: the limit is reached`)
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{RawBody: body, OffSpec: true, Chunked: how == "without a"})
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
		r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/turns", map[string]any{"text": unescape(text), "messageId": fmt.Sprintf("probe-%d", i)}, reqOpts{})
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
		_ = json.Unmarshal(r.Body, &body)
		if r.Status != code || body.Error != e {
			return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 100)), fmt.Sprintf("%d %q", code, e))
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/turns", map[string]any{"text": unescape(text), "messageId": s.nextMessageID()},
		reqOpts{Headers: map[string]string{"Origin": origin}})
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
		r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/turns", map[string]any{"text": unescape(text), "messageId": s.nextMessageID()},
			reqOpts{Headers: map[string]string{"Origin": origin, "Connection": "Origin, close"}})
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
		r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations", map[string]any{},
			reqOpts{Headers: map[string]string{"Loom-Forwarded-By": by, "Connection": "close"}})
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
		if r.Status != code {
			return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 100)), fmt.Sprint(code))
		}
	}
	return nil
}

// statusFromOrigin reads the status of a missing conversation as who from the given Origin.
func (s *gatewaySteps) statusFromOrigin(who, origin string) error {
	if err := s.sut(); err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodGet, "/conversations/no-such-conversation", nil, reqOpts{Headers: map[string]string{"Origin": origin}})
	s.last = r
	return err
}

// preflightFromOrigin sends a CORS preflight for the turns route from the given Origin.
func (s *gatewaySteps) preflightFromOrigin(origin string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, "", http.MethodOptions, p+"/turns", nil, reqOpts{Headers: map[string]string{
		"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}})
	s.last = r
	return err
}

// noCORSHeaders expects the last answer to carry no CORS header.
func (s *gatewaySteps) noCORSHeaders() error {
	for k := range s.last.Header {
		if strings.HasPrefix(strings.ToLower(k), "access-control-") {
			return fail(s.last.Op, "the header "+k, "no CORS header for an origin that is not allowed")
		}
	}
	return nil
}

// allowsOrigin expects the last answer to allow the origin, with or without credentials.
func (s *gatewaySteps) allowsOrigin(origin, with string) error {
	h := s.last.Header
	if h.Get("Access-Control-Allow-Origin") != origin {
		return fail(s.last.Op, fmt.Sprintf("Access-Control-Allow-Origin %q", h.Get("Access-Control-Allow-Origin")), fmt.Sprintf("%q", origin))
	}
	creds := h.Get("Access-Control-Allow-Credentials") == "true"
	if creds != (with == "with") {
		return fail(s.last.Op, fmt.Sprintf("Access-Control-Allow-Credentials %q", h.Get("Access-Control-Allow-Credentials")),
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{RawBody: []byte(unescape(body)), ContentType: ct, OffSpec: true})
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{RawBody: body, OffSpec: true})
	s.last = r
	return err
}

// saysWhenToRetry expects the last answer to carry a Retry-After header.
func (s *gatewaySteps) saysWhenToRetry() error {
	if s.last.Header.Get("Retry-After") == "" {
		return fail(s.last.Op, "no Retry-After header", "a Retry-After header")
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
	if s.last == nil || s.last.Status != 500 || json.Unmarshal(s.last.Body, &body) != nil {
		return fail(opOf(s.last), fmt.Sprintf("%d %s", statusOf(s.last), clip(string(s.last.Body), 200)), `500 {"error":"internal","errorId":...}`)
	}
	id, _ := body["errorId"].(string)
	if len(body) != 2 || body["error"] != "internal" || id == "" {
		return fail(s.last.Op, string(s.last.Body), `exactly {"error":"internal","errorId":"..."}`)
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

// gatewayHTTPVocabulary lists the steps of features/gateway/http.feature.
func gatewayHTTPVocabulary(a areas) []stepDef {
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
	}
}
