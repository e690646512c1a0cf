package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// hasStartedConversation makes who start a conversation (server-chosen id) and makes it the current one.
func (s *conversationSteps) hasStartedConversation(who string) error {
	return s.mustStart(who, "", nil)
}

// startsConversationID asks to start a conversation with a caller-chosen id as who; the answer is kept.
func (s *conversationSteps) startsConversationID(who, id string) error {
	_, err := s.start(who, id, nil)
	return err
}

// hasHadTurnsAnswered sends N messages as who and waits until each turn is answered.
func (s *conversationSteps) hasHadTurnsAnswered(who string, n int) error {
	for range n {
		s.turns++
		text := fmt.Sprintf("question %d", s.turns)
		if err := s.mustSend(who, text, s.nextMessageID(), nil); err != nil {
			return err
		}
		t, err := s.waitAnswered(who, text)
		if err != nil {
			return err
		}
		s.turnNo = t
		s.turnText[t] = text
	}
	return nil
}

// sends sends the text as who and expects it accepted.
func (s *conversationSteps) sends(who, text string) error {
	return s.mustSend(who, unescape(text), s.nextMessageID(), nil)
}

// triesToSend sends the text as who and keeps the answer, whatever it is.
func (s *conversationSteps) triesToSend(who, text string) error {
	_, err := s.send(who, unescape(text), s.nextMessageID(), nil)
	return err
}

// sendsWithMessageID sends the text as who under the given message id and expects it accepted.
func (s *conversationSteps) sendsWithMessageID(who, text, id string) error {
	return s.mustSend(who, unescape(text), id, nil)
}

// sendsMessageOfSize sends a message of N characters as who and expects it accepted.
func (s *conversationSteps) sendsMessageOfSize(who string, n int) error {
	return s.mustSend(who, strings.Repeat("x", n), s.nextMessageID(), nil)
}

// sendsEmptyMessage sends an empty message as who and expects it accepted.
func (s *conversationSteps) sendsEmptyMessage(who string) error {
	return s.mustSend(who, "", s.nextMessageID(), nil)
}

// closesConversation closes the current conversation as who; the answer is kept.
func (s *conversationSteps) closesConversation(who string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations/"+url.PathEscape(c.id)+"/close", map[string]any{}, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprint(r.Status), "202")
	}
	return nil
}

// answerIs expects the last answer's status and, when named, its error code.
func (s *conversationSteps) answerIs(code int, errCode string) error {
	if s.last == nil {
		return harnessErr("no request has been sent")
	}
	if s.last.Status != code {
		return fail(s.last.Op, fmt.Sprintf("%d %s", s.last.Status, clip(string(s.last.Body), 200)), fmt.Sprint(code))
	}
	if errCode != "" {
		var e struct {
			Error string `json:"error"`
		}
		if err := s.last.JSON(&e); err != nil {
			return err
		}
		if e.Error != errCode {
			return fail(s.last.Op, fmt.Sprintf("error %q", e.Error), fmt.Sprintf("error %q", errCode))
		}
	}
	return nil
}

// secondSendNotDelivered expects the second of two sends with one message id not to have made a turn.
func (s *conversationSteps) secondSendNotDelivered() error {
	var r struct {
		Delivered *bool `json:"delivered"`
	}
	if err := s.last.JSON(&r); err != nil {
		return err
	}
	if r.Delivered == nil || *r.Delivered {
		return fail(s.last.Op, string(s.last.Body), `"delivered": false for a retry`)
	}
	return nil
}

// turnIsAnswered waits until turn N has a reply and expects its whole text.
func (s *conversationSteps) turnIsAnswered(n int64, text string) error {
	e, err := s.waitReply(n)
	if err != nil {
		return err
	}
	if e.Status != "complete" || e.text() != unescape(text) {
		f := &Failure{Op: fmt.Sprintf("the reply to turn %d", n), Got: e.String(), Want: fmt.Sprintf("complete %q", unescape(text))}
		if e.Status == "complete" {
			f.Detail = firstDifference(e.text(), unescape(text))
		}
		return f
	}
	return nil
}

// turnIsInterrupted waits until turn N is interrupted and expects its partial text, if named.
func (s *conversationSteps) turnIsInterrupted(n int64, partial string) error {
	e, err := s.waitReply(n)
	if err != nil {
		return err
	}
	if e.Status != "interrupted" || e.Text == nil || *e.Text != unescape(partial) {
		return fail(fmt.Sprintf("the reply to turn %d", n), e.String(), fmt.Sprintf("interrupted with partial %q", unescape(partial)))
	}
	return nil
}

