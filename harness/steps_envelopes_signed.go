package harness

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/oracle"
	"github.com/loomcheck/loomcheck/harness/world"
)

// putsEnvelope puts the envelope of the table, signed with the current key, into the current conversation's inbox as who.
func (s *envelopesSteps) putsEnvelope(who string, t *godog.Table) error {
	payload, err := s.buildEnvelope(who, tableFields(t))
	if err != nil {
		return err
	}
	return s.mustPut(who, payload)
}

// putsEnvelopeInto puts the envelope of the table into another's conversation's inbox as who.
func (s *envelopesSteps) putsEnvelopeInto(who, owner string, t *godog.Table) error {
	payload, err := s.buildEnvelope(who, tableFields(t))
	if err != nil {
		return err
	}
	_, err = s.putInbox(who, payload)
	return err
}

// signsAndPuts signs an envelope with one value of a field and puts it in with another value.
func (s *envelopesSteps) signsAndPuts(who, member, signed, member2, sent string) error {
	if member != member2 {
		return harnessErr("the step changes %s into %s: one member at a time", member, member2)
	}
	payload, err := s.tamperedEnvelope(member, signed, sent)
	if err != nil {
		return err
	}
	return s.mustPut(who, payload)
}

// putsEnvelopeWithMAC puts an envelope into the inbox as who whose MAC is the given one.
func (s *envelopesSteps) putsEnvelopeWithMAC(who, how string) error {
	payload, err := s.badMAC(how)
	if err != nil {
		return err
	}
	return s.mustPut(who, payload)
}

// putsUnsignedEnvelopes puts N envelopes signed with a key nobody holds into the inbox as who.
func (s *envelopesSteps) putsUnsignedEnvelopes(who string, n int) error {
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
}

// floodsInbox puts N signed empty envelopes into the inbox as who.
func (s *envelopesSteps) floodsInbox(who string, n int) error {
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
}

// capturesEnvelope reads turn N's envelope from the conversation's log as who and keeps it.
func (s *envelopesSteps) capturesEnvelope(who string, turn int64) error {
	text, err := s.userText(turn)
	if err != nil {
		return err
	}
	s.captured, err = s.captureEnvelope(who, text)
	return err
}

// putsCapturedAgain puts the captured envelope into the inbox again as who.
func (s *envelopesSteps) putsCapturedAgain(who string) error {
	if s.captured == nil {
		return harnessErr("no envelope has been captured")
	}
	return s.mustPut(who, s.captured)
}

// keyRotated rotates the signing key, keeping the old one as previous, and restarts the system.
func (s *envelopesSteps) keyRotated() error {
	return s.rotateKey(true)
}

// keyReplaced replaces the signing key (the old one forgotten) and restarts the system.
func (s *envelopesSteps) keyReplaced() error { return s.rotateKey(false) }

// envelopeSignedWithCurrentKey expects turn N's envelope to verify with the current key.
func (s *envelopesSteps) envelopeSignedWithCurrentKey(turn int64) error {
	text, err := s.userText(turn)
	if err != nil {
		return err
	}
	raw, err := s.captureEnvelope(s.owner(), text)
	if err != nil {
		return err
	}
	e, err := oracle.Parse(raw)
	if err != nil {
		return fail("the envelope of turn "+fmt.Sprint(turn), "an envelope that does not parse ("+err.Error()+"): "+string(raw), "an envelope per spec/envelopes.md")
	}
	if oracle.Verify([][]byte{decodeKey(s.cfg.Signing.Key)}, e) != nil {
		return fail("the envelope of turn "+fmt.Sprint(turn), "a signature the current key does not make", "a signature under the current key")
	}
	return nil
}

