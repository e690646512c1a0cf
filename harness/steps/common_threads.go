package steps

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// threadsSteps play the peer box and judge agent conversations (profile threads, spec/peer.md).
type threadsSteps struct {
	*scenario
	// bound are the values the scenario knows by placeholder: "thread A", "message <text>",
	// "ac A" (the agent conversation of thread A), "conv alice planner", "task T", "run T".
	bound map[string]string
	// pairs are each thread's roles: the box's role and the peer's.
	pairs map[string]threadPair
	// sent is the last text the kit sent as the peer.
	sent *world.PeerText
	// missing asks the last request again at an id nothing holds, as the same caller.
	missing func() (*response, error)
	// holds are the peer's answers that wait for a release.
	holds []*world.Hold
}

// threadPair is the box's role and the peer's role of one thread.
type threadPair struct{ role, peerRole string }

// ready registers the threads people's tokens with the identity service.
func (s *threadsSteps) ready() {
	if s.bound == nil {
		s.bound, s.pairs = map[string]string{}, map[string]threadPair{}
	}
}

// connected gives the box the roles, the member and the connection lab, and registers the tokens.
func (s *threadsSteps) connected() error {
	s.ready()
	for name, p := range world.PeerPeople {
		if err := s.world.Identity().Add(world.PeerToken(name), p); err != nil {
			return harnessErr("register %s: %v", name, err)
		}
	}
	if s.run.RemoteCfg != nil || s.started {
		return nil
	}
	return s.configure(func(c *sutconfig.SUTConfig) {
		if len(c.Threads.Connections) == 0 {
			c.Threads = s.world.Peer().ThreadsConfig()
		}
	})
}

// queueBound configures the bound of the texts waiting to be sent on the connection.
func (s *threadsSteps) queueBound(n int) error {
	return s.configure(func(c *sutconfig.SUTConfig) {
		for i := range c.Threads.Connections {
			if c.Threads.Connections[i].ID == world.PeerConnection {
				c.Threads.Connections[i].Queue = n
			}
		}
	})
}

// peerAnswers sends a text as the peer on a thread the box opened.
func (s *threadsSteps) peerAnswers(txt, alias string) error {
	s.ready()
	p, ok := s.pairs[alias]
	if !ok {
		return harnessErr("thread %q is not known yet", alias)
	}
	return s.peerSends(txt, p.peerRole, p.role, alias)
}

// answerAck expects exactly 200 {ack, thread, message} of the kit's last text.
func (s *threadsSteps) answerAck() error {
	if s.sent == nil {
		return harnessErr("the peer has sent nothing yet")
	}
	return s.exactly(http.StatusOK, map[string]any{"ack": true, "thread": s.sent.Thread, "message": s.sent.Message})
}

// answerReason expects exactly the status with {"reason": R}.
func (s *threadsSteps) answerReason(status int, reason string) error {
	return s.exactly(status, map[string]string{"reason": reason})
}

// answerUniform404 expects 404, equal to the answer at an id nothing holds.
func (s *threadsSteps) answerUniform404() error {
	r, err := s.lastAnswer()
	if err != nil {
		return err
	}
	if s.missing == nil {
		return harnessErr("the last request has no missing-id counterpart")
	}
	m, err := s.missing()
	if err != nil {
		return err
	}
	want := fmt.Sprintf("404 %s", canonJSON(string(m.Body)))
	got := fmt.Sprintf("%d %s", r.Status, canonJSON(string(r.Body)))
	if m.Status != http.StatusNotFound {
		return fail(m.Op, fmt.Sprintf("%d", m.Status), "404 at an id nothing holds")
	}
	if got != want {
		return fail(r.Op, got, "the answer at an id nothing holds: "+want)
	}
	return nil
}

// saysToRole runs a turn in who's conversation with the role.
func (s *threadsSteps) saysToRole(who, txt, role string) error {
	s.ready()
	key := "conv " + who + " " + role
	if _, ok := s.bound[key]; !ok {
		if err := s.opensConversation(who, role); err != nil {
			return err
		}
	}
	r, err := s.request(who, http.MethodPost, "/roles/"+role+"/conversation/messages", map[string]string{"text": unescape(txt)}, reqOpts{})
	if err != nil {
		return err
	}
	var body struct {
		Conversation string `json:"conversation"`
		Turn         any    `json:"turn"`
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202 {conversation, turn}")
	}
	if err := r.JSON(&body); err != nil {
		return err
	}
	if body.Conversation != s.bound[key] || body.Turn == nil {
		return fail(r.Op, string(r.Body), fmt.Sprintf("conversation %s and its turn", s.bound[key]))
	}
	return nil
}