// turnFailsWithReason waits until turn N failed and expects its reason.
func (s *conversationSteps) turnFailsWithReason(n int64, reason string) error {
	e, err := s.waitReply(n)
	if err != nil {
		return err
	}
	if e.Status != "failed" || e.Reason != reason || e.ErrorID == "" || e.Text != nil {
		return fail(fmt.Sprintf("the reply to turn %d", n), e.String()+" errorId "+e.ErrorID,
			fmt.Sprintf("failed, reason %q, an errorId and no text", reason))
	}
	return nil
}

// statusSaysAfterTurns expects the status's state and turn count, and a generation at least the one named.
func (s *conversationSteps) statusSaysAfterTurns(state string, turns int64, gen string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	var st status
	what := fmt.Sprintf("state %q, %d turns", state, turns)
	if gen != "" {
		what += ", generation >= " + gen
	}
	minGen := int64(0)
	if gen != "" {
		n, _ := atoi(gen)
		minGen = int64(n)
	}
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := s.cl.Do(ctx, s.owner(), http.MethodGet, "/conversations/"+url.PathEscape(c.id), nil, reqOpts{Quiet: true})
		if err != nil {
			if ctx.Err() != nil {
				return fail("GET /conversations/"+c.id, fmt.Sprintf("state %q, %d turns, generation %d", st.State, st.Turns, st.Generation), what)
			}
			return err
		}
		if r.Status != http.StatusOK {
			return fail(r.Op, fmt.Sprint(r.Status), "200")
		}
		if err := r.JSON(&st); err != nil {
			return err
		}
		if st.State == state && st.Turns == turns && st.Generation >= minGen {
			return nil
		}
		select {
		case <-ctx.Done():
			return fail(r.Op, fmt.Sprintf("state %q, %d turns, generation %d", st.State, st.Turns, st.Generation), what)
		case <-tick.C:
		}
	}
}

// sendsMessagesEachAccepted sends N messages as who, each expected accepted.
func (s *conversationSteps) sendsMessagesEachAccepted(who string, n int) error {
	for i := range n {
		if err := s.mustSend(who, fmt.Sprintf("message %d of %d", i+1, n), s.nextMessageID(), nil); err != nil {
			return err
		}
	}
	return nil
}

// hasStartedNamed makes who start a conversation filed under the name.
func (s *conversationSteps) hasStartedNamed(who, name string) error {
	if err := s.mustStart(who, "", nil); err != nil {
		return err
	}
	s.current.name = name
	s.convs[name] = s.current
	return nil
}

// entry is a transcript entry as the harness reads it.
type entry struct {
	Cursor          string          `json:"cursor"`
	Ord             int64           `json:"ord"`
	Turn            int64           `json:"turn"`
	Role            string          `json:"role"`
	Status          string          `json:"status"`
	Text            *string         `json:"text"`
	Reason          string          `json:"reason"`
	ErrorID         string          `json:"errorId"`
	MessageID       string          `json:"messageId"`
	EditOf          int64           `json:"editOf"`
	EditOfTurn      int64           `json:"editOfTurn"`
	Asker           json.RawMessage `json:"asker"`
	Classes         []string        `json:"classes"`
	TurnExecutionID string          `json:"turnExecutionId"`
	raw             json.RawMessage
}

func (e entry) text() string {
	if e.Text == nil {
		return ""
	}
	return *e.Text
}

func (e entry) String() string {
	s := fmt.Sprintf("#%d turn %d %s %s", e.Ord, e.Turn, e.Role, e.Status)
	if e.Text != nil {
		s += fmt.Sprintf(" %q", clip(*e.Text, 60))
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

type page struct {
	Entries    []json.RawMessage `json:"entries"`
	NextCursor string            `json:"nextCursor"`
	Done       bool              `json:"done"`
}

func decodeEntries(raws []json.RawMessage) ([]entry, error) {
	out := make([]entry, 0, len(raws))
	for _, r := range raws {
		var e entry
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, err
		}
		e.raw = r
		out = append(out, e)
	}
	return out, nil
}

// status is a conversation status as the harness reads it.
type status struct {
	ID         string `json:"id"`
	Mode       string `json:"mode"`
	State      string `json:"state"`
	Turns      int64  `json:"turns"`
	Generation int64  `json:"generation"`
}

// start starts a conversation as who; an empty id lets the system choose.
func (s *scenario) start(who, id string, extra map[string]any) (*response, error) {
	if err := s.sut(); err != nil {
		return nil, err
	}
	body := map[string]any{}
	id = s.own(id)
	if id != "" {
		body["id"] = id
	}
	for k, v := range extra {
		body[k] = v
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations", body, reqOpts{OffSpec: id != "" && !validID(id)})
	s.last = r
	if err != nil {
		return r, err
	}
	if r.Status == http.StatusCreated || r.Status == http.StatusOK {
		var st status
		if err := r.JSON(&st); err != nil {
			return r, err
		}
		c := &conv{name: st.ID, id: st.ID, owner: who}
		s.convs[st.ID] = c
		s.current = c
	}
	return r, nil
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && (r == '.' || r == '_' || r == '-')
		if !ok {
			return false
		}
	}
	return true
}

func (s *scenario) mustStart(who, id string, extra map[string]any) error {
	r, err := s.start(who, id, extra)
	if err != nil {
		return err
	}
	if r.Status != http.StatusCreated {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "201 and a new conversation")
	}
	return nil
}

