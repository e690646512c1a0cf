package harness

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
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
	if s.run.remoteCfg != nil || s.started {
		return nil
	}
	return s.configure(func(c *spec.SUTConfig) {
		if len(c.Threads.Connections) == 0 {
			c.Threads = s.world.Peer().ThreadsConfig()
		}
	})
}

// queueBound configures the bound of the texts waiting to be sent on the connection.
func (s *threadsSteps) queueBound(n int) error {
	return s.configure(func(c *spec.SUTConfig) {
		for i := range c.Threads.Connections {
			if c.Threads.Connections[i].ID == world.PeerConnection {
				c.Threads.Connections[i].Queue = n
			}
		}
	})
}

// personJSON is who's identity as the wire names it.
func (s *threadsSteps) personJSON(who string) (map[string]string, error) {
	p, ok := world.PeerPeople[who]
	if !ok {
		if p, ok = s.principal(who); !ok {
			return nil, harnessErr("unknown person %q", who)
		}
	}
	return map[string]string{"tenant": p.Tenant, "actor": p.Actor}, nil
}

// probe remembers how to ask the same request at an id nothing holds.
func (s *threadsSteps) probe(who, method, path string, body any) {
	s.missing = func() (*response, error) {
		return s.ask(who, method, path, body, reqOpts{})
	}
}

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// postText posts a text to the box as the peer with the accept token.
func (s *threadsSteps) postText(body any, raw []byte, auth string) (*response, error) {
	s.ready()
	h := map[string]string{}
	if auth != "" {
		h["Authorization"] = auth
	}
	// The kit sends malformed and unauthorized texts on purpose: the request is not checked
	// against the contract, the answer is.
	return s.request("", http.MethodPost, world.PathPeerTexts, body, reqOpts{offSpec: true, headers: h, rawBody: raw})
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

// peerSendsAgain sends the kit's last text again.
func (s *threadsSteps) peerSendsAgain() error {
	if s.sent == nil {
		return harnessErr("the peer has sent nothing yet")
	}
	_, err := s.postText(*s.sent, nil, "Bearer "+world.PeerAcceptToken)
	return err
}

func (s *threadsSteps) lastAnswer() (*response, error) {
	if s.last == nil {
		return nil, harnessErr("no answer yet")
	}
	return s.last, nil
}

// exactly expects the last answer to be the status and the JSON body.
func (s *threadsSteps) exactly(status int, body any) error {
	r, err := s.lastAnswer()
	if err != nil {
		return err
	}
	b, _ := json.Marshal(body)
	want := fmt.Sprintf("%d %s", status, canonJSON(string(b)))
	got := fmt.Sprintf("%d %s", r.status, canonJSON(string(r.body)))
	if got != want {
		return fail(r.op, got, want)
	}
	return nil
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
	want := fmt.Sprintf("404 %s", canonJSON(string(m.body)))
	got := fmt.Sprintf("%d %s", r.status, canonJSON(string(r.body)))
	if m.status != http.StatusNotFound {
		return fail(m.op, fmt.Sprintf("%d", m.status), "404 at an id nothing holds")
	}
	if got != want {
		return fail(r.op, got, "the answer at an id nothing holds: "+want)
	}
	return nil
}

// answerConnection expects exactly 200 {"id": "lab", "state": S}.
func (s *threadsSteps) answerConnection(state string) error {
	return s.exactly(http.StatusOK, map[string]string{"id": world.PeerConnection, "state": state})
}

// isPerson reports whether raw names who: their identity object, or their actor.
func (s *threadsSteps) isPerson(raw json.RawMessage, who string) bool {
	p, err := s.personJSON(who)
	if err != nil {
		return false
	}
	var actor string
	if json.Unmarshal(raw, &actor) == nil {
		return actor == p["actor"]
	}
	var got map[string]any
	if json.Unmarshal(raw, &got) != nil {
		return false
	}
	return got["actor"] == p["actor"] && (got["tenant"] == nil || got["tenant"] == p["tenant"])
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
	if r.status != http.StatusAccepted {
		return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "202 {conversation, turn}")
	}
	if err := r.json(&body); err != nil {
		return err
	}
	if body.Conversation != s.bound[key] || body.Turn == nil {
		return fail(r.op, string(r.body), fmt.Sprintf("conversation %s and its turn", s.bound[key]))
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

// members turns "bob, carol" into identities.
func (s *threadsSteps) members(list string) ([]map[string]string, error) {
	out := []map[string]string{}
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		p, err := s.personJSON(n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// createTask creates a task (a subtask when parent is set) and remembers its id.
func (s *threadsSteps) createTask(who, alias, title, list, parent string) error {
	ms, err := s.members(list)
	if err != nil {
		return err
	}
	body := map[string]any{"title": unescape(title), "members": ms}
	if parent != "" {
		body["parent"] = parent
	}
	r, err := s.request(who, http.MethodPost, "/tasks", body, reqOpts{})
	if err != nil {
		return err
	}
	var got struct {
		ID string `json:"id"`
	}
	if r.status != http.StatusCreated {
		return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "201 with the task's id")
	}
	if err := r.json(&got); err != nil {
		return err
	}
	if got.ID == "" {
		return fail(r.op, string(r.body), "the task's id")
	}
	s.bound["task "+alias] = got.ID
	return nil
}

// createsTask creates a task with the title and members.
func (s *threadsSteps) createsTask(who, alias, title, list string) error {
	s.ready()
	return s.createTask(who, alias, title, list, "")
}

// createsSubtask creates a subtask of the task.
func (s *threadsSteps) createsSubtask(who, alias, parent, title string) error {
	id, err := s.taskID(parent)
	if err != nil {
		return err
	}
	return s.createTask(who, alias, title, "", id)
}

func (s *threadsSteps) taskID(alias string) (string, error) {
	s.ready()
	id, ok := s.bound["task "+alias]
	if !ok {
		return "", harnessErr("unknown task %q", alias)
	}
	return id, nil
}

// taskMembers adds or removes a member of the task.
func (s *threadsSteps) taskMembers(who, op, person, alias string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	p, err := s.personJSON(person)
	if err != nil {
		return err
	}
	key := map[string]string{"adds": "add", "removes": "remove"}[op]
	body := map[string]any{"add": []any{}, "remove": []any{}}
	body[key] = []any{p}
	s.probe(who, http.MethodPost, "/tasks/no-such-task/members", body)
	_, err = s.request(who, http.MethodPost, "/tasks/"+id+"/members", body, reqOpts{})
	return err
}

// taskOp reads, finishes or deletes the task as who.
func (s *threadsSteps) taskOp(who, op, alias string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	method, tail := http.MethodGet, ""
	switch op {
	case "finishes":
		method, tail = http.MethodPost, "/finish"
	case "deletes":
		method = http.MethodDelete
	}
	s.probe(who, method, "/tasks/no-such-task"+tail, nil)
	_, err = s.request(who, method, "/tasks/"+id+tail, nil, reqOpts{})
	return err
}

// startsTaskRun starts a run of the role on the task.
func (s *threadsSteps) startsTaskRun(who, role, alias, prompt string) error {
	id, err := s.taskID(alias)
	if err != nil {
		return err
	}
	r, err := s.request(who, http.MethodPost, "/tasks/"+id+"/runs", map[string]string{"role": role, "prompt": unescape(prompt)}, reqOpts{})
	if err != nil {
		return err
	}
	var got struct {
		Run string `json:"run"`
	}
	if r.status != http.StatusAccepted {
		return fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "202 {run}")
	}
	if err := r.json(&got); err != nil {
		return err
	}
	if got.Run == "" {
		return fail(r.op, string(r.body), "202 {run}")
	}
	s.bound["run "+alias] = got.Run
	return nil
}

// sendCall is one scripted call of peer.send.
func (s *threadsSteps) sendCall(args string) world.Reply {
	return world.Reply{ToolCalls: []world.ToolCall{{ID: s.areas.model.callID(), Name: "peer.send", Arguments: args}}}
}

// modelSendsOnce scripts one call of peer.send, then the words, for the text.
func (s *threadsSteps) modelSendsOnce(match, args, reply string) error {
	return s.script(unescape(match), s.sendCall(args), world.Reply{Text: unescape(reply)})
}

// modelSendsTwice scripts two calls of peer.send, then the words, for the text.
func (s *threadsSteps) modelSendsTwice(match, a, b, reply string) error {
	return s.script(unescape(match), s.sendCall(a), s.sendCall(b), world.Reply{Text: unescape(reply)})
}

func (s *threadsSteps) script(match string, rs ...world.Reply) error {
	if err := s.world.Model().EnqueueFor(match, rs...); err != nil {
		return harnessErr("script the model: %v", err)
	}
	return nil
}

// lastUser is the content of the last user message.
func lastUser(msgs []world.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// requestsFor are the requests to the model whose last user message is the text.
func (s *threadsSteps) requestsFor(txt string) []world.ModelRequest {
	var out []world.ModelRequest
	for _, r := range s.world.Model().Requests() {
		if lastUser(r.Messages) == txt {
			out = append(out, r)
		}
	}
	return out
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

// peerReceivedOnce waits until each of the texts has arrived at the peer, then expects the peer
// to have received exactly n texts in all. Each of the texts is a sentinel: a later text of an
// agent conversation the peer already had texts of. A text is sent only after every earlier text
// of the same agent conversation was delivered or failed (spec/peer.md, The wire: "Ordering is
// per agent conversation"), and a delivered text is not sent again ("The sender treats 200 as
// delivered"), so a text of that conversation the sender should not have sent (one tried again
// after its 200 or its final rejection, one that failed, one a refused peer.send queued after
// all) would have arrived before its sentinel and is counted. A sentinel on a thread the peer had
// no text of proves nothing: a second send from the same root to the same role goes on the same
// thread (spec/peer.md, Sending), so it fails.
func (s *threadsSteps) peerReceivedOnce(n int, list string) error {
	var want []string
	for _, m := range historyAliasRE.FindAllStringSubmatch(list, -1) {
		want = append(want, unescape(m[1]))
	}
	if err := s.sut(); err != nil {
		return err
	}
	p := s.world.Peer()
	ctx, cancel := s.wait()
	defer cancel()
	var ds []world.PeerDelivery
	var missing []string
	for {
		seen := p.Count()
		ds, missing = p.Deliveries(), nil
		for _, t := range want {
			if !slices.ContainsFunc(ds, func(d world.PeerDelivery) bool { return d.Text.Text == t }) {
				missing = append(missing, strconv.Quote(t))
			}
		}
		if len(missing) == 0 {
			break
		}
		if err := p.WaitDeliveries(ctx, seen+1); err != nil {
			return fail("the peer", fmt.Sprintf("%d texts: %s", p.Count(), s.describeDeliveries()), "the texts "+strings.Join(missing, " and "))
		}
	}
	for _, t := range want {
		i := slices.IndexFunc(ds, func(d world.PeerDelivery) bool { return d.Text.Text == t })
		d := ds[i]
		if !slices.ContainsFunc(ds[:i], func(e world.PeerDelivery) bool {
			return e.Text.Thread == d.Text.Thread && e.Text.From == d.Text.From && e.Text.To == d.Text.To
		}) {
			return fail(fmt.Sprintf("text %d the peer received", i+1), string(d.Body),
				fmt.Sprintf("%q on the thread of the earlier texts from %s to %s: the same root sends to the same role in one agent conversation", t, d.Text.From, d.Text.To))
		}
	}
	if got := p.Count(); got != n {
		return fail("the peer", fmt.Sprintf("%d texts: %s", got, s.describeDeliveries()), fmt.Sprintf("exactly %d once %s arrived", n, list))
	}
	return nil
}

func (s *threadsSteps) describeDeliveries() string {
	var parts []string
	for _, d := range s.world.Peer().Deliveries() {
		parts = append(parts, string(d.Body))
	}
	return strings.Join(parts, " | ")
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

// peerHoldsNext makes the peer's answer to the next text wait until released.
func (s *threadsSteps) peerHoldsNext() error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	if err := s.world.Peer().Script(world.PeerAnswer{Hold: h}); err != nil {
		return harnessErr("script the peer: %v", err)
	}
	return nil
}

// peerReleases releases every held answer of the peer.
func (s *threadsSteps) peerReleases() error {
	s.world.Peer().Always(nil)
	for _, h := range s.holds {
		h.Release()
	}
	return nil
}

// peerRejects scripts the peer to answer the next N texts with the status and reason.
func (s *threadsSteps) peerRejects(n, status int, reason string) error {
	if err := s.world.Peer().Script(world.PeerAnswer{Status: status, Reason: reason, Times: n}); err != nil {
		return harnessErr("script the peer: %v", err)
	}
	return nil
}

// peerWellFormed expects every request at the peer to be within spec/peer.md, and each message id
// to carry one text only (the same thread, roles and text on every try).
func (s *threadsSteps) peerWellFormed() error {
	seen := map[string]world.PeerText{}
	for i, d := range s.world.Peer().Deliveries() {
		if d.Problem != "" {
			return fail(fmt.Sprintf("text %d the peer received", i+1), d.Problem+": "+string(d.Body), "a text within spec/peer.md with the send token")
		}
		if old, ok := seen[d.Text.Message]; ok && old != d.Text {
			return fail(fmt.Sprintf("text %d the peer received", i+1), fmt.Sprintf("message %s again with %+v", d.Text.Message, d.Text),
				fmt.Sprintf("one text per message id: %+v", old))
		}
		seen[d.Text.Message] = d.Text
	}
	return nil
}

// thread is the id of a thread alias.
func (s *threadsSteps) thread(alias string) (string, error) {
	s.ready()
	id, ok := s.bound["thread "+alias]
	if !ok {
		return "", harnessErr("thread %q is not known yet", alias)
	}
	return id, nil
}

func byThread(id string) string {
	return "/agent-conversations?connection=" + world.PeerConnection + "&thread=" + url.QueryEscape(id)
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
		r, err := s.request(who, http.MethodGet, byThread(id), nil, reqOpts{quiet: true})
		if err != nil {
			return false, err
		}
		last = r
		return r.status == http.StatusOK && s.match(want, canonJSON(string(r.body))), nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return fail(last.op, fmt.Sprintf("%d %s", last.status, last.body), "200 "+s.substitute(want))
	}
	return nil
}

// historyAliasRE finds the quoted thread aliases of a list.
var historyAliasRE = regexp.MustCompile(`"([^"]+)"`)

// acID is the id of the thread's agent conversation, read as its role when not yet known.
func (s *threadsSteps) acID(alias string) (string, error) {
	if id, ok := s.bound["ac "+alias]; ok {
		return id, nil
	}
	th, err := s.thread(alias)
	if err != nil {
		return "", err
	}
	p := s.pairs[alias]
	var last *response
	ok, err := s.poll(1, func() (bool, error) {
		r, err := s.request("role:"+p.role, http.MethodGet, byThread(th), nil, reqOpts{quiet: true})
		if err != nil {
			return false, err
		}
		last = r
		return r.status == http.StatusOK, nil
	})
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fail(last.op, fmt.Sprintf("%d %s", last.status, clip(string(last.body), 200)), "200: the role reads its own agent conversation")
	}
	var got struct {
		ID string `json:"id"`
	}
	if err := last.json(&got); err != nil || got.ID == "" {
		return "", fail(last.op, string(last.body), "the agent conversation's id")
	}
	s.bound["ac "+alias] = got.ID
	return got.ID, nil
}

// agentConversation reads the thread's agent conversation as its role.
func (s *threadsSteps) agentConversation(alias string) (*agentConv, error) {
	if _, err := s.acID(alias); err != nil {
		return nil, err
	}
	th, _ := s.thread(alias)
	r, err := s.request("role:"+s.pairs[alias].role, http.MethodGet, byThread(th), nil, reqOpts{quiet: true})
	if err != nil {
		return nil, err
	}
	if r.status != http.StatusOK {
		return nil, fail(r.op, fmt.Sprintf("%d %s", r.status, clip(string(r.body), 200)), "200")
	}
	var ac agentConv
	if err := r.json(&ac); err != nil {
		return nil, err
	}
	return &ac, nil
}

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

// seesGone reads the agent conversation as who and expects root kind gone.
func (s *threadsSteps) seesGone(who, alias string) error {
	th, err := s.thread(alias)
	if err != nil {
		return err
	}
	var last *response
	ok, err := s.poll(1, func() (bool, error) {
		r, err := s.request(who, http.MethodGet, byThread(th), nil, reqOpts{quiet: true})
		if err != nil {
			return false, err
		}
		last = r
		var ac agentConv
		return r.status == http.StatusOK && json.Unmarshal(r.body, &ac) == nil && ac.Root.Kind == "gone", nil
	})
	if err != nil {
		return err
	}
	if !ok {
		return fail(last.op+" as "+who, fmt.Sprintf("%d %s", last.status, clip(string(last.body), 300)), `200 with root {"kind": "gone"}`)
	}
	return nil
}

// stops stops the agent of the thread's conversation as who.
func (s *threadsSteps) stops(who, alias string) error {
	id, err := s.acID(alias)
	if err != nil {
		return err
	}
	s.probe(who, http.MethodPost, "/agent-conversations/no-such-agent-conversation/stop", nil)
	_, err = s.request(who, http.MethodPost, "/agent-conversations/"+url.PathEscape(id)+"/stop", nil, reqOpts{})
	return err
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

// connectionOp pauses, unpauses, revokes or reads the connection as who.
func (s *threadsSteps) connectionOp(who, op string) error {
	method, tail := http.MethodPost, "/"+strings.TrimSuffix(op, "s")
	if op == "reads" {
		method, tail = http.MethodGet, ""
	}
	s.probe(who, method, "/connections/no-such-connection"+tail, nil)
	if method == http.MethodGet {
		_, err := s.request(who, method, "/connections/"+world.PeerConnection+tail, nil, reqOpts{})
		return err
	}
	_, err := s.request(who, method, "/connections/"+world.PeerConnection+tail, nil, reqOpts{})
	return err
}

// answerExactly expects the last answer to be the status and the body (placeholders bind).
func (s *threadsSteps) answerExactly(status int, body string) error {
	r, err := s.lastAnswer()
	if err != nil {
		return err
	}
	want := fmt.Sprintf("%d %s", status, canonJSON(body))
	if !s.match(want, fmt.Sprintf("%d %s", r.status, canonJSON(string(r.body)))) {
		return fail(r.op, fmt.Sprintf("%d %s", r.status, r.body), s.substitute(want))
	}
	return nil
}

// placeholderThreadsRE finds the placeholders of a template: {thread A}, {message <text>},
// {ac A}, {conv <who> <role>}, {task T}, {run T} and {any}.
var placeholderThreadsRE = regexp.MustCompile(`\{(thread|message|ac|conv|task|run|any)(?: ([^{}"]+))?\}`)

// substitute writes the template with every known placeholder replaced by its value.
func (s *threadsSteps) substitute(t string) string {
	return placeholderThreadsRE.ReplaceAllStringFunc(t, func(m string) string {
		sub := placeholderThreadsRE.FindStringSubmatch(m)
		if v, ok := s.bound[sub[1]+" "+sub[2]]; ok {
			return v
		}
		return m
	})
}

// match reports whether got is the template want with each placeholder standing for one value:
// a known one for its value, an unknown one for any id of its kind, the same everywhere it
// appears; on a match the unknown ones are remembered.
func (s *threadsSteps) match(want, got string) bool {
	s.ready()
	var re strings.Builder
	re.WriteString(`(?s)^`)
	var keys []string
	at := 0
	for _, loc := range placeholderThreadsRE.FindAllStringSubmatchIndex(want, -1) {
		re.WriteString(regexp.QuoteMeta(want[at:loc[0]]))
		at = loc[1]
		kind := want[loc[2]:loc[3]]
		key := kind
		if loc[4] >= 0 {
			key += " " + want[loc[4]:loc[5]]
		}
		if v, ok := s.bound[key]; ok && kind != "any" {
			re.WriteString(regexp.QuoteMeta(v))
			continue
		}
		switch kind {
		case "any":
			re.WriteString(`(?:[^"\n]*)`)
			continue
		case "thread":
			re.WriteString(`([A-Za-z0-9_-]{16,64})`)
		case "message":
			re.WriteString(`([A-Za-z0-9_-]{1,64})`)
		default:
			re.WriteString(`([^\s"]+?)`)
		}
		keys = append(keys, key)
	}
	re.WriteString(regexp.QuoteMeta(want[at:]))
	re.WriteString(`$`)
	m := regexp.MustCompile(re.String()).FindStringSubmatch(got)
	if m == nil {
		return false
	}
	found := map[string]string{}
	for i, k := range keys {
		if v, ok := found[k]; ok && v != m[i+1] {
			return false
		}
		found[k] = m[i+1]
	}
	for k, v := range found {
		s.bound[k] = v
	}
	return true
}

// peerHoldsThenRejects makes the peer's answer to the next text wait until released, and then be
// the status and reason: the box has the text in hand, not yet answered, until the scenario says.
func (s *threadsSteps) peerHoldsThenRejects(status int, reason string) error {
	h := s.world.NewHold()
	s.holds = append(s.holds, h)
	if err := s.world.Peer().Script(world.PeerAnswer{Hold: h, Status: status, Reason: reason}); err != nil {
		return harnessErr("script the peer: %v", err)
	}
	return nil
}

// fieldAcceptToken is the token the peer presents on the second connection, field.
const fieldAcceptToken = "field-accept-4Kp9w"

// commonThreadsVocabulary lists the steps that several features share (threads).
func commonThreadsVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the box is connected to the peer "lab"$`, a.threads.connected, "gives the box the roles planner and scout, the member dana and the connection lab to the kit's peer (owner olga), and registers their tokens"},
		{`^the connection "lab" holds at most (\d+) waiting texts$`, a.threads.queueBound, "configures the bound of the texts waiting to be sent on the connection"},
		{`^the peer answers ` + quotedPat + ` on thread "([^"]+)"$`, a.threads.peerAnswers, "sends a text as the peer on a thread the box opened, from the peer's role of it to the box's"},
		{`^the peer sends the same text again$`, a.threads.peerSendsAgain, "sends the kit's last text again, the same message id and all"},
		{`^the answer is 200 ack$`, a.threads.answerAck, "expects the last answer to be exactly 200 {ack, thread, message} of the kit's last text"},
		{`^the answer is (\d+) "([a-z-]+)"$`, a.threads.answerReason, "expects the last answer to be exactly the status with {\"reason\": R}"},
		{`^the answer is the uniform 404$`, a.threads.answerUniform404, "expects the last answer to be 404 and equal to what the same request gets at an id nothing holds"},
		{`^the answer is the connection "lab" (open|paused|revoked)$`, a.threads.answerConnection, "expects the last answer to be exactly 200 {\"id\": \"lab\", \"state\": S}"},
		{`^` + namePat + ` says ` + quotedPat + ` to "([a-z0-9-]+)"$`, a.threads.saysToRole, "runs a turn in who's conversation with the role"},
		{`^` + namePat + ` (reads|deletes) (?:her|his) conversation with "([a-z0-9-]+)"$`, a.threads.ownConversation, "reads or deletes who's conversation with the role"},
		{`^(conversations|threads|tasks) "([^"]+)" and "([^"]+)" are different$`, a.threads.different, "expects the two remembered ids to differ"},
		{`^` + namePat + ` creates task "([^"]+)" titled ` + quotedPat + `(?: with members "([^"]*)")?$`, a.threads.createsTask, "creates a task with the title and the members (comma-separated names) and remembers its id"},
		{`^` + namePat + ` creates subtask "([^"]+)" of "([^"]+)" titled ` + quotedPat + `$`, a.threads.createsSubtask, "creates a subtask of the task and remembers its id"},
		{`^` + namePat + ` (adds|removes) "([^"]+)" (?:to|from) task "([^"]+)"$`, a.threads.taskMembers, "adds or removes a member of the task"},
		{`^` + namePat + ` (reads|finishes|deletes) task "([^"]+)"$`, a.threads.taskOp, "reads, finishes or deletes the task as who"},
		{`^` + namePat + ` starts a run of "([a-z0-9-]+)" on task "([^"]+)" with ` + quotedPat + `$`, a.threads.startsTaskRun, "starts a run of the role on the task with the prompt"},
		{`^the model answers ` + quotedPat + ` by sending (\{[^{}]*\}), then says ` + quotedPat + `$`, a.threads.modelSendsOnce, "scripts the model to answer the text with one call of peer.send, then with the words"},
		{`^the model answers ` + quotedPat + ` by sending (\{[^{}]*\}) and (\{[^{}]*\}), then says ` + quotedPat + `$`, a.threads.modelSendsTwice, "scripts the model to answer the text with two calls of peer.send one after the other, then with the words"},
		{`^model request (\d+) for ` + quotedPat + ` holds exactly:$`, a.threads.modelRequestFor, "expects the Nth request to the model whose last user message is the text to hold exactly the table's messages (placeholders substituted)"},
		{`^the peer.send results for ` + quotedPat + ` are (\d+) sent and (\d+) "([a-z-]+)"$`, a.threads.sendResults, "expects the tool results of the turn for the text to be exactly N sent and M errors of the reason, in any order"},
		{`^the model has been asked (\d+) times? for ` + quotedPat + `$`, a.threads.modelAskedFor, "expects exactly N requests to the model so far whose last user message is the text (after a sentinel: a later turn of the same agent conversation that completed)"},
		{`^the peer has received (\d+) texts?$`, a.threads.peerReceived, "waits until the peer has received N requests"},
		{`^after (\d+) seconds the peer has still received (\d+) texts?$`, a.threads.peerStillReceived, "waits the seconds, then expects the peer to have received exactly N requests"},
		{`^the peer has received exactly (\d+) texts? once ("[^"]+"(?:(?:, | and )"[^"]+")*) (?:has|have) arrived$`, a.threads.peerReceivedOnce, "waits until each quoted text has arrived at the peer (sentinels: later texts of the agent conversations of earlier ones), then expects the peer to have received exactly N requests"},
		{`^received text (\d+) is exactly:$`, a.threads.receivedExactly, "expects the Nth request the peer received to carry the send token and exactly the body (placeholders bind thread and message aliases)"},
		{`^the peer holds the next text$`, a.threads.peerHoldsNext, "makes the peer's answer to the next text wait until released"},
		{`^the peer releases the held texts$`, a.threads.peerReleases, "releases every held answer of the peer (later texts are acknowledged)"},
		{`^the peer answers the next (\d+) texts? with (\d+) "([a-z-]+)"$`, a.threads.peerRejects, "scripts the peer to answer the next N texts with the status and reason"},
		{`^the peer found every text well-formed$`, a.threads.peerWellFormed, "expects every request the peer received to carry the send token and a body within spec/peer.md"},
		{`^` + namePat + ` sees the agent conversation of thread "([^"]+)" as:$`, a.threads.seesAgentConversation, "reads the agent conversation of the thread as who until it equals the body (placeholders substituted)"},
		{`^nothing is stored on thread "([^"]+)"$`, a.threads.nothingStored, "expects no agent conversation on the thread (an alias, or an id as written): the owner gets the 404 of a thread never used"},
		{`^` + namePat + ` sees thread "([^"]+)" rooted "gone"$`, a.threads.seesGone, "reads the agent conversation as who and expects 200 with root kind gone"},
		{`^` + namePat + ` stops the agent conversation of thread "([^"]+)"$`, a.threads.stops, "stops the agent of the thread's conversation as who"},
		{`^turn (\d+) of thread "([^"]+)" is (running|completed|stopped|failed|ended)$`, a.threads.turnIs, "waits until turn N of the thread's agent conversation has the status"},
		{`^thread "([^"]+)" has exactly (\d+) turns?, the last of which took only ` + quotedPat + `$`, a.threads.turnsEndWith, "expects the thread's agent conversation to have exactly N turns, the last of which took the one text (a sentinel: the turn of a later text)"},
		{`^the text ` + quotedPat + ` on thread "([^"]+)" is (queued|sent|received|failed)(?: with "([a-z-]+)")?$`, a.threads.textIs, "waits until the text of the thread's agent conversation has the state (and reason)"},
		{`^` + namePat + ` (pauses|unpauses|revokes|reads) the connection "lab"$`, a.threads.connectionOp, "pauses, unpauses, revokes or reads the connection as who"},
		{`^the answer is exactly (\d+) (\{.*\})$`, a.threads.answerExactly, "expects the last answer to be exactly the status and the body (placeholders substituted or bound)"},
		{`^the peer holds the next text, then answers it with (\d+) "([a-z-]+)"$`, a.threads.peerHoldsThenRejects, "makes the peer's answer to the next text wait until released, then be the status and reason"},
	}
}