// ownConversation reads or deletes who's conversation with the role.
func (s *threadsSteps) ownConversation(who, op, role string) error {
	method := http.MethodGet
	if op == "deletes" {
		method = http.MethodDelete
	}
	s.probe(who, method, "/roles/no-such-role/conversation", nil)
	_, err := s.request(who, method, "/roles/"+role+"/conversation", nil, reqOpts{})
	return err
}

// different expects the two remembered ids to differ.
func (s *threadsSteps) different(kind, a, b string) error {
	s.ready()
	prefix := map[string]string{"conversations": "conv ", "threads": "thread ", "tasks": "task "}[kind]
	x, ok1 := s.bound[prefix+a]
	y, ok2 := s.bound[prefix+b]
	if !ok1 || !ok2 {
		return harnessErr("%s %q and %q must both be known", kind, a, b)
	}
	if x == y {
		return fail(kind+" "+a+" and "+b, "the same id "+x, "two different ids")
	}
	return nil
}

// modelSendsOnce scripts one call of peer.send, then the words, for the text.
func (s *threadsSteps) modelSendsOnce(match, args, reply string) error {
	return s.script(unescape(match), s.sendCall(args), world.Reply{Text: unescape(reply)})
}

// modelSendsTwice scripts two calls of peer.send, then the words, for the text.
func (s *threadsSteps) modelSendsTwice(match, a, b, reply string) error {
	return s.script(unescape(match), s.sendCall(a), s.sendCall(b), world.Reply{Text: unescape(reply)})
}

// modelRequestFor expects the Nth request for the text to hold exactly the table's messages.
func (s *threadsSteps) modelRequestFor(n int, txt string, t *godog.Table) error {
	s.ready()
	txt = unescape(txt)
	var req world.ModelRequest
	ok, _ := s.poll(1, func() (bool, error) {
		rs := s.requestsFor(txt)
		if len(rs) >= n {
			req = rs[n-1]
			return true, nil
		}
		return false, nil
	})
	if !ok {
		return fail("the model", fmt.Sprintf("%d requests for %q", len(s.requestsFor(txt)), txt), fmt.Sprintf("request %d for it", n))
	}
	var want []string
	for _, row := range t.Rows[1:] {
		content := unescape(row.Cells[1].Value)
		if row.Cells[0].Value == "tool" {
			content = canonToolLine(content)
		}
		want = append(want, row.Cells[0].Value+": "+content)
	}
	got := strings.Join(renderMessages(req.Messages), "\n")
	if !s.match(strings.Join(want, "\n"), got) {
		return fail(fmt.Sprintf("request %d to the model for %q (every message, in order)", n, txt), "\n"+got, "\n"+s.substitute(strings.Join(want, "\n")))
	}
	return nil
}

// sendResults expects the tool results of the turn for the text to be N sent and M errors.
func (s *threadsSteps) sendResults(txt string, sent, errs int, reason string) error {
	txt = unescape(txt)
	var tools []world.Message
	ok, _ := s.poll(3, func() (bool, error) {
		for _, r := range s.requestsFor(txt) {
			tools = tools[:0]
			for _, m := range r.Messages {
				if m.Role == "tool" {
					tools = append(tools, m)
				}
			}
			if len(tools) >= sent+errs {
				return true, nil
			}
		}
		return false, nil
	})
	if !ok {
		return fail("the model", fmt.Sprintf("%d tool results for %q", len(tools), txt), fmt.Sprintf("%d", sent+errs))
	}
	nSent, nErr := 0, 0
	var others []string
	for _, m := range tools {
		var got map[string]any
		_ = json.Unmarshal([]byte(m.Content), &got)
		id, _ := got["agentConversation"].(string)
		switch {
		case len(got) == 2 && got["sent"] == true && id != "":
			nSent++
		case canonJSON(m.Content) == `{"error":"`+reason+`"}`:
			nErr++
		default:
			others = append(others, m.Content)
		}
	}
	if nSent != sent || nErr != errs || len(others) > 0 {
		return fail(fmt.Sprintf("the peer.send results for %q", txt), fmt.Sprintf("%d sent, %d %q and %d others %v", nSent, nErr, reason, len(others), others),
			fmt.Sprintf("exactly %d sent and %d %q", sent, errs, reason))
	}
	return nil
}

