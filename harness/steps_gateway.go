package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

// streamResponse turns a refused stream into a response for "the answer is ..." steps.
func streamResponse(st *stream) *response {
	return &response{op: st.op, status: st.status, header: st.header, body: st.body}
}

func (s *scenario) convPath(name string) (string, *conv, error) {
	c, err := s.conv(name)
	if err != nil {
		return "", nil, err
	}
	return "/conversations/" + url.PathEscape(c.id), c, nil
}

// openNamed opens a stream of a conversation as who and files it under key.
func (s *scenario) openNamed(who, convName, key string, headers map[string]string, query string) (*stream, error) {
	p, _, err := s.convPath(convName)
	if err != nil {
		return nil, err
	}
	st, err := s.cl.openStream(s.ctx, who, p+"/events"+query, headers)
	if err != nil {
		return st, err
	}
	s.mu.Lock()
	if st.status == http.StatusOK {
		s.named[key] = st
	}
	s.lastStream = st
	s.mu.Unlock()
	s.last = streamResponse(st)
	return st, nil
}

// streamFor finds the stream filed for conversation name (by any principal).
func (s *scenario) streamFor(convName string) (*stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range sortedKeys(s.named) {
		if strings.HasSuffix(k, "/"+convName) {
			return s.named[k], nil
		}
	}
	return nil, harnessErr("no stream of conversation %q is open", convName)
}

func messageEvents(evs []sseEvent) []sseEvent {
	var out []sseEvent
	for _, e := range evs {
		if e.Event == "message" {
			out = append(out, e)
		}
	}
	return out
}

func (s *scenario) waitLive(st *stream, want string) error {
	ctx, cancel := s.wait()
	defer cancel()
	_, err := st.waitFor(ctx, fmt.Sprintf("live text %q", want), func(evs []sseEvent, _ bool) bool {
		return strings.Contains(liveText(evs), want)
	})
	return err
}

