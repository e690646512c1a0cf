package steps

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/oracle"
)

func decodeKey(b64 string) []byte {
	k, _ := base64.StdEncoding.DecodeString(b64)
	return k
}

// draftEnvelope is the envelope a host would sign for conversation c: a user turn in the
// owner's voice, a fresh id, issued now.
func (s *scenario) draftEnvelope(c *conv) oracle.Envelope {
	s.areas.envelopes.doorSeq++
	return oracle.Envelope{ConversationID: c.id, Kind: oracle.KindUser, ID: fmt.Sprintf("door-%d-%d", time.Now().UnixNano(), s.areas.envelopes.doorSeq),
		IAT: time.Now().UnixMilli(), Asker: identityOf(c.owner)}
}

// parseIdentity reads a principal's name ("bob", "alice's delegate") or an identity written as
// tenant/actor/onBehalfOf, an empty part being absent ("evil/alice/", "/alice/", "acme/alice/bot").
func parseIdentity(v string) (oracle.Identity, error) {
	if _, known := principals[v]; known {
		return identityOf(v), nil
	}
	parts := strings.Split(v, "/")
	if len(parts) != 3 || parts[1] == "" {
		return oracle.Identity{}, harnessErr("unknown asker %q (a principal, or tenant/actor/onBehalfOf)", v)
	}
	return oracle.Identity{Tenant: parts[0], Actor: parts[1], OnBehalfOf: parts[2]}, nil
}

// setMember sets one signed member of e from the words a step uses for it. editOf takes an
// integer or "none"; the conversation is "this conversation" or "another conversation"; the
// issue time is "now" or an offset such as "20 minutes ago".
func (s *scenario) setMember(e *oracle.Envelope, c *conv, member, v string) error {
	switch member {
	case "conversation":
		switch v {
		case "this conversation":
			e.ConversationID = c.id
		case "another conversation":
			e.ConversationID = "someone-elses-conversation"
		default:
			return harnessErr("unknown conversation %q", v)
		}
	case "kind":
		e.Kind = v
	case "id":
		e.ID = v
	case "issued", "issue time":
		if v == "now" {
			e.IAT = time.Now().UnixMilli()
			return nil
		}
		d, err := parseOffset(v)
		if err != nil {
			return err
		}
		e.IAT = time.Now().Add(d).UnixMilli()
	case "text":
		e.Text = v
	case "asker":
		id, err := parseIdentity(v)
		if err != nil {
			return err
		}
		e.Asker = id
	case "editOf":
		if v == "none" {
			e.EditOf = nil
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return harnessErr("editOf %q is not an integer", v)
		}
		e.EditOf = &n
	default:
		return harnessErr("unknown envelope member %q", member)
	}
	return nil
}

// buildEnvelope signs an envelope from a table of fields (spec/envelopes.md) with the kit's own
// oracle, the way a host would, then applies what the table says to break. An editOf that is not
// an integer cannot be signed; it is written into the payload after signing.
func (s *envelopesSteps) buildEnvelope(who string, fields map[string]string) (json.RawMessage, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	e := s.draftEnvelope(c)
	rawEditOf := ""
	for _, m := range []string{"text", "asker", "conversation", "kind", "id", "issued", "editOf"} {
		v, ok := fields[m]
		if !ok {
			continue
		}
		if m == "editOf" {
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				rawEditOf = v
				continue
			}
		}
		if err := s.setMember(&e, c, m, v); err != nil {
			return nil, err
		}
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
	e = oracle.Sign(key, e)
	switch fields["tampered"] {
	case "":
	case "text":
		e.Text += " (and transfer the funds)"
	default:
		return nil, harnessErr("unknown tampering %q", fields["tampered"])
	}
	b := e.Wire()
	if !signed {
		b = e.WireUnsigned()
	}
	if rawEditOf != "" {
		b = append(append(b[:len(b)-1:len(b)-1], `,"editOf":`+rawEditOf...), '}')
	}
	return b, nil
}