// ranAsKeyedTurnExecution expects who's answer to turn N to have run as the turn execution the current or previous key names for message N.
func (s *envelopesSteps) ranAsKeyedTurnExecution(viewer string, turn, msg int64) error {
	e, err := s.viewReply(viewer, turn)
	if err != nil {
		return err
	}
	if s.oldKey == "" {
		return harnessErr("no key has been rotated")
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	cur := oracle.TurnExecutionID(decodeKey(s.cfg.Signing.Key), c.id, msg)
	prev := oracle.TurnExecutionID(decodeKey(s.oldKey), c.id, msg)
	if e.TurnExecutionID != cur && e.TurnExecutionID != prev {
		return fail(fmt.Sprintf("the reply to turn %d as its asker sees it", turn), fmt.Sprintf("turnExecutionId %q", e.TurnExecutionID),
			fmt.Sprintf("%q (the current key) or %q (the previous one), spec/envelopes.md §7", cur, prev))
	}
	return nil
}

// cannotReadLog expects who's request for another's conversation log refused as a missing conversation.
func (s *envelopesSteps) cannotReadLog(who, owner string) error {
	_, r, err := s.rawLog(who)
	if err != nil {
		return err
	}
	if r == nil || r.status != http.StatusNotFound || string(compact(r.body)) != `{"error":"not found"}` {
		return fail(opOf(r), fmt.Sprintf("%d %s", statusOf(r), clip(string(r.body), 100)), `404 {"error":"not found"}`)
	}
	return nil
}

// errorHookToldOnce expects the error hook to have been told about turn N once, with its error id and the words.
func (s *envelopesSteps) errorHookToldOnce(turn int64, words string) error {
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
}

// appearsNowhere expects the text in nothing who can read: history, status, log and streams.
func (s *envelopesSteps) appearsNowhere(secret, who string) error {
	return s.nowhere(who, unescape(secret))
}

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
	ctx, cancel := s.wait()
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

// floodsInboxAtCaptured puts N signed empty envelopes, each issued at the captured envelope's
// issue time, into the inbox as who: once they evict it from the replay set, the floor equals
// its issue time exactly.
func (s *envelopesSteps) floodsInboxAtCaptured(who string, n int) error {
	if s.captured == nil {
		return harnessErr("no envelope has been captured")
	}
	captured, err := oracle.Parse(s.captured)
	if err != nil {
		return harnessErr("the captured envelope does not parse: %v", err)
	}
	c, err := s.conv("")
	if err != nil {
		return err
	}
	for range n {
		e := s.draftEnvelope(c)
		e.Text, e.IAT = "", captured.IAT
		if err := s.mustPut(who, oracle.Sign(decodeKey(s.cfg.Signing.Key), e).Wire()); err != nil {
			return err
		}
	}
	return nil
}

// putsEnvelopeOutlived puts an envelope with the text, issued two seconds short of
// maxEnvelopeAgeMs ago (fresh when it is received), into the inbox as who, then waits until the
// clock has passed the instant it would be stale if judged then.
func (s *envelopesSteps) putsEnvelopeOutlived(who, text string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	maxAge := s.cfg.Conversation.MaxEnvelopeAgeMs
	if maxAge <= 0 {
		maxAge = 600_000 // spec/envelopes.md §5, the default
	}
	e := s.draftEnvelope(c)
	e.Text, e.IAT = unescape(text), time.Now().UnixMilli()-maxAge+2_000
	if err := s.mustPut(who, oracle.Sign(decodeKey(s.cfg.Signing.Key), e).Wire()); err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	stale := time.UnixMilli(e.IAT + maxAge + 1)
	select {
	case <-time.After(time.Until(stale)):
		return nil
	case <-ctx.Done():
		return fail("the wait for the envelope to age", "no time left in the step", fmt.Sprintf("the clock past %s", stale.Format(time.RFC3339Nano)))
	}
}

// errorHookToldOnceEach expects one report of each listed failed turn's error id, and no other
// report of those turns. Reports arrive in the order they were made (spec/world.md), so once the
// last turn's report is in, any report made before it, a replay's included, is in too.
func (s *edgeSteps) errorHookToldOnceEach(list string) error {
	turns := splitList(list)
	ids := map[string]int64{}
	var last string
	for _, t := range turns {
		var n int64
		if _, err := fmt.Sscan(t, &n); err != nil {
			return harnessErr("turn %q is not a number", t)
		}
		e, err := s.waitReply(n)
		if err != nil {
			return err
		}
		if e.ErrorID == "" {
			return fail(fmt.Sprintf("turn %d", n), "no errorId", "a failed turn with an errorId")
		}
		ids[e.ErrorID], last = n, e.ErrorID
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !slices.ContainsFunc(s.world.ErrorHook().Errors(), func(r world.ErrorReport) bool { return r.ErrorID == last }) {
		select {
		case <-ctx.Done():
			return fail("the error hook", fmt.Sprintf("%d reports, none with errorId %s", len(s.world.ErrorHook().Errors()), last), "a report of turn "+turns[len(turns)-1])
		case <-tick.C:
		}
	}
	got := map[int64]int{}
	for _, r := range s.world.ErrorHook().Errors() {
		if n, ok := ids[r.ErrorID]; ok {
			got[n]++
		} else if r.ConversationID == s.current.id && slices.Contains(turns, fmt.Sprint(r.Turn)) {
			got[int64(r.Turn)]++
		}
	}
	for _, n := range ids {
		if got[n] != 1 {
			return fail("the error hook", fmt.Sprintf("%d reports of turn %d", got[n], n), "exactly one")
		}
	}
	return nil
}

// envelopesSignedVocabulary lists the steps of features/envelopes/signed.feature.
func envelopesSignedVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) puts an envelope into the conversation's inbox:$`, a.envelopes.putsEnvelope, "puts the envelope of the table, signed with the current key, into the current conversation's inbox as who"},
		{`^(\w[\w' ]*?) puts an envelope into (\w+)'s conversation's inbox:$`, a.envelopes.putsEnvelopeInto, "puts the envelope of the table into another's conversation's inbox as who"},
		{`^(\w[\w' ]*?) signs an envelope with (\w[\w ]*?) "([^"]*)" and puts it into the inbox with (\w[\w ]*?) "([^"]*)"$`, a.envelopes.signsAndPuts, "signs an envelope with one value of a field and puts it in with another value"},
		{`^(\w[\w' ]*?) puts an envelope into the conversation's inbox whose MAC is (.+)$`, a.envelopes.putsEnvelopeWithMAC, "puts an envelope into the inbox as who whose MAC is the given one"},
		{`^(\w[\w' ]*?) puts (\d+) envelopes signed with a key nobody holds into the conversation's inbox$`, a.envelopes.putsUnsignedEnvelopes, "puts N envelopes signed with a key nobody holds into the inbox as who"},
		{`^(\w[\w' ]*?) floods the conversation's inbox with (\d+) signed empty envelopes$`, a.envelopes.floodsInbox, "puts N signed empty envelopes into the inbox as who"},
		{`^(\w[\w' ]*?) floods the conversation's inbox with (\d+) signed empty envelopes issued when the captured one was$`, a.envelopes.floodsInboxAtCaptured, "puts N signed empty envelopes issued at the captured envelope's issue time into the inbox as who"},
		{`^(\w[\w' ]*?) puts an envelope saying "([^"]*)" into the inbox and waits until its issue time is older than maxEnvelopeAgeMs$`, a.envelopes.putsEnvelopeOutlived, "puts an envelope issued two seconds short of maxEnvelopeAgeMs ago, then waits until the clock passes its staleness"},
		{`^(\w[\w' ]*?) captures the envelope of turn (\d+) from the log$`, a.envelopes.capturesEnvelope, "reads turn N's envelope from the conversation's log as who and keeps it"},
		{`^(\w[\w' ]*?) puts the captured envelope into the conversation's inbox again$`, a.envelopes.putsCapturedAgain, "puts the captured envelope into the inbox again as who"},
		{`^the signing key is rotated, keeping the old one as a previous key, and the system restarted$`, a.envelopes.keyRotated, "rotates the signing key, keeping the old one as previous, and restarts the system"},
		{`^the signing key is replaced and the system restarted$`, a.envelopes.keyReplaced, "replaces the signing key (the old one forgotten) and restarts the system"},
		{`^the envelope of turn (\d+) is signed with the current key$`, a.envelopes.envelopeSignedWithCurrentKey, "expects turn N's envelope to verify with the current key"},
		{`^(\w+) sees that (?:his|her) answer to turn (\d+) ran as a turn execution the current or the previous key names for message (\d+)$`, a.envelopes.ranAsKeyedTurnExecution, "expects who's answer to turn N to have run as the turn execution the current or previous key names for message N"},
		{`^(\w[\w' ]*?) cannot read the log of (\w+)'s conversation$`, a.envelopes.cannotReadLog, "expects who's request for another's conversation log refused as a missing conversation"},
		{`^the error hook was told about turn (\d+) once, with its error id and the words "((?:[^"\\]|\\.)*)"$`, a.envelopes.errorHookToldOnce, "expects the error hook to have been told about turn N once, with its error id and the words"},
		{`^"((?:[^"\\]|\\.)*)" appears nowhere (\w[\w' ]*?) can read$`, a.envelopes.appearsNowhere, "expects the text in nothing who can read: history, status, log and streams"},
		{`^the error hook was told about turns (.+) once each$`, a.edge.errorHookToldOnceEach, "expects one report of each listed failed turn's error id, and no other report of those turns"},
	}
}
