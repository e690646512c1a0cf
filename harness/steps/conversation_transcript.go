package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// putsRawEnvelope puts the raw JSON envelope into the conversation's inbox as who.
func (s *transcriptSteps) putsRawEnvelope(who, payload string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	body := map[string]any{"messageId": s.nextMessageID(), "payload": jsonRaw(payload)}
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/runtime/executions/"+url.PathEscape(c.id)+"/messages", body, reqOpts{})
	s.last = r
	if err != nil {
		return err
	}
	if r.Status == http.StatusNotFound && !s.run.Door {
		return &HarnessError{Err: fmt.Errorf("%w: the system has no runtime door", ErrNotApplicable)}
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202")
	}
	return nil
}

// userRecordHolds expects turn N's user record to hold exactly N characters.
func (s *transcriptSteps) userRecordHolds(n int64, size int) error {
	es, err := s.history(s.ctx, s.owner(), false)
	if err != nil {
		return err
	}
	for _, e := range es {
		if e.Role == "user" && e.Turn == n && e.Status == "accepted" {
			if got := len([]rune(e.text())); got != size {
				return fail(fmt.Sprintf("the user record of turn %d", n), fmt.Sprintf("%d characters", got), fmt.Sprintf("%d, exactly as sent", size))
			}
			return nil
		}
	}
	return fail("the history", describeEntries(es), fmt.Sprintf("an accepted user record of turn %d", n))
}

// whiteSpace is every code point of Unicode's White_Space property, the characters spec/http.md
// lists as those a blank text is made of.
var whiteSpace = []rune{
	0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
	0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
}

// blankText is the i-th blank text the steps send: each White_Space character alone, then
// runs of several of them, in turn.
func blankText(i int) string {
	n := len(whiteSpace)
	if i%(2*n) < n {
		return string(whiteSpace[i%n])
	}
	return string(whiteSpace[i%n]) + string(whiteSpace[(i*7+3)%n]) + string(whiteSpace[(i*11+5)%n])
}

// sendsRejectable sends N blank or oversized messages as who, each accepted.
func (s *transcriptSteps) sendsRejectable(who string, n int, kind string) error {
	limit, err := s.maxTurnChars()
	if err != nil {
		return err
	}
	for i := range n {
		text := blankText(i)
		if kind == "oversized" {
			text = strings.Repeat("x", limit+1+i%3)
		}
		if err := s.mustSend(who, text, "", nil); err != nil {
			return err
		}
	}
	return nil
}

// sendsRepeated sends unit repeated n times, then tail, as one message, as who, and expects it
// accepted. Both strings take Go escapes, so a combining mark (\u0301) can be written visibly.
func (s *transcriptSteps) sendsRepeated(who, unit string, n int, tail string) error {
	text, err := repeatedText(unit, n, tail)
	if err != nil {
		return err
	}
	return s.mustSend(who, text, s.nextMessageID(), nil)
}

// contractMessageID is the messageId the contract allows (spec/http.md, Conversations).
var contractMessageID = regexp.MustCompile(`^[\x20-\x7E]{1,128}$`)

// repeatedText is unit repeated n times followed by tail, each read with Go's string escapes.
func repeatedText(unit string, n int, tail string) (string, error) {
	u, err := strconv.Unquote(`"` + unit + `"`)
	if err != nil {
		return "", harnessErr("cannot read the text %q: %v", unit, err)
	}
	t, err := strconv.Unquote(`"` + tail + `"`)
	if err != nil {
		return "", harnessErr("cannot read the text %q: %v", tail, err)
	}
	return strings.Repeat(u, n) + t, nil
}

// wholeHistoryIs waits until the history is exactly the listed records, in order.
func (s *transcriptSteps) wholeHistoryIs(spec string) error {
	want, err := expectedHistory(spec)
	if err != nil {
		return err
	}
	es, err := s.waitHistory(s.owner(), fmt.Sprintf("%d records", len(want)), func(es []entry) bool { return len(es) >= len(want) })
	if err != nil {
		return err
	}
	var got []string
	for _, e := range es {
		got = append(got, historyLine(e.Ord, e.Turn, e.Role, e.Status, e.Reason, e.Text))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fail("the history of "+s.current.id+" (ord | turn | role | status | reason | text)", clip(strings.Join(got, "\n"), 3000), clip(strings.Join(want, "\n"), 3000))
	}
	return nil
}