// sleep waits the seconds, at least 3 (a wait for something not to happen).
func (s *threadsSteps) sleep(secs int) error {
	if secs < 3 {
		return harnessErr("a wait for nothing to happen lasts at least 3 seconds")
	}
	select {
	case <-time.After(time.Duration(secs) * time.Second):
		return nil
	case <-s.ctx.Done():
		return harnessErr("the run was stopped")
	}
}

// modelAskedFor expects exactly N requests for the text so far. The scenarios ask it once a
// later turn of the same agent conversation has completed (the sentinel): the conversation has
// one turn at a time, and the next turn takes every text waiting then (spec/peer.md,
// Receiving), so every turn that took the text, and every request such a turn made, came before
// the sentinel's turn.
func (s *threadsSteps) modelAskedFor(n int, txt string) error {
	if got := len(s.requestsFor(unescape(txt))); got != n {
		return fail("the model", fmt.Sprintf("%d requests for %q", got, txt), fmt.Sprintf("exactly %d", n))
	}
	return nil
}

// peerReceived waits until the peer has received N requests.
func (s *threadsSteps) peerReceived(n int) error {
	if err := s.sut(); err != nil {
		return err
	}
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.Peer().WaitDeliveries(ctx, n); err != nil {
		return fail("the peer", fmt.Sprintf("%d texts", s.world.Peer().Count()), fmt.Sprintf("%d texts", n))
	}
	return nil
}

// peerStillReceived waits, then expects exactly N requests at the peer.
func (s *threadsSteps) peerStillReceived(secs, n int) error {
	if err := s.sleep(secs); err != nil {
		return err
	}
	if got := s.world.Peer().Count(); got != n {
		return fail("the peer", fmt.Sprintf("%d texts: %s", got, s.describeDeliveries()), fmt.Sprintf("exactly %d", n))
	}
	return nil
}

// receivedExactly expects the Nth request at the peer to carry the send token and the body.
func (s *threadsSteps) receivedExactly(n int, doc *godog.DocString) error {
	s.ready()
	if err := s.peerReceived(n); err != nil {
		return err
	}
	d := s.world.Peer().Deliveries()[n-1]
	op := fmt.Sprintf("text %d the peer received", n)
	if d.Authorization != "Bearer "+world.PeerSendToken {
		return fail(op, "Authorization "+d.Authorization, "Bearer and the send token")
	}
	if d.Problem != "" {
		return fail(op, d.Problem+": "+string(d.Body), "a text within spec/peer.md")
	}
	want := canonJSON(strings.TrimSpace(doc.Content))
	if !s.match(want, canonJSON(string(d.Body))) {
		return fail(op, string(d.Body), s.substitute(want))
	}
	for alias, id := range s.bound {
		if a, ok := strings.CutPrefix(alias, "thread "); ok && id == d.Text.Thread {
			if _, known := s.pairs[a]; !known {
				s.pairs[a] = threadPair{role: d.Text.From, peerRole: d.Text.To}
			}
		}
	}
	return nil
}

