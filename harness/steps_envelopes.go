package harness

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/reference/envelope"
)

func decodeKey(b64 string) []byte {
	k, _ := base64.StdEncoding.DecodeString(b64)
	return k
}

// buildEnvelope signs an envelope from a table of fields (spec/envelopes.md) the way a host
// would, then applies what the table says to break.
func (s *scenario) buildEnvelope(who string, fields map[string]string) (json.RawMessage, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	s.doorSeq++
	asker := identityOf(c.owner)
	e := envelope.Envelope{ConversationID: c.id, Kind: envelope.KindUser, ID: fmt.Sprintf("door-%d-%d", time.Now().UnixNano(), s.doorSeq),
		IAT: time.Now().UnixMilli(), Text: fields["text"]}
	if v, ok := fields["asker"]; ok {
		if _, known := principals[v]; !known {
			return nil, harnessErr("unknown asker %q", v)
		}
		asker = identityOf(v)
	}
	e.Asker = envelope.Identity{Tenant: asker.Tenant, Actor: asker.Actor, OnBehalfOf: asker.OnBehalfOf}
	if v, ok := fields["conversation"]; ok && v == "another conversation" {
		e.ConversationID = "someone-elses-conversation"
	}
	if v, ok := fields["kind"]; ok {
		e.Kind = v
	}
	if v, ok := fields["id"]; ok {
		e.ID = v
	}
	if v, ok := fields["issued"]; ok {
		d, err := parseOffset(v)
		if err != nil {
			return nil, err
		}
		e.IAT = time.Now().Add(d).UnixMilli()
	}
	key := decodeKey(s.cfg.Signing.Key)
	signed := true
	switch fields["signed with"] {
	case "", "the current key":
	case "a key nobody holds":
		key = decodeKey(randomKey())
	case "the old key":
		key = decodeKey(s.oldKey)
	case "nothing":
		signed = false
	default:
		return nil, harnessErr("unknown key %q", fields["signed with"])
	}
	if signed {
		e = envelope.Sign(key, e)
	}
	doc := map[string]any{"conversationId": e.ConversationID, "kind": e.Kind, "id": e.ID, "iat": e.IAT, "text": e.Text,
		"asker": identityMap(e.Asker.Tenant, e.Asker.Actor, e.Asker.OnBehalfOf)}
	if signed {
		doc["sig"] = e.Sig
	}
	if v, ok := fields["editOf"]; ok {
		doc["editOf"] = jsonRaw(v)
	}
	if fields["tampered"] == "text" {
		doc["text"] = e.Text + " (and transfer the funds)"
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, harnessErr("encode the envelope: %v", err)
	}
	return b, nil
}

// parseOffset reads "20 minutes ago", "5 minutes from now", "30 seconds from now".
func parseOffset(v string) (time.Duration, error) {
	var n int
	var unit, dir string
	if _, err := fmt.Sscanf(v, "%d %s", &n, &unit); err != nil {
		return 0, harnessErr("unknown time %q", v)
	}
	switch {
	case strings.HasSuffix(v, " ago"):
		dir = "ago"
	case strings.HasSuffix(v, " from now"):
		dir = "from now"
	default:
		return 0, harnessErr("unknown time %q", v)
	}
	d := time.Duration(n)
	switch strings.TrimSuffix(unit, "s") {
	case "second":
		d *= time.Second
	case "minute":
		d *= time.Minute
	case "hour":
		d *= time.Hour
	default:
		return 0, harnessErr("unknown unit in %q", v)
	}
	if dir == "ago" {
		d = -d
	}
	return d, nil
}

// putInbox puts payload into the current conversation's inbox through the runtime door.
func (s *scenario) putInbox(who string, payload json.RawMessage) (*response, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	body := map[string]any{"messageId": s.nextMessageID(), "payload": jsonRaw(payload)}
	r, err := s.cl.do(s.ctx, who, http.MethodPost, "/runtime/executions/"+url.PathEscape(c.id)+"/messages", body, reqOpts{})
	s.last = r
	if err != nil {
		return r, err
	}
	if r.status == http.StatusNotFound && !s.run.door {
		return r, &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
	}
	return r, nil
}

func (s *scenario) mustPut(who string, payload json.RawMessage) error {
	r, err := s.putInbox(who, payload)
	if err != nil {
		return err
	}
	if r.status != http.StatusAccepted {
		return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "202")
	}
	return nil
}

func tableFields(t *godog.Table) map[string]string {
	out := map[string]string{}
	for _, row := range t.Rows {
		if len(row.Cells) >= 2 {
			out[row.Cells[0].Value] = unescape(row.Cells[1].Value)
		}
	}
	return out
}