func (s *scenario) registerGateway(sc *godog.ScenarioContext) {
	sc.Step(`^the system has no way to authenticate anyone$`, func() error {
		return s.configure(func(c *spec.SUTConfig) {
			c.Identity = spec.IdentityConfig{}
		})
	})
	sc.Step(`^the system runs without authentication, explicitly$`, func() error {
		return s.configure(func(c *spec.SUTConfig) {
			c.Identity = spec.IdentityConfig{Insecure: true}
		})
	})
	sc.Step(`^someone asks for the discovery document with the Host "([^"]*)"$`, func(host string) error {
		if err := s.sut(); err != nil {
			return err
		}
		r, err := s.cl.do(s.ctx, "", http.MethodGet, "/.well-known/loom", nil, reqOpts{host: host})
		s.last = r
		return err
	})
	sc.Step(`^(someone|\w[\w' ]*?) starts a conversation with the Host "([^"]*)"$`, func(who, host string) error {
		if err := s.sut(); err != nil {
			return err
		}
		if who == "someone" {
			who = ""
		}
		r, err := s.cl.do(s.ctx, who, http.MethodPost, "/conversations", map[string]any{}, reqOpts{host: host})
		s.last = r
		return err
	})
	sc.Step(`^(\w[\w' ]*?) starts a conversation presenting (no credential|an unknown bearer token|her token as a query parameter|her token in a session cookie)$`, func(who, how string) error {
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
	})
	// The scheme exactly as written, then one space and the token (RFC 9110 §11.1: the scheme is
	// case-insensitive).
	sc.Step(`^(\w[\w' ]*?) starts a conversation presenting (?:her|his|their) token under the scheme "([^"]*)"$`, func(who, scheme string) error {
		if err := s.sut(); err != nil {
			return err
		}
		o := reqOpts{headers: map[string]string{"Authorization": scheme + " " + tokenOf(who)}}
		r, err := s.cl.do(s.ctx, "", http.MethodPost, "/conversations", map[string]any{}, o)
		s.last = r
		return err
	})
	sc.Step(`^(\w[\w' ]*?) opens the event stream$`, func(who string) error {
		_, err := s.streamOf(who, "")
		return err
	})
	sc.Step(`^(\w[\w' ]*?) opens the event stream of conversation "([^"]*)"$`, func(who, name string) error {
		st, err := s.openNamed(who, name, who+"/"+name, nil, "")
		if err != nil {
			return err
		}
		if st.status != http.StatusOK {
			return fail(st.op, fmt.Sprintf("%d %s", st.status, clip(string(st.body), 120)), "200 and an event stream")
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) tries to open (?:another|the) event stream of conversation "([^"]*)"$`, func(who, name string) error {
		_, err := s.openNamed(who, name, fmt.Sprintf("%s/%s#%d", who, name, time.Now().UnixNano()), nil, "")
		return err
	})
	sc.Step(`^(\w[\w' ]*?) opens the event stream of (\w+)'s conversation$`, func(who, owner string) error {
		_, err := s.openNamed(who, "", "probe/"+who, nil, "")
		return err
	})
	sc.Step(`^the stream is refused with 429$`, func() error {
		st := s.lastStream
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
	})
	sc.Step(`^(\w[\w' ]*?) reads a page of the history with limit (-?\d+)$`, func(who string, n int) error {
		p, _, err := s.convPath("")
		if err != nil {
			return err
		}
		r, err := s.cl.do(s.ctx, who, http.MethodGet, fmt.Sprintf("%s/history?limit=%d", p, n), nil, reqOpts{offSpec: n < 1 || n > 500})
		s.last = r
		return err
	})
	sc.Step(`^the page holds (\d+) records?$`, func(n int) error {
		if s.last == nil || s.last.status != http.StatusOK {
			return fail(opOf(s.last), fmt.Sprintf("%d %s", statusOf(s.last), clip(string(s.last.body), 160)), "200 and a page")
		}
		var pg page
		if err := s.last.json(&pg); err != nil {
			return err
		}
		if len(pg.Entries) != n {
			return fail(s.last.op, fmt.Sprintf("a page of %d records", len(pg.Entries)), fmt.Sprintf("%d", n))
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) opens the event stream of conversation "([^"]*)" again, once the closed stream's slot is back$`, func(who, name string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) closes (?:her|his) (\d+)(?:st|nd|rd|th) stream of conversation "([^"]*)"$`, func(who string, n int, name string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) opens (\d+) event streams of conversation "([^"]*)"$`, func(who string, n int, name string) error {
		for i := range n {
			st, err := s.openNamed(who, name, fmt.Sprintf("%s/%s#%d", who, name, i), nil, "")
			if err != nil {
				return err
			}
			if st.status != http.StatusOK {
				return fail(st.op, fmt.Sprintf("stream %d of %d: %d %s", i+1, n, st.status, clip(string(st.body), 120)), "200 and an event stream: within the limit")
			}
		}
		return nil
	})
	sc.Step(`^each of (\w[\w' ]*?)'s streams of conversation "([^"]*)" ends right after a "closed" event$`, func(who, name string) error {
		s.mu.Lock()
		var sts []*stream
		for _, k := range sortedKeys(s.named) {
			if strings.HasPrefix(k, who+"/"+name+"#") {
				sts = append(sts, s.named[k])
			}
		}
		s.mu.Unlock()
		if len(sts) == 0 {
			return harnessErr("%s has no streams of conversation %s", who, name)
		}
		ctx, cancel := s.wait()
		defer cancel()
		for _, st := range sts {
			evs, err := st.waitFor(ctx, "the end of the stream after the closed event", func(_ []sseEvent, ended bool) bool { return ended })
			if err != nil {
				return err
			}
			if len(evs) == 0 || evs[len(evs)-1].Event != "closed" {
				return fail(st.op, "the stream ended after "+summarize(evs), `a final "closed" event`)
			}
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) sends (\d+) messages?, each accepted$`, func(who string, n int) error {
		for i := range n {
			if err := s.mustSend(who, fmt.Sprintf("message %d of %d", i+1, n), s.nextMessageID(), nil); err != nil {
				return err
			}
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) sends a turn in a body of exactly (\d+) bytes, (with its|without a) Content-Length$`, func(who string, size int, how string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" to (\w+)'s conversation twice$`, func(who, text, owner string) error {
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
	})
	sc.Step(`^both answers are (\d+) with error "([^"]*)"$`, func(code int, e string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" from the origin "([^"]*)"$`, func(who, text, origin string) error {
		p, _, err := s.convPath("")
		if err != nil {
			return err
		}
		r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", map[string]any{"text": unescape(text), "messageId": s.nextMessageID()},
			reqOpts{headers: map[string]string{"Origin": origin}})
		s.last = r
		return err
	})
	sc.Step(`^(\w[\w' ]*?) reads the status of a conversation that does not exist from the origin "([^"]*)"$`, func(who, origin string) error {
		if err := s.sut(); err != nil {
			return err
		}
		r, err := s.cl.do(s.ctx, who, http.MethodGet, "/conversations/no-such-conversation", nil, reqOpts{headers: map[string]string{"Origin": origin}})
		s.last = r
		return err
	})
	sc.Step(`^someone asks for a preflight of the turns route from the origin "([^"]*)"$`, func(origin string) error {
		p, _, err := s.convPath("")
		if err != nil {
			return err
		}
		r, err := s.cl.do(s.ctx, "", http.MethodOptions, p+"/turns", nil, reqOpts{headers: map[string]string{
			"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}})
		s.last = r
		return err
	})
	sc.Step(`^the answer carries no CORS headers$`, func() error {
		for k := range s.last.header {
			if strings.HasPrefix(strings.ToLower(k), "access-control-") {
				return fail(s.last.op, "the header "+k, "no CORS header for an origin that is not allowed")
			}
		}
		return nil
	})
	sc.Step(`^the answer allows the origin "([^"]*)" (with|without) credentials$`, func(origin, with string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" as "([^"]*)"$`, func(who, body, ct string) error {
		p, _, err := s.convPath("")
		if err != nil {
			return err
		}
		r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{rawBody: []byte(unescape(body)), contentType: ct, offSpec: true})
		s.last = r
		return err
	})
	sc.Step(`^(\w[\w' ]*?) sends a body of (\d+) KiB$`, func(who string, kib int) error {
		p, _, err := s.convPath("")
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]any{"text": strings.Repeat("x", kib<<10)})
		r, err := s.cl.do(s.ctx, who, http.MethodPost, p+"/turns", nil, reqOpts{rawBody: body, offSpec: true})
		s.last = r
		return err
	})
	sc.Step(`^(\w[\w' ]*?)'s stream replays the turn as exactly two message events and no "error" event$`, func(who string) error {
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
	})
	sc.Step(`^the first message event carries the text exactly as (\w+) sent it$`, func(who string) error {
		var e entry
		if len(s.replayed) == 0 || json.Unmarshal([]byte(s.replayed[0].Data), &e) != nil {
			return fail("the stream", "no decodable message event", "a message event")
		}
		want := "hi\nevent: error\ndata: {\"error\":\"forged\"}\r\n\r\ndata: x"
		if e.text() != want {
			return fail("the first message event", fmt.Sprintf("%q", e.text()), fmt.Sprintf("%q", want))
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?)'s stream ends with a "(\w+)" event$`, func(who, event string) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		evs, err := st.waitFor(ctx, "the end of the stream", func(_ []sseEvent, ended bool) bool { return ended })
		if err != nil {
			return err
		}
		if len(evs) == 0 || evs[len(evs)-1].Event != event {
			return fail(st.op, fmt.Sprintf("the stream ended after %s", summarize(evs)), fmt.Sprintf("a final %q event", event))
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?)'s stream ends with a "reconnect" event saying "([\w-]+)", no sooner than its lifetime$`, func(who, reason string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) tries to send "((?:[^"\\]|\\.)*)"$`, func(who, text string) error {
		_, err := s.send(who, unescape(text), s.nextMessageID(), nil)
		return err
	})
	sc.Step(`^the answer says when to retry$`, func() error {
		if s.last.header.Get("Retry-After") == "" {
			return fail(s.last.op, "no Retry-After header", "a Retry-After header")
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?)'s token is revoked$`, func(who string) error {
		s.world.Identity().Revoke(tokenOf(who))
		return nil
	})
	sc.Step(`^(\d+) re-authorization periods pass$`, func(n int) error {
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
	})
	sc.Step(`^(\w[\w' ]*?)'s token now speaks for (\w[\w' ]*?)$`, func(who, other string) error {
		if _, ok := principals[other]; !ok {
			return harnessErr("unknown principal %q", other)
		}
		if err := s.world.Identity().Add(tokenOf(who), principals[other]); err != nil {
			return harnessErr("identity: %v", err)
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?)'s stream ends$`, func(who string) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		_, err = st.waitFor(ctx, "the stream to end", func(_ []sseEvent, ended bool) bool { return ended })
		return err
	})
	sc.Step(`^the identity service fails for (\w+)'s token, saying "([^"]*)"$`, func(who, msg string) error {
		s.world.Identity().FailWith(tokenOf(who), world.Failure{Status: 500, Message: msg})
		return nil
	})
	sc.Step(`^the answer is a 500 with an error id and nothing else$`, func() error {
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
	})
	sc.Step(`^the error hook got that error id with the words "([^"]*)"$`, func(words string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?)'s stream has delivered (\d+) messages$`, func(who string, n int) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		_, err = st.waitFor(ctx, fmt.Sprintf("%d message events", n), func(evs []sseEvent, _ bool) bool { return len(messageEvents(evs)) >= n })
		return err
	})
	sc.Step(`^(\w[\w' ]*?) closes (?:her|his) stream$`, func(who string) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		evs, _ := st.snapshot()
		for _, e := range messageEvents(evs) {
			s.saved["lastEventId"] = e.ID
		}
		st.close()
		s.mu.Lock()
		delete(s.named, who+"/")
		s.mu.Unlock()
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) reconnects with the last event id (?:she|he) saw$`, func(who string) error {
		st, err := s.openNamed(who, "", who+"/resumed", map[string]string{"Last-Event-ID": s.saved["lastEventId"]}, "")
		if err == nil && st.status != http.StatusOK {
			return fail(st.op, fmt.Sprint(st.status), "200")
		}
		return err
	})
	sc.Step(`^(\w[\w' ]*?) reconnects with the cursor of record (\d+) as a query parameter$`, func(who string, ord int64) error {
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
	})
	sc.Step(`^(\w[\w' ]*?)'s new stream delivers records (.+), each once, with ids equal to their history cursors$`, func(who, list string) error {
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
	})
	sc.Step(`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" to conversation "([^"]*)"$`, func(who, text, name string) error {
		c, err := s.conv(name)
		if err != nil {
			return err
		}
		keep := s.current
		s.current = c
		defer func() { s.current = keep }()
		return s.mustSend(who, unescape(text), s.nextMessageID(), nil)
	})
	sc.Step(`^the stream of conversation "([^"]*)" shows "((?:[^"\\]|\\.)*)"$`, func(name, text string) error {
		st, err := s.streamFor(name)
		if err != nil {
			return err
		}
		return s.waitLive(st, unescape(text))
	})
	sc.Step(`^the model has streamed its first words$`, func() error {
		if len(s.holds) == 0 {
			return harnessErr("the model was not scripted to wait")
		}
		ctx, cancel := s.wait()
		defer cancel()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, h := range s.holds {
				if h.Reached() {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fail("the model", "no words streamed", "the scripted words streamed to the system")
			case <-tick.C:
			}
		}
	})
	sc.Step(`^(\w[\w' ]*?)'s stream shows a partial "((?:[^"\\]|\\.)*)" for turn (\d+)$`, func(who, text string, turn int64) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		_, err = st.waitFor(ctx, fmt.Sprintf("a partial event for turn %d, then live text up to %q", turn, text), func(evs []sseEvent, _ bool) bool {
			seen := false
			for _, e := range evs {
				var d struct {
					Turn int64 `json:"turn"`
				}
				if e.Event == "partial" && json.Unmarshal([]byte(e.Data), &d) == nil && d.Turn == turn {
					seen = true
				}
			}
			return seen && liveText(evs) == unescape(text)
		})
		return err
	})
	sc.Step(`^(\w[\w' ]*?)'s stream delivers the reply of turn (\d+) with the text "((?:[^"\\]|\\.)*)"$`, func(who string, turn int64, text string) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		_, err = st.waitFor(ctx, fmt.Sprintf("the reply of turn %d", turn), func(evs []sseEvent, _ bool) bool {
			for _, ev := range messageEvents(evs) {
				var e entry
				if json.Unmarshal([]byte(ev.Data), &e) == nil && e.Role == "assistant" && e.Turn == turn && e.text() == unescape(text) {
					return true
				}
			}
			return false
		})
		return err
	})
	sc.Step(`^(\w[\w' ]*?)'s stream shows a reset of turn (\d+) before its partial$`, func(who string, turn int64) error {
		st, err := s.streamOf(who, "")
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		evs, err := st.waitFor(ctx, "a reset event", func(evs []sseEvent, _ bool) bool {
			for _, e := range evs {
				if e.Event == "reset" {
					return true
				}
			}
			return false
		})
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Event == "partial" || e.Event == "delta" {
				return fail(st.op, "a "+e.Event+" before the reset", "the reset first")
			}
			if e.Event == "reset" {
				var d struct {
					Turn int64 `json:"turn"`
				}
				_ = json.Unmarshal([]byte(e.Data), &d)
				if d.Turn != turn {
					return fail(st.op, fmt.Sprintf("a reset of turn %d", d.Turn), fmt.Sprintf("turn %d", turn))
				}
				return nil
			}
		}
		return nil
	})
	sc.Step(`^the model streams (\d+) pieces of (\d+) characters$`, func(n, size int) error {
		s.slowPieces, s.slowPiece = n, size
		chunks := make([]string, n)
		piece := strings.Repeat("w", size-1) + " "
		for i := range chunks {
			chunks[i] = piece
		}
		return s.enqueue(world.Reply{Chunks: chunks})
	})
	sc.Step(`^the model has finished answering (\d+) times?$`, func(n int) error {
		ctx, cancel := s.wait()
		defer cancel()
		for i := range n {
			if _, err := s.world.Model().WaitDone(ctx, i); err != nil {
				return fail("the model", "an answer still being written", fmt.Sprintf("%d answers finished", n))
			}
		}
		return nil
	})
	sc.Step(`^turn (\d+) has a reply$`, func(turn int64) error {
		_, err := s.waitReply(turn)
		return err
	})
	sc.Step(`^(\w[\w' ]*?) opens the event stream and stops reading$`, func(who string) error {
		return s.openSlow(who)
	})
	sc.Step(`^(\w[\w' ]*?) reads (?:her|his) stream again$`, func(who string) error {
		return s.readSlow()
	})
	sc.Step(`^(\w[\w' ]*?)'s stream either coalesced the live text or ended it with a "reconnect" event$`, func(who string) error {
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
				if json.Unmarshal([]byte(e.Data), &d) == nil && len(d.Text) > s.slowPiece {
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
	})
	sc.Step(`^resuming from (\w[\w' ]*?)'s last event id delivers the reply of turn (\d+) exactly once$`, func(who string, turn int64) error {
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
	})
}

// openSlow opens the event stream on a raw connection with a tiny receive buffer and does not
// read it, so the server sees a slow reader.
func (s *scenario) openSlow(who string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	u, _ := url.Parse(s.sutURL())
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		_ = c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		return serr
	}}
	conn, err := d.DialContext(s.ctx, "tcp", u.Host)
	if err != nil {
		return fail("GET "+p+"/events", "no connection: "+err.Error(), "a connection")
	}
	s.slowConn = conn
	s.addCloser(conn)
	req := fmt.Sprintf("GET %s/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n", p, u.Host, tokenOf(who))
	if _, err := conn.Write([]byte(req)); err != nil {
		return harnessErr("write the request: %v", err)
	}
	return nil
}

// readSlow reads what the server sent to the slow reader until the stream ends or shows the reply.
func (s *scenario) readSlow() error {
	if s.slowConn == nil {
		return harnessErr("no slow stream is open")
	}
	_ = s.slowConn.SetReadDeadline(s.stepDeadline())
	br := bufio.NewReaderSize(s.slowConn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		s.slowEnd = endReason(err)
		return nil // cut off before the headers were read: nothing to parse
	}
	defer resp.Body.Close()
	s.slowEnd = ""
	err = readSSE(resp.Body, func(ev sseEvent) bool {
		s.slowEvents = append(s.slowEvents, ev)
		if ev.Event == "message" && strings.Contains(ev.Data, `"assistant"`) {
			s.slowEnd = "reply"
			return false
		}
		return true
	})
	if s.slowEnd == "" {
		s.slowEnd = endReason(err)
	}
	return nil
}

// endReason tells a stream the server closed from one the kit gave up on.
func endReason(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "closed"
}

func (s *scenario) registerContract(sc *godog.ScenarioContext) {
	sc.Step(`^(\w[\w' ]*?) walks every route of the conversation, errors included$`, func(who string) error {
		p, _, err := s.convPath("")
		if err != nil {
			return err
		}
		// Each call names the answer it must get: the status and, for an error, its code.
		type call struct {
			who, method, path string
			body              any
			opts              reqOpts
			status            int
			code              string
		}
		calls := []call{
			{"", http.MethodGet, "/.well-known/loom", nil, reqOpts{}, http.StatusOK, ""},
			{who, http.MethodGet, p, nil, reqOpts{}, http.StatusOK, ""},
			{who, http.MethodGet, p + "/history?direction=backward&limit=1", nil, reqOpts{}, http.StatusOK, ""},
			{who, http.MethodGet, p + "/history?cursor=not-a-cursor", nil, reqOpts{offSpec: true}, http.StatusBadRequest, "invalid cursor"},
			{who, http.MethodGet, p + "/participants", nil, reqOpts{}, http.StatusOK, ""},
			{who, http.MethodPost, p + "/turns", map[string]any{"text": "walking", "messageId": "walk-1"}, reqOpts{}, http.StatusAccepted, ""},
			{who, http.MethodPost, p + "/turns", nil, reqOpts{rawBody: []byte(`{"text": 5}`), offSpec: true}, http.StatusBadRequest, "bad request"},
			{who, http.MethodPost, p + "/turns", nil, reqOpts{rawBody: []byte("walk"), contentType: "text/plain", offSpec: true}, http.StatusUnsupportedMediaType, "unsupported media type"},
			{"", http.MethodGet, p, nil, reqOpts{}, http.StatusUnauthorized, "unauthenticated"},
			{"mallory", http.MethodGet, p + "/history", nil, reqOpts{}, http.StatusNotFound, "not found"},
			{who, http.MethodPost, "/conversations", map[string]any{"id": "bad~id"}, reqOpts{offSpec: true}, http.StatusBadRequest, "invalid id"},
			{who, http.MethodPost, p + "/close", map[string]any{}, reqOpts{}, http.StatusAccepted, ""},
		}
		if s.run.door {
			calls = append(calls, call{who, http.MethodGet, "/runtime/executions/" + url.PathEscape(s.current.id) + "/log?limit=5", nil, reqOpts{}, http.StatusOK, ""})
		}
		for _, c := range calls {
			r, err := s.cl.do(s.ctx, c.who, c.method, c.path, c.body, c.opts)
			if err != nil {
				return err
			}
			s.last = r
			var e struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(r.body, &e)
			if r.status != c.status || e.Error != c.code {
				want := fmt.Sprint(c.status)
				if c.code != "" {
					want += fmt.Sprintf(" %q", c.code)
				}
				return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 160)), want)
			}
		}
		st, err := s.cl.openStream(s.ctx, who, p+"/events", nil)
		if err != nil {
			return err
		}
		defer st.close()
		ctx, cancel := s.wait()
		defer cancel()
		_, err = st.waitFor(ctx, "the closed event", func(evs []sseEvent, ended bool) bool {
			for _, e := range evs {
				if e.Event == "closed" {
					return true
				}
			}
			return false
		})
		return err
	})
	sc.Step(`^every exchange so far followed the contract$`, func() error {
		s.cl.mu.Lock()
		n, v := s.cl.validated, len(s.cl.violations)
		s.cl.mu.Unlock()
		if v > 0 {
			return fail("the exchanges of this scenario", fmt.Sprintf("%d violations", v), "none")
		}
		if n < 10 {
			return harnessErr("only %d exchanges were validated", n)
		}
		return nil
	})
}
