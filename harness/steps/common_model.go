package steps

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
)

// modelStreamedFirstWords waits until the model has streamed the first words of its held answer.
func (s *modelSteps) modelStreamedFirstWords() error {
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
}

// modelReplies scripts the model's next answer with the text.
func (s *modelSteps) modelReplies(text string) error {
	return s.enqueue(world.Reply{Text: unescape(text)})
}

// modelRepliesTo scripts the model to answer the text when the user says the other text.
func (s *modelSteps) modelRepliesTo(text, match string) error {
	if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Text: unescape(text)}); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

// modelStreams scripts the model's next answer as the listed deltas.
func (s *modelSteps) modelStreams(parts string) error {
	return s.enqueue(world.Reply{Chunks: quoted(parts)})
}

// modelStreamsAndWaits scripts the model to stream the deltas, then wait until released.
func (s *modelSteps) modelStreamsAndWaits(parts string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	return s.enqueue(world.Reply{Chunks: quoted(parts), Hold: h})
}

// modelStreamsToAndWaits scripts the model to stream the deltas when the user says the text, then wait until released.
func (s *modelSteps) modelStreamsToAndWaits(parts, match string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Chunks: quoted(parts), Hold: h}); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

// modelReleased releases every answer of the model that waits.
func (s *modelSteps) modelReleased() error {
	for _, h := range s.holds {
		h.Release()
	}
	return nil
}

// modelFailsEvery scripts every call whose last user message holds the text to fail with the
// status and, if named, the words: a system may ask again after a failure (spec/world.md, What the
// kit counts), and a turn that must fail fails however often it asks.
func (s *modelSteps) modelFailsEvery(about string, status int, msg string) error {
	s.world.Model().EveryFor(unescape(about), world.Reply{Fail: &world.Failure{Status: status, Message: unescape(msg)}})
	return nil
}

// modelCalls scripts the model's next answer as one call of the tool with the arguments.
func (s *modelSteps) modelCalls(name, args string) error {
	return s.enqueue(world.Reply{ToolCalls: []world.ToolCall{{ID: s.callID(), Name: name, Arguments: args}}})
}

// modelCallsInARow scripts the model's next N answers as calls of the tool.
func (s *modelSteps) modelCallsInARow(name string, n int) error {
	for range n {
		if err := s.enqueue(world.Reply{ToolCalls: []world.ToolCall{{ID: s.callID(), Name: name, Arguments: "{}"}}}); err != nil {
			return err
		}
	}
	return nil
}

// modelCallsAtOnce scripts the model's next answer as the table's tool calls, all at once.
func (s *modelSteps) modelCallsAtOnce(t *godog.Table) error {
	return s.modelSaysAndCallsAtOnce("", t)
}

// modelAsked waits until the model has been asked at least N times.
func (s *modelSteps) modelAsked(n int) error {
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Model().WaitRequests(ctx, n); err != nil {
		return fail("the model", fmt.Sprintf("%d requests", s.world.Model().Count()), fmt.Sprintf("at least %d", n))
	}
	return nil
}

// modelAskedInAll expects the model to have been asked exactly N times over the whole scenario.
func (s *modelSteps) modelAskedInAll(n int) error {
	if got := s.world.Model().Count(); got != n {
		return fail("the model", fmt.Sprintf("%d requests", got), fmt.Sprintf("exactly %d", n))
	}
	return nil
}

// requestHoldsMessages expects request N to the model to hold exactly the messages of the table.
func (s *modelSteps) requestHoldsMessages(i int, t *godog.Table) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	var want, got []string
	for _, row := range t.Rows[1:] {
		content, err := s.expandMessage(unescape(row.Cells[1].Value))
		if err != nil {
			return err
		}
		if row.Cells[0].Value == "tool" {
			content = canonToolLine(content)
		}
		want = append(want, row.Cells[0].Value+": "+content)
	}
	got = renderMessages(req.Messages)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fail(fmt.Sprintf("request %d to the model (every message, in order)", i), "\n"+strings.Join(got, "\n"), "\n"+strings.Join(want, "\n"))
	}
	return nil
}