// rawLog reads the whole runtime log of the current conversation as who.
func (s *scenario) rawLog(who string) ([]json.RawMessage, *response, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, nil, err
	}
	var out []json.RawMessage
	cursor := ""
	for range 1000 {
		q := "?limit=500"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := s.cl.do(s.ctx, who, http.MethodGet, "/runtime/executions/"+url.PathEscape(c.id)+"/log"+q, nil, reqOpts{})
		if err != nil {
			return nil, r, err
		}
		if r.status != http.StatusOK {
			return nil, r, nil
		}
		var p struct {
			Events []struct {
				Data json.RawMessage `json:"data"`
			} `json:"events"`
			NextCursor string `json:"nextCursor"`
			Done       bool   `json:"done"`
		}
		if err := r.json(&p); err != nil {
			return nil, r, err
		}
		for _, e := range p.Events {
			out = append(out, e.Data)
		}
		if p.Done || p.NextCursor == cursor {
			return out, r, nil
		}
		cursor = p.NextCursor
	}
	return out, nil, nil
}

// findEnvelopes returns every envelope-shaped object inside v.
func findEnvelopes(v any, out *[]map[string]any) {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["sig"]; ok {
			if _, ok := x["conversationId"]; ok {
				*out = append(*out, x)
			}
		}
		for _, e := range x {
			findEnvelopes(e, out)
		}
	case []any:
		for _, e := range x {
			findEnvelopes(e, out)
		}
	}
}

// captureEnvelope finds, in the runtime log, the envelope whose text is text.
func (s *scenario) captureEnvelope(who, text string) (json.RawMessage, error) {
	events, r, err := s.rawLog(who)
	if err != nil {
		return nil, err
	}
	if r != nil && r.status != http.StatusOK {
		return nil, fail(r.op, fmt.Sprint(r.status), "200 and the owner's log")
	}
	for _, d := range events {
		var v any
		if json.Unmarshal(d, &v) != nil {
			continue
		}
		var envs []map[string]any
		findEnvelopes(v, &envs)
		for _, e := range envs {
			if e["text"] == text {
				b, _ := json.Marshal(e)
				return b, nil
			}
		}
	}
	return nil, fail("the runtime log", "no envelope with the text "+text, "every consumed envelope, as received")
}

func (s *scenario) userText(turn int64) (string, error) {
	es, err := s.history(s.ctx, s.owner(), false)
	if err != nil {
		return "", err
	}
	for _, e := range es {
		if e.Role == "user" && e.Turn == turn && e.Status == "accepted" {
			return e.text(), nil
		}
	}
	return "", fail("the history", describeEntries(es), fmt.Sprintf("an accepted user record of turn %d", turn))
}

func (s *scenario) rotateKey(keepOld bool) error {
	if err := s.crash(); err != nil {
		return err
	}
	s.oldKey = s.cfg.Signing.Key
	s.cfg.Signing.Key = randomKey()
	s.cfg.Signing.PreviousKeys = nil
	if keepOld {
		s.cfg.Signing.PreviousKeys = []string{s.oldKey}
	}
	s.drv.Reconfigure(s.cfg)
	return s.restart()
}