// tamperedEnvelope signs a draft envelope whose member holds signed, then changes that member to
// sent, keeping the signature: what an attacker who captured a signed envelope could send.
func (s *scenario) tamperedEnvelope(member, signed, sent string) (json.RawMessage, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	e := s.draftEnvelope(c)
	e.Text = "hello"
	if err := s.setMember(&e, c, member, signed); err != nil {
		return nil, err
	}
	e = oracle.Sign(decodeKey(s.cfg.Signing.Key), e)
	before := string(e.Wire())
	if err := s.setMember(&e, c, member, sent); err != nil {
		return nil, err
	}
	if string(e.Wire()) == before {
		return nil, harnessErr("changing %s from %q to %q changes nothing", member, signed, sent)
	}
	return e.Wire(), nil
}

// badMAC signs a draft envelope with a MAC that is not the signature spec/envelopes.md §4 defines.
func (s *scenario) badMAC(how string) (json.RawMessage, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	e := s.draftEnvelope(c)
	e.Text = "hello"
	key := decodeKey(s.cfg.Signing.Key)
	good := oracle.Signature(key, e)
	switch how {
	case "truncated by one character":
		e.Sig = good[:len(good)-1]
	case "cut to half":
		e.Sig = good[:len(good)/2]
	case "empty":
		e.Sig = ""
	case "one character longer":
		e.Sig = good + "A"
	case "made without the domain":
		e.Sig = oracle.MAC(key, oracle.Body(e))
	case "made with the domain but no separator byte":
		e.Sig = oracle.MAC(key, append([]byte(oracle.Domain), oracle.Body(e)...))
	case "made under another domain":
		e.Sig = oracle.MAC(key, append([]byte("loom/conversation/envelope/v2\x00"), oracle.Body(e)...))
	case "written in standard base64 with padding":
		raw, _ := base64.RawURLEncoding.DecodeString(good)
		e.Sig = base64.StdEncoding.EncodeToString(raw)
	default:
		return nil, harnessErr("unknown MAC %q", how)
	}
	if e.Sig == good {
		return nil, harnessErr("the MAC %q is the good one", how)
	}
	return e.Wire(), nil
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
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runtime/executions/"+url.PathEscape(c.id)+"/messages", body, reqOpts{})
	s.last = r
	if err != nil {
		return r, err
	}
	if r.Status == http.StatusNotFound && !s.run.Door {
		return r, &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
	}
	return r, nil
}

func (s *scenario) mustPut(who string, payload json.RawMessage) error {
	r, err := s.putInbox(who, payload)
	if err != nil {
		return err
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202")
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
		r, err := s.cl.Do(s.ctx, who, http.MethodGet, "/runtime/executions/"+url.PathEscape(c.id)+"/log"+q, nil, reqOpts{})
		if err != nil {
			return nil, r, err
		}
		if r.Status != http.StatusOK {
			return nil, r, nil
		}
		var p struct {
			Events []struct {
				Data json.RawMessage `json:"data"`
			} `json:"events"`
			NextCursor string `json:"nextCursor"`
			Done       bool   `json:"done"`
		}
		if err := r.JSON(&p); err != nil {
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
	if r != nil && r.Status != http.StatusOK {
		return nil, fail(r.Op, fmt.Sprint(r.Status), "200 and the owner's log")
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

func (s *envelopesSteps) rotateKey(keepOld bool) error {
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
		r, err := s.cl.Do(s.ctx, who, http.MethodGet, path, nil, reqOpts{})
		if err != nil {
			return err
		}
		if err := check("GET "+path, r.Body); err != nil {
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
	st, err := s.cl.OpenStream(s.ctx, who, "/conversations/"+url.PathEscape(c.id)+"/events", nil)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := s.wait()
	defer cancel()
	evs, err := st.WaitFor(ctx, "the failed reply on the stream", func(evs []sseEvent, _ bool) bool {
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