// send sends a turn as who to the current conversation.
func (s *scenario) send(who, text, msgID string, extra map[string]any) (*response, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	body := map[string]any{"text": text}
	if msgID != "" {
		body["messageId"] = msgID
	}
	for k, v := range extra {
		body[k] = v
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations/"+url.PathEscape(c.id)+"/turns", body, reqOpts{})
	s.last = r
	if err != nil {
		return r, err
	}
	if r.Status == http.StatusAccepted && msgID != "" {
		s.acked = append(s.acked, ackedMsg{who: who, conv: c.id, text: text, id: msgID, extra: extra})
	}
	return r, nil
}

func (s *scenario) mustSend(who, text, msgID string, extra map[string]any) error {
	r, err := s.send(who, text, msgID, extra)
	if err != nil {
		return err
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202")
	}
	return nil
}

// history reads the whole transcript of the current conversation as who, page by page.
func (s *scenario) history(ctx context.Context, who string, quiet bool) ([]entry, error) {
	c, err := s.conv("")
	if err != nil {
		return nil, err
	}
	return s.historyOf(ctx, who, c.id, quiet)
}

// historyOf reads the whole history of the conversation id as who sees it, page by page.
func (s *scenario) historyOf(ctx context.Context, who, id string, quiet bool) ([]entry, error) {
	es, _, err := s.historyAt(ctx, who, id, reqOpts{Quiet: quiet})
	return es, err
}

// historyAt reads the whole history of the conversation id as who sees it, page by page, each
// page asked with o (o.Base: of one node), and returns the node each page's answer named
// (Loom-Node), in order.
func (s *scenario) historyAt(ctx context.Context, who, id string, o reqOpts) ([]entry, []string, error) {
	var all []json.RawMessage
	var served []string
	cursor := ""
	for range 1000 {
		q := "?limit=500"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := s.cl.Do(ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(id)+"/history"+q, nil, o)
		if err != nil {
			return nil, served, err
		}
		served = append(served, r.Header.Get(nodeHeader))
		if r.Status != http.StatusOK {
			return nil, served, fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 and a page")
		}
		var p page
		if err := r.JSON(&p); err != nil {
			return nil, served, err
		}
		all = append(all, p.Entries...)
		if p.Done {
			es, err := decodeEntries(all)
			return es, served, err
		}
		if p.NextCursor == cursor && len(p.Entries) == 0 {
			return nil, served, fail(r.Op, "a page that does not move (nextCursor "+cursor+")", "progress towards the end")
		}
		cursor = p.NextCursor
	}
	return nil, served, fail("GET history", "more than 1000 pages", "an end")
}

// waitHistory polls the history until pred holds. It fails naming what it waited for and what
// it last saw.
func (s *scenario) waitHistory(who, what string, pred func([]entry) bool) ([]entry, error) {
	ctx, cancel := s.wait()
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last []entry
	for {
		es, err := s.history(ctx, who, true)
		if err == nil {
			last = es
			if pred(es) {
				return es, nil
			}
		} else if ctx.Err() == nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return last, fail("the transcript", describeEntries(last), what)
		case <-tick.C:
		}
	}
}

func describeEntries(es []entry) string {
	if len(es) == 0 {
		return "no records"
	}
	var parts []string
	for _, e := range es {
		parts = append(parts, e.String())
	}
	return strings.Join(parts, "; ")
}

// reply returns the assistant record of turn n, if any.
func reply(es []entry, n int64) (entry, bool) {
	for _, e := range es {
		if e.Role == "assistant" && e.Turn == n {
			return e, true
		}
	}
	return entry{}, false
}

// answeredTurn finds the accepted user record with text and reports its turn and whether that
// turn has a reply yet.
func answeredTurn(es []entry, text string) (int64, bool) {
	var t int64
	for _, e := range es {
		if e.Role == "user" && e.Status == "accepted" && e.text() == text {
			t = e.Turn
		}
	}
	if t == 0 {
		return 0, false
	}
	_, ok := reply(es, t)
	return t, ok
}