// statusIs expects the status of who's conversation: state, turn, generation and owner.
func (s *transcriptSteps) statusIs(who, state string, turns, gen int64, owner string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	r, err := s.cl.Do(s.ctx, who, http.MethodGet, "/conversations/"+url.PathEscape(c.id), nil, reqOpts{})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 and the status")
	}
	// Every member the contract documents, compared as one object.
	var got map[string]json.RawMessage
	if err := r.JSON(&got); err != nil {
		return err
	}
	documented := map[string]json.RawMessage{}
	for _, k := range []string{"id", "mode", "state", "turns", "generation", "owner"} {
		if v, ok := got[k]; ok {
			documented[k] = v
		}
	}
	gb, _ := json.Marshal(documented)
	var g any
	_ = json.Unmarshal(gb, &g)
	gb, _ = json.Marshal(g) // canonical: keys sorted, no spacing
	wb, _ := json.Marshal(map[string]any{"id": c.id, "mode": "owner", "state": state, "turns": turns, "generation": gen, "owner": identityJSON(owner)})
	var w any
	_ = json.Unmarshal(wb, &w)
	wb, _ = json.Marshal(w)
	if string(gb) != string(wb) {
		return fail(r.Op, string(gb), string(wb))
	}
	return nil
}

var (
	historyRejected = regexp.MustCompile(`^(\d+) rejected "(\w[\w-]*)"$`)
	historyTurn     = regexp.MustCompile(`^turn (\d+) "((?:[^"\\]|\\.)*)" answered$`)
)

// expectedHistory expands a history written as items joined by ", then ": `<n> rejected
// "<reason>"` (n rejected user records of turn 0 with that reason and no text) and `turn <n>
// "<text>" answered` (the accepted user record of turn n with that text, then the model's
// complete reply "re: <text>"). It renders one line per record, ords counted from 1.
func expectedHistory(spec string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(spec, ", then ") {
		if m := historyRejected.FindStringSubmatch(item); m != nil {
			n, _ := strconv.Atoi(m[1])
			for range n {
				out = append(out, historyLine(int64(len(out)+1), 0, "user", "rejected", m[2], nil))
			}
			continue
		}
		if m := historyTurn.FindStringSubmatch(item); m != nil {
			turn, _ := strconv.ParseInt(m[1], 10, 64)
			text, reply := unescape(m[2]), "re: "+unescape(m[2])
			out = append(out, historyLine(int64(len(out)+1), turn, "user", "accepted", "", &text))
			out = append(out, historyLine(int64(len(out)+1), turn, "assistant", "complete", "", &reply))
			continue
		}
		return nil, harnessErr("cannot read the history item %q", item)
	}
	return out, nil
}

func historyLine(ord, turn int64, role, status, reason string, text *string) string {
	t := "-"
	if text != nil {
		t = strconv.Quote(*text)
	}
	return fmt.Sprintf("%d | %d | %s | %s | %s | %s", ord, turn, role, status, reason, t)
}

// maxTurnChars is the conversation's maxTurnChars: the configured one, else the default the
// configuration schema writes.
func (s *scenario) maxTurnChars() (int, error) {
	if n := s.cfg.Conversation.MaxTurnChars; n > 0 {
		return n, nil
	}
	n, err := settingDefaultInt("conversation.maxTurnChars")
	return int(n), err
}

// conversationTranscriptVocabulary lists the steps of features/conversation/transcript.feature.
func conversationTranscriptVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^(\w[\w' ]*?) puts (\{.*\}) into the conversation's inbox$`, a.transcript.putsRawEnvelope, "puts the raw JSON envelope into the conversation's inbox as who"},
		{`^the user record of turn (\d+) holds (\d+) characters$`, a.transcript.userRecordHolds, "expects turn N's user record to hold exactly N characters"},
		{`^(\w[\w' ]*?) sends (\d+) (blank|oversized) messages?$`, a.transcript.sendsRejectable, "sends N blank or oversized messages as who, each accepted"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" (\d+) times(?: and then "((?:[^"\\]|\\.)*)")?$`, a.transcript.sendsRepeated, "sends the text (Go escapes such as \\u0301 allowed) repeated N times, then the tail, as one message, as who, and expects it accepted"},
		{`^the whole history is: (.+)$`, a.transcript.wholeHistoryIs, "waits until the history is exactly the listed records, in order"},
		{`^the status of (\w[\w' ]*?)'s conversation is (open|closed) at turn (\d+), generation (\d+), owned by (\w[\w' ]*?)$`, a.transcript.statusIs, "expects the status of who's conversation: state, turn, generation and owner"},
	}
}