// requestHoldsSameAs expects request N to the model to hold the same messages as an earlier one.
func (s *modelSteps) requestHoldsSameAs(i, j int) error {
	a, err := s.modelRequest(j)
	if err != nil {
		return err
	}
	b, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	if describeAll(a.Messages) != describeAll(b.Messages) {
		return fail(fmt.Sprintf("request %d to the model", i), describeAll(b.Messages), "the messages of request "+fmt.Sprint(j)+": "+describeAll(a.Messages))
	}
	return nil
}

// modelKeepsStreaming scripts the model to stream, wait, then keep streaming whatever the system does.
func (s *modelSteps) modelKeepsStreaming(parts, more string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	return s.enqueue(world.Reply{Chunks: quoted(parts), Hold: h, After: []string{unescape(more)}, KeepStreaming: true})
}

// systemHungUp expects the system to have hung up on request N to the model.
func (s *modelSteps) systemHungUp(i int) error {
	ctx, cancel := s.wait()
	defer cancel()
	r, err := s.world.Model().WaitDone(ctx, i-1)
	switch {
	case err != nil:
		return fail(fmt.Sprintf("request %d to the model", i), "still open", "the system closing the request when the turn was interrupted")
	case !r.Aborted:
		return fail(fmt.Sprintf("request %d to the model", i), "read to its end", "the system closing the request when the turn was interrupted")
	}
	return nil
}

// modelWaits scripts the model's next answer to wait until released.
func (s *modelSteps) modelWaits() error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	return s.enqueue(world.Reply{Hold: h})
}

// modelRepliesAfterRelease scripts the model's next answer with the text, once released.
func (s *modelSteps) modelRepliesAfterRelease(text string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	return s.enqueue(world.Reply{Hold: h, After: []string{unescape(text)}})
}

// modelRepliesToAfterRelease scripts the model to answer the text, once released, when the user
// says the other text.
func (s *modelSteps) modelRepliesToAfterRelease(text, match string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	if err := s.world.Model().EnqueueFor(unescape(match), world.Reply{Hold: h, After: []string{unescape(text)}}); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

// lastUserMessageQuotes expects the last user message of request N to the model to quote the text and say the other.
func (s *modelSteps) lastUserMessageQuotes(i int, quote, says string) error {
	req, err := s.modelRequest(i)
	if err != nil {
		return err
	}
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			last = m.Content
		}
	}
	q := `"` + unescape(quote) + `"`
	if !strings.Contains(last, q) || !strings.HasSuffix(last, unescape(says)) || strings.Index(last, q) > strings.LastIndex(last, unescape(says)) {
		return fail(fmt.Sprintf("the last user message of request %d to the model", i), fmt.Sprintf("%q", last),
			fmt.Sprintf("the earlier words %s quoted as data, then %q", q, says))
	}
	return nil
}

// quotedLength counts the characters of the quote an edit's note holds ("[This message edits the
// user's earlier message "<quote>".]"), when the message has that form.
func quotedLength(msg string) (int, bool) {
	const lead = "[This message edits the user's earlier message "
	if !strings.HasPrefix(msg, lead) {
		return 0, false
	}
	dec := json.NewDecoder(strings.NewReader(msg[len(lead):]))
	var q string
	if err := dec.Decode(&q); err != nil {
		return 0, false
	}
	return utf8.RuneCountInString(q), true
}

// noRequestHolds expects no message of any request to the model to hold the text.
func (s *modelSteps) noRequestHolds(text string) error {
	want := unescape(text)
	reqs := s.world.Model().Requests()
	if len(reqs) == 0 {
		return fail("the model", "no request", "at least one request to inspect")
	}
	for _, req := range reqs {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, want) {
				return fail(fmt.Sprintf("request %d to the model", req.Index+1), fmt.Sprintf("a %s message holding %q", m.Role, want), "no message holding it")
			}
		}
	}
	return nil
}

// someRequestHolds expects some message of a request to the model to hold the text.
func (s *modelSteps) someRequestHolds(text string) error {
	want := unescape(text)
	for _, req := range s.world.Model().Requests() {
		for _, m := range req.Messages {
			if strings.Contains(m.Content, want) {
				return nil
			}
		}
	}
	return fail("the model", fmt.Sprintf("%d requests, none holding %q", len(s.world.Model().Requests()), want), "the asker's memory in the request")
}

var quotedRE = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// quoted returns the quoted strings of s, with \" and \n unescaped.
func quoted(s string) []string {
	var out []string
	for _, m := range quotedRE.FindAllStringSubmatch(s, -1) {
		out = append(out, unescape(m[1]))
	}
	return out
}