// waitAnswered waits until the turn whose text is text has a reply, and returns its number.
func (s *scenario) waitAnswered(who, text string) (int64, error) {
	es, err := s.waitHistory(who, fmt.Sprintf("a reply to %q", clip(text, 40)), func(es []entry) bool {
		_, ok := answeredTurn(es, text)
		return ok
	})
	if err != nil {
		return 0, err
	}
	t, _ := answeredTurn(es, text)
	return t, nil
}

func (s *scenario) owner() string {
	if s.current != nil {
		return s.current.owner
	}
	return "alice"
}

func (s *scenario) waitReply(n int64) (entry, error) {
	es, err := s.waitHistory(s.owner(), fmt.Sprintf("a reply to turn %d", n), func(es []entry) bool {
		_, ok := reply(es, n)
		return ok
	})
	if err != nil {
		return entry{}, err
	}
	e, _ := reply(es, n)
	return e, nil
}

// statusOf reads the current conversation's status as who.
func (s *scenario) statusOf(who string) (status, error) {
	var st status
	c, err := s.conv("")
	if err != nil {
		return st, err
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(c.id), nil, reqOpts{})
	if err != nil {
		return st, err
	}
	if r.Status != http.StatusOK {
		return st, fail(r.Op, fmt.Sprint(r.Status), "200 and the status")
	}
	return st, r.JSON(&st)
}

func (s *scenario) convPath(name string) (string, *conv, error) {
	c, err := s.conv(name)
	if err != nil {
		return "", nil, err
	}
	return "/conversations/" + url.PathEscape(c.id), c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func opOf(r *response) string {
	if r == nil {
		return "the last request"
	}
	return r.Op
}

func statusOf(r *response) int {
	if r == nil {
		return 0
	}
	return r.Status
}

// commonConversationVocabulary lists the steps that several features share (conversation).
func commonConversationVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) has started a conversation$`, a.conversation.hasStartedConversation, "makes who start a conversation (server-chosen id) and makes it the current one"},
		{`^(\w[\w' ]*?) starts a conversation with id "([^"]*)"$`, a.conversation.startsConversationID, "asks to start a conversation with a caller-chosen id as who; the answer is kept"},
		{`^(\w[\w' ]*?) has had (\d+) (?:more )?turns? answered$`, a.conversation.hasHadTurnsAnswered, "sends N messages as who and waits until each turn is answered"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)"$`, a.conversation.sends, "sends the text as who and expects it accepted"},
		{`^(\w[\w' ]*?) tries to send "((?:[^"\\]|\\.)*)"$`, a.conversation.triesToSend, "sends the text as who and keeps the answer, whatever it is"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)"(?: again)? with message id "([^"]*)"$`, a.conversation.sendsWithMessageID, "sends the text as who under the given message id and expects it accepted"},
		{`^(\w[\w' ]*?) sends a message of (\d+) characters$`, a.conversation.sendsMessageOfSize, "sends a message of N characters as who and expects it accepted"},
		{`^(\w[\w' ]*?) sends an empty message$`, a.conversation.sendsEmptyMessage, "sends an empty message as who and expects it accepted"},
		{`^(\w[\w' ]*?) closes the conversation$`, a.conversation.closesConversation, "closes the current conversation as who; the answer is kept"},
		{`^the answer is (\d+)(?: with error "([^"]*)")?$`, a.conversation.answerIs, "expects the last answer's status and, when named, its error code"},
		{`^the second send was not delivered$`, a.conversation.secondSendNotDelivered, "expects the second of two sends with one message id not to have made a turn"},
		{`^turn (\d+) is answered "((?:[^"\\]|\\.)*)"$`, a.conversation.turnIsAnswered, "waits until turn N has a reply and expects its whole text"},
		{`^turn (\d+) is interrupted(?: with partial "((?:[^"\\]|\\.)*)")?$`, a.conversation.turnIsInterrupted, "waits until turn N is interrupted and expects its partial text, if named"},
		{`^turn (\d+) fails with reason "([^"]*)"$`, a.conversation.turnFailsWithReason, "waits until turn N failed and expects its reason"},
		{`^the status says the conversation is "(\w+)" after (\d+) turns?(?: in generation (\d+) or later)?$`, a.conversation.statusSaysAfterTurns, "expects the status's state and turn count, and a generation at least the one named"},
		{`^(\w[\w' ]*?) sends (\d+) messages?, each accepted$`, a.conversation.sendsMessagesEachAccepted, "sends N messages as who, each expected accepted"},
		{`^(\w[\w' ]*?) has started a conversation "([^"]*)"$`, a.conversation.hasStartedNamed, "makes who start a conversation filed under the name"},
	}
}