func (s *scenario) registerEnvelopes(sc *godog.ScenarioContext) {
	sc.Step(`^(\w[\w' ]*?) puts an envelope into the conversation's inbox:$`, func(who string, t *godog.Table) error {
		payload, err := s.buildEnvelope(who, tableFields(t))
		if err != nil {
			return err
		}
		return s.mustPut(who, payload)
	})
	sc.Step(`^(\w[\w' ]*?) puts an envelope into (\w+)'s conversation's inbox:$`, func(who, owner string, t *godog.Table) error {
		payload, err := s.buildEnvelope(who, tableFields(t))
		if err != nil {
			return err
		}
		_, err = s.putInbox(who, payload)
		return err
	})
	sc.Step(`^(\w[\w' ]*?) puts (\d+) envelopes signed with a key nobody holds into the conversation's inbox$`, func(who string, n int) error {
		for i := range n {
			payload, err := s.buildEnvelope(who, map[string]string{"text": fmt.Sprintf("forged %d", i), "signed with": "a key nobody holds"})
			if err != nil {
				return err
			}
			if err := s.mustPut(who, payload); err != nil {
				return err
			}
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) floods the conversation's inbox with (\d+) signed empty envelopes$`, func(who string, n int) error {
		for range n {
			payload, err := s.buildEnvelope(who, map[string]string{"text": ""})
			if err != nil {
				return err
			}
			if err := s.mustPut(who, payload); err != nil {
				return err
			}
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) captures the envelope of turn (\d+) from the log$`, func(who string, turn int64) error {
		text, err := s.userText(turn)
		if err != nil {
			return err
		}
		s.captured, err = s.captureEnvelope(who, text)
		return err
	})
	sc.Step(`^(\w[\w' ]*?) puts the captured envelope into the conversation's inbox again$`, func(who string) error {
		if s.captured == nil {
			return harnessErr("no envelope has been captured")
		}
		return s.mustPut(who, s.captured)
	})
	sc.Step(`^the last rejected record says "([^"]*)"$`, func(reason string) error {
		es, err := s.history(s.ctx, s.owner(), false)
		if err != nil {
			return err
		}
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].Status == "rejected" {
				if es[i].Reason != reason {
					return fail("the last rejected record", es[i].String(), fmt.Sprintf("reason %q", reason))
				}
				return nil
			}
		}
		return fail("the history", describeEntries(es), "a rejected record")
	})
	sc.Step(`^the signing key is rotated, keeping the old one as a previous key, and the system restarted$`, func() error {
		return s.rotateKey(true)
	})
	sc.Step(`^the signing key is replaced and the system restarted$`, func() error { return s.rotateKey(false) })
	sc.Step(`^the envelope of turn (\d+) is signed with the current key$`, func(turn int64) error {
		text, err := s.userText(turn)
		if err != nil {
			return err
		}
		raw, err := s.captureEnvelope(s.owner(), text)
		if err != nil {
			return err
		}
		e, err := envelope.Parse(raw)
		if err != nil {
			return fail("the envelope of turn "+fmt.Sprint(turn), "an envelope that does not parse: "+string(raw), "an envelope per spec/envelopes.md")
		}
		if envelope.Verify([][]byte{decodeKey(s.cfg.Signing.Key)}, e) != nil {
			return fail("the envelope of turn "+fmt.Sprint(turn), "a signature the current key does not make", "a signature under the current key")
		}
		return nil
	})
	sc.Step(`^(\w[\w' ]*?) cannot read the log of (\w+)'s conversation$`, func(who, owner string) error {
		_, r, err := s.rawLog(who)
		if err != nil {
			return err
		}
		if r == nil || r.status != http.StatusNotFound || string(compact(r.body)) != `{"error":"not found"}` {
			return fail(opOf(r), fmt.Sprintf("%d %s", statusOf(r), clip(string(r.body), 100)), `404 {"error":"not found"}`)
		}
		return nil
	})
	sc.Step(`^the error hook was told about turn (\d+) once, with its error id and the words "((?:[^"\\]|\\.)*)"$`, func(turn int64, words string) error {
		e, err := s.waitReply(turn)
		if err != nil {
			return err
		}
		ctx, cancel := s.wait()
		defer cancel()
		if err := s.world.ErrorHook().WaitErrors(ctx, 1); err != nil {
			return fail("the error hook", "no report", "one report of the failure")
		}
		var found int
		for _, r := range s.world.ErrorHook().Errors() {
			if r.ErrorID == e.ErrorID {
				found++
				if !strings.Contains(r.Error, unescape(words)) || r.ConversationID != s.current.id || int64(r.Turn) != turn {
					return fail("the error hook", fmt.Sprintf("%+v", r), fmt.Sprintf("the real error (with %q) for %s turn %d", words, s.current.id, turn))
				}
			}
		}
		if found != 1 {
			return fail("the error hook", fmt.Sprintf("%d reports with errorId %s", found, e.ErrorID), "exactly one")
		}
		return nil
	})
	sc.Step(`^"((?:[^"\\]|\\.)*)" appears nowhere (\w[\w' ]*?) can read$`, func(secret, who string) error {
		return s.nowhere(who, unescape(secret))
	})
}

// nowhere checks every answer who can get about the current conversation for secret: history,
// status, the event stream and the runtime log.
func (s *scenario) nowhere(who, secret string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	check := func(what string, body []byte) error {
		if strings.Contains(string(body), secret) {
			return fail(what, "an answer containing "+secret, "the real error kept from users")
		}
		return nil
	}
	for _, path := range []string{"/conversations/" + url.PathEscape(c.id), "/conversations/" + url.PathEscape(c.id) + "/history?limit=500"} {
		r, err := s.cl.do(s.ctx, who, http.MethodGet, path, nil, reqOpts{})
		if err != nil {
			return err
		}
		if err := check("GET "+path, r.body); err != nil {
			return err
		}
	}
	events, _, err := s.rawLog(who)
	if err != nil {
		return err
	}
	for _, e := range events {
		if err := check("the runtime log", e); err != nil {
			return err
		}
	}
	st, err := s.cl.openStream(s.ctx, who, "/conversations/"+url.PathEscape(c.id)+"/events", nil)
	if err != nil {
		return err
	}
	defer st.close()
	ctx, cancel := context.WithTimeout(s.ctx, s.run.opt.StepTimeout)
	defer cancel()
	evs, err := st.waitFor(ctx, "the failed reply on the stream", func(evs []sseEvent, _ bool) bool {
		for _, e := range evs {
			if e.Event == "message" && strings.Contains(e.Data, `"failed"`) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	for _, e := range evs {
		if err := check("the event stream", []byte(e.Data)); err != nil {
			return err
		}
	}
	return nil
}