// seesAgentConversation reads the thread's agent conversation as who until it equals the body.
func (s *threadsSteps) seesAgentConversation(who, alias string, doc *godog.DocString) error {
	id, err := s.thread(alias)
	if err != nil {
		return err
	}
	want := canonJSON(strings.TrimSpace(doc.Content))
	if !strings.HasPrefix(want, "{") {
		return harnessErr("the expected agent conversation is not JSON: %s", doc.Content)
	}
	var last *response
	ok, err := s.poll(1, func() (bool, error) {
		r, err := s.request(who, http.MethodGet, byThread(id), nil, reqOpts{Quiet: true})
		if err != nil {
			return false, err
		}
		last = r
		return r.Status == http.StatusOK && s.match(want, canonJSON(string(r.Body))), nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return fail(last.Op, fmt.Sprintf("%d %s", last.Status, last.Body), "200 "+s.substitute(want))
	}
	return nil
}

// historyAliasRE finds the quoted thread aliases of a list.
var historyAliasRE = regexp.MustCompile(`"([^"]+)"`)

// agentConv is the part of an agent conversation the steps judge.
type agentConv struct {
	Root struct {
		Kind string `json:"kind"`
	} `json:"root"`
	Texts []struct {
		Dir     string `json:"dir"`
		Message string `json:"message"`
		Text    string `json:"text"`
		State   string `json:"state"`
		Reason  string `json:"reason"`
	} `json:"texts"`
	Turns []struct {
		Turn   int      `json:"turn"`
		Status string   `json:"status"`
		Texts  []string `json:"texts"`
	} `json:"turns"`
}

// nothingStored expects no agent conversation on the thread, as the owner reads it.
func (s *threadsSteps) nothingStored(alias string) error {
	s.ready()
	id, ok := s.bound["thread "+alias]
	if !ok {
		id = alias
	}
	s.probe("olga", http.MethodGet, byThread(randomID("t_", 18)), nil)
	if _, err := s.request("olga", http.MethodGet, byThread(id), nil, reqOpts{}); err != nil {
		return err
	}
	return s.answerUniform404()
}

// turnIs waits until turn N of the thread's agent conversation has the status.
func (s *threadsSteps) turnIs(n int, alias, status string) error {
	var seen string
	ok, err := s.poll(1, func() (bool, error) {
		ac, err := s.agentConversation(alias)
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("%+v", ac.Turns)
		return len(ac.Turns) >= n && ac.Turns[n-1].Turn == n && ac.Turns[n-1].Status == status, nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return fail(fmt.Sprintf("the turns of thread %s", alias), seen, fmt.Sprintf("turn %d %s", n, status))
	}
	return nil
}

// turnsEndWith expects the thread's agent conversation to have exactly n turns, the last of which
// took the one text. The scenarios ask it once that turn has completed, the text being a
// sentinel sent after something that must not start a turn (a stop, an unpause, a repeat): the
// conversation has one turn at a time, and the next turn takes every text waiting then
// (spec/peer.md, Receiving), so any other turn came before the sentinel's and is counted, and a
// text wrongly left waiting would have been taken with it.
func (s *threadsSteps) turnsEndWith(alias string, n int, txt string) error {
	msg, ok := s.bound["message "+unescape(txt)]
	if !ok {
		return harnessErr("the peer did not send %q", txt)
	}
	if n < 1 {
		return harnessErr("a last turn needs at least 1 turn")
	}
	ac, err := s.agentConversation(alias)
	if err != nil {
		return err
	}
	if len(ac.Turns) != n || !slices.Equal(ac.Turns[n-1].Texts, []string{msg}) {
		return fail(fmt.Sprintf("the turns of thread %s", alias), fmt.Sprintf("%+v", ac.Turns),
			fmt.Sprintf("exactly %d, the last of which took only %s", n, msg))
	}
	return nil
}

// textIs waits until the text of the thread's agent conversation has the state and reason.
func (s *threadsSteps) textIs(txt, alias, state, reason string) error {
	txt = unescape(txt)
	var seen string
	ok, err := s.poll(1, func() (bool, error) {
		ac, err := s.agentConversation(alias)
		if err != nil {
			return false, err
		}
		seen = fmt.Sprintf("%+v", ac.Texts)
		for _, t := range ac.Texts {
			if t.Text == txt && t.State == state && t.Reason == reason {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	if !ok {
		want := state
		if reason != "" {
			want += " with reason " + reason
		}
		return fail(fmt.Sprintf("the texts of thread %s", alias), seen, fmt.Sprintf("%q %s", txt, want))
	}
	return nil
}

// answerExactly expects the last answer to be the status and the body (placeholders bind).
func (s *threadsSteps) answerExactly(status int, body string) error {
	r, err := s.lastAnswer()
	if err != nil {
		return err
	}
	want := fmt.Sprintf("%d %s", status, canonJSON(body))
	if !s.match(want, fmt.Sprintf("%d %s", r.Status, canonJSON(string(r.Body)))) {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, r.Body), s.substitute(want))
	}
	return nil
}

// placeholderThreadsRE finds the placeholders of a template: {thread A}, {message <text>},
// {ac A}, {conv <who> <role>}, {task T}, {run T} and {any}.
var placeholderThreadsRE = regexp.MustCompile(`\{(thread|message|ac|conv|task|run|any)(?: ([^{}"]+))?\}`)

// fieldAcceptToken is the token the peer presents on the second connection, field.
const fieldAcceptToken = "field-accept-4Kp9w"

// commonThreadsVocabulary lists the steps that several features share (threads).
func commonThreadsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the box is connected to the peer "lab"$`, a.threads.connected, "gives the box the roles planner and scout, the member dana and the connection lab to the kit's peer (owner olga), and registers their tokens"},
		{`^the connection "lab" holds at most (\d+) waiting texts$`, a.threads.queueBound, "configures the bound of the texts waiting to be sent on the connection"},
		{`^the peer answers ` + quotedPat + ` on thread "([^"]+)"$`, a.threads.peerAnswers, "sends a text as the peer on a thread the box opened, from the peer's role of it to the box's"},
		{`^the answer is 200 ack$`, a.threads.answerAck, "expects the last answer to be exactly 200 {ack, thread, message} of the kit's last text"},
		{`^the answer is (\d+) "([a-z-]+)"$`, a.threads.answerReason, "expects the last answer to be exactly the status with {\"reason\": R}"},
		{`^the answer is the uniform 404$`, a.threads.answerUniform404, "expects the last answer to be 404 and equal to what the same request gets at an id nothing holds"},
		{`^` + namePat + ` says ` + quotedPat + ` to "([a-z0-9-]+)"$`, a.threads.saysToRole, "runs a turn in who's conversation with the role"},
		{`^` + namePat + ` (reads|deletes) (?:her|his) conversation with "([a-z0-9-]+)"$`, a.threads.ownConversation, "reads or deletes who's conversation with the role"},
		{`^(conversations|threads|tasks) "([^"]+)" and "([^"]+)" are different$`, a.threads.different, "expects the two remembered ids to differ"},
		{`^the model answers ` + quotedPat + ` by sending (\{[^{}]*\}), then says ` + quotedPat + `$`, a.threads.modelSendsOnce, "scripts the model to answer the text with one call of peer.send, then with the words"},
		{`^the model answers ` + quotedPat + ` by sending (\{[^{}]*\}) and (\{[^{}]*\}), then says ` + quotedPat + `$`, a.threads.modelSendsTwice, "scripts the model to answer the text with two calls of peer.send one after the other, then with the words"},
		{`^model request (\d+) for ` + quotedPat + ` holds exactly:$`, a.threads.modelRequestFor, "expects the Nth request to the model whose last user message is the text to hold exactly the table's messages (placeholders substituted)"},
		{`^the peer.send results for ` + quotedPat + ` are (\d+) sent and (\d+) "([a-z-]+)"$`, a.threads.sendResults, "expects the tool results of the turn for the text to be exactly N sent and M errors of the reason, in any order"},
		{`^the model has been asked (\d+) times? for ` + quotedPat + `$`, a.threads.modelAskedFor, "expects exactly N requests to the model so far whose last user message is the text (after a sentinel: a later turn of the same agent conversation that completed)"},
		{`^the peer has received (\d+) texts?$`, a.threads.peerReceived, "waits until the peer has received N requests"},
		{`^after (\d+) seconds the peer has still received (\d+) texts?$`, a.threads.peerStillReceived, "waits the seconds, then expects the peer to have received exactly N requests"},
		{`^received text (\d+) is exactly:$`, a.threads.receivedExactly, "expects the Nth request the peer received to carry the send token and exactly the body (placeholders bind thread and message aliases)"},
		{`^` + namePat + ` sees the agent conversation of thread "([^"]+)" as:$`, a.threads.seesAgentConversation, "reads the agent conversation of the thread as who until it equals the body (placeholders substituted)"},
		{`^nothing is stored on thread "([^"]+)"$`, a.threads.nothingStored, "expects no agent conversation on the thread (an alias, or an id as written): the owner gets the 404 of a thread never used"},
		{`^turn (\d+) of thread "([^"]+)" is (running|completed|stopped|failed|ended)$`, a.threads.turnIs, "waits until turn N of the thread's agent conversation has the status"},
		{`^thread "([^"]+)" has exactly (\d+) turns?, the last of which took only ` + quotedPat + `$`, a.threads.turnsEndWith, "expects the thread's agent conversation to have exactly N turns, the last of which took the one text (a sentinel: the turn of a later text)"},
		{`^the text ` + quotedPat + ` on thread "([^"]+)" is (queued|sent|received|failed)(?: with "([a-z-]+)")?$`, a.threads.textIs, "waits until the text of the thread's agent conversation has the state (and reason)"},
		{`^the answer is exactly (\d+) (\{.*\})$`, a.threads.answerExactly, "expects the last answer to be exactly the status and the body (placeholders substituted or bound)"},
	}
}