func unescape(s string) string {
	return strings.NewReplacer(`\"`, `"`, `\n`, "\n", `\r`, "\r", `\\`, `\`).Replace(s)
}

func (s *scenario) enqueue(r world.Reply) error {
	if err := s.world.Model().Enqueue(r); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

// describeAll renders every message of a request whole: role, content, tool calls and the call a
// tool message answers.
func describeAll(msgs []world.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "\n%s: %q", m.Role, m.Content)
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, " call %s %s(%s)", tc.ID, tc.Name, tc.Arguments)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " for %s", m.ToolCallID)
		}
	}
	return b.String()
}

// renderMessages renders each message as "role: content" the way expected tables write them: an
// assistant message that calls tools ends with " [calls NAME ARGS, ...]" (or is only that when it
// has no text), and a tool message is its JSON content, canonical, then " [for NAME]", the tool
// whose call it answers.
func renderMessages(msgs []world.Message) []string {
	names := map[string]string{}
	var out []string
	for _, m := range msgs {
		line := m.Content
		switch {
		case len(m.ToolCalls) > 0:
			var calls []string
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
				calls = append(calls, tc.Name+" "+canonJSON(tc.Arguments))
			}
			tail := "[calls " + strings.Join(calls, ", ") + "]"
			if line == "" {
				line = tail
			} else {
				line += " " + tail
			}
		case m.Role == "tool":
			name, ok := names[m.ToolCallID]
			if !ok {
				name = "an unknown call " + m.ToolCallID
			}
			line = canonJSON(m.Content) + " [for " + name + "]"
		}
		out = append(out, m.Role+": "+line)
	}
	return out
}

// canonJSON re-encodes a JSON text compactly with sorted keys; anything else is returned as is.
func canonJSON(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}

// canonToolLine canonicalizes the JSON part of an expected tool line "JSON [for NAME]".
func canonToolLine(s string) string {
	if i := strings.LastIndex(s, " [for "); i >= 0 {
		return canonJSON(s[:i]) + s[i:]
	}
	return canonJSON(s)
}

var placeholderRE = regexp.MustCompile(`\{(turn|reply) (\d+)\}|\{summary\}`)

// expandMessage resolves the placeholders of an expected message content: {turn N} is the text of
// turn N's accepted user record and {reply N} the text of its reply, both as the owner reads them
// in the history, and {summary} is the summary the scenario scripted, fenced as spec/prompt.md says.
func (s *scenario) expandMessage(content string) (string, error) {
	if !placeholderRE.MatchString(content) {
		return content, nil
	}
	var es []entry
	if strings.Contains(content, "{turn ") || strings.Contains(content, "{reply ") {
		var err error
		if es, err = s.history(s.ctx, s.owner(), true); err != nil {
			return "", err
		}
	}
	var bad error
	out := placeholderRE.ReplaceAllStringFunc(content, func(m string) string {
		if m == "{summary}" {
			return summaryOpen + s.areas.budget.summary + summaryClose
		}
		sub := placeholderRE.FindStringSubmatch(m)
		n, _ := strconv.ParseInt(sub[2], 10, 64)
		for _, e := range es {
			if e.Turn == n && (sub[1] == "turn" && e.Role == "user" && e.Status == "accepted" || sub[1] == "reply" && e.Role == "assistant") {
				return e.text()
			}
		}
		bad = fail("the history", describeEntries(es), fmt.Sprintf("a %s record of turn %d to compare the model's request with", sub[1], n))
		return m
	})
	return out, bad
}

// modelRequest returns the i-th (1-based) request the model received.
func (s *scenario) modelRequest(i int) (world.ModelRequest, error) {
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Model().WaitRequests(ctx, i); err != nil {
		return world.ModelRequest{}, fail("the model", fmt.Sprintf("%d requests", s.world.Model().Count()), fmt.Sprintf("a request number %d", i))
	}
	return s.world.Model().Requests()[i-1], nil
}

// callID is the id of the next tool call scripted into the model's answers: "call_" and its
// number. On a shared target a threads scenario's calls carry the scenario's nonce too (as its
// people do, ownPeople), so that the world tells a late request about a call of an earlier
// scenario from one of this scenario (world.Model, callIDs) and never answers it from this
// scenario's script or counts it here.
func (s *modelSteps) callID() string {
	s.calls++
	return fmt.Sprintf("call_%d", s.calls) + s.ownPeople()
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func describeMessages(msgs []world.Message) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, m.Role+": "+clip(m.Content, 80))
	}
	return strings.Join(parts, " | ")
}

// commonModelVocabulary lists the steps that several features share (model).
func commonModelVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the model has streamed its first words$`, a.model.modelStreamedFirstWords, "waits until the model has streamed the first words of its held answer"},
		{`^the model replies "((?:[^"\\]|\\.)*)"$`, a.model.modelReplies, "scripts the model's next answer with the text"},
		{`^the model replies "((?:[^"\\]|\\.)*)" to "((?:[^"\\]|\\.)*)"$`, a.model.modelRepliesTo, "scripts the model to answer the text when the user says the other text"},
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+)$`, a.model.modelStreams, "scripts the model's next answer as the listed deltas"},
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) and waits$`, a.model.modelStreamsAndWaits, "scripts the model to stream the deltas, then wait until released"},
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) to "((?:[^"\\]|\\.)*)" and waits$`, a.model.modelStreamsToAndWaits, "scripts the model to stream the deltas when the user says the text, then wait until released"},
		{`^the model is released$`, a.model.modelReleased, "releases every answer of the model that waits"},
		{`^the model fails every call about "((?:[^"\\]|\\.)*)" with status (\d+)(?: and says "((?:[^"\\]|\\.)*)")?$`, a.model.modelFailsEvery, "scripts every call whose last user message holds the text, however often a system makes it, to fail with the status and, if named, the words"},
		{`^the model calls "([\w-]+)" with (\{.*\})$`, a.model.modelCalls, "scripts the model's next answer as one call of the tool with the arguments"},
		{`^the model calls "([\w-]+)" (\d+) times in a row$`, a.model.modelCallsInARow, "scripts the model's next N answers as calls of the tool"},
		{`^the model calls at once:$`, a.model.modelCallsAtOnce, "scripts the model's next answer as the table's tool calls, all at once"},
		{`^the model has been asked (\d+) times?$`, a.model.modelAsked, "waits until the model has been asked at least N times"},
		{`^the model has been asked (\d+) times? in all$`, a.model.modelAskedInAll, "expects the model to have been asked exactly N times over the whole scenario"},
		{`^request (\d+) to the model holds the messages:$`, a.model.requestHoldsMessages, "expects request N to the model to hold exactly the messages of the table"},
		{`^request (\d+) to the model holds the same messages as request (\d+)$`, a.model.requestHoldsSameAs, "expects request N to the model to hold the same messages as an earlier one"},
		{`^the model streams ((?:"(?:[^"\\]|\\.)*"[ ,]*)+) and waits, then keeps streaming "((?:[^"\\]|\\.)*)" whatever happens$`, a.model.modelKeepsStreaming, "scripts the model to stream, wait, then keep streaming whatever the system does"},
		{`^the system hung up on request (\d+) to the model$`, a.model.systemHungUp, "expects the system to have hung up on request N to the model"},
		{`^the model waits before answering$`, a.model.modelWaits, "scripts the model's next answer to wait until released"},
		{`^the model replies "((?:[^"\\]|\\.)*)" after a release$`, a.model.modelRepliesAfterRelease, "scripts the model's next answer with the text, once released"},
		{`^the model replies "((?:[^"\\]|\\.)*)" to "((?:[^"\\]|\\.)*)" after a release$`, a.model.modelRepliesToAfterRelease, "scripts the model to answer the text, once released, when the user says the other text (nothing streams before the release)"},
		{`^the last user message of request (\d+) to the model quotes "((?:[^"\\]|\\.)*)" and says "((?:[^"\\]|\\.)*)"$`, a.model.lastUserMessageQuotes, "expects the last user message of request N to the model to quote the text and say the other"},
		{`^no message of any request to the model holds "((?:[^"\\]|\\.)*)"$`, a.model.noRequestHolds, "expects no message of any request to the model to hold the text"},
		{`^some message of a request to the model holds "((?:[^"\\]|\\.)*)"$`, a.model.someRequestHolds, "expects some message of a request to the model to hold the text"},
	}
}
