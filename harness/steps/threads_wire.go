package steps

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// peerSendsMany sends n texts as the peer on the thread, "text 1" to "text n", and expects each
// to be acknowledged (the first answer that is not ends the step).
func (s *threadsSteps) peerSendsMany(n int, from, to, alias string) error {
	for i := 1; i <= n; i++ {
		if err := s.peerSends(fmt.Sprintf("text %d", i), from, to, alias); err != nil {
			return err
		}
		if err := s.answerAck(); err != nil {
			return err
		}
	}
	return nil
}

// peerPosts posts the body as it is with the accept token.
func (s *threadsSteps) peerPosts(body string) error {
	_, err := s.postText(nil, []byte(body), "Bearer "+world.PeerAcceptToken)
	return err
}

// peerPostsWithToken posts a well-formed text with no token or the named one.
func (s *threadsSteps) peerPostsWithToken(alias, tok string) error {
	s.ready()
	t := world.PeerText{V: 1, Thread: randomID("t_", 18), Message: randomID("k_", 9), From: "analyst", To: "planner", Text: "hello"}
	s.bound["thread "+alias] = t.Thread
	s.sent = &t
	auth := ""
	switch {
	case tok == "the send token":
		auth = "Bearer " + world.PeerSendToken
	case strings.HasPrefix(tok, "the token "):
		auth = "Bearer " + strings.Trim(strings.TrimPrefix(tok, "the token "), `"`)
	}
	_, err := s.postText(t, nil, auth)
	return err
}

// peerPostsSized posts a text of the size from analyst to planner.
func (s *threadsSteps) peerPostsSized(n int, alias string) error {
	s.ready()
	t := world.PeerText{V: 1, Thread: randomID("t_", 18), Message: randomID("k_", 9), From: "analyst", To: "planner", Text: strings.Repeat("é", n/2) + strings.Repeat("x", n%2)}
	s.bound["thread "+alias] = t.Thread
	s.pairs[alias] = threadPair{role: "planner", peerRole: "analyst"}
	s.sent = &t
	_, err := s.postText(t, nil, "Bearer "+world.PeerAcceptToken)
	return err
}

// answerSame expects the last answer to equal the one before it.
func (s *threadsSteps) answerSame() error {
	if s.prev == nil || s.last == nil {
		return harnessErr("two answers are needed")
	}
	want := fmt.Sprintf("%d %s", s.prev.Status, canonJSON(string(s.prev.Body)))
	got := fmt.Sprintf("%d %s", s.last.Status, canonJSON(string(s.last.Body)))
	if got != want {
		return fail(s.last.Op, got, "the answer before it: "+want)
	}
	return nil
}

// answerBadRequest expects exactly 400 bad-request naming the member.
func (s *threadsSteps) answerBadRequest(member string) error {
	return s.exactly(http.StatusBadRequest, map[string]string{"reason": "bad-request", "detail": member})
}

// secondConnection adds the connection field to the box's configuration: the kit's peer at the
// same address, which the peer reaches under a token of its own.
func (s *threadsSteps) secondConnection() error {
	if s.run.RemoteCfg != nil || s.started {
		return harnessErr("the second connection is configured before the system starts")
	}
	return s.configure(func(c *sutconfig.SUTConfig) {
		if len(c.Threads.Connections) == 0 {
			return // not connected: the peer's posts on field are refused, and the scenario says so
		}
		lab := c.Threads.Connections[0]
		c.Threads.Connections = append(c.Threads.Connections, sutconfig.ConnectionConfig{ID: "field", URL: lab.URL,
			Send: lab.Send, Accept: fieldAcceptToken, Owner: lab.Owner})
	})
}

// peerPostsOnField posts the body to the box's texts as the peer, on the connection field.
func (s *threadsSteps) peerPostsOnField(body string) error {
	_, err := s.postText(nil, []byte(body), "Bearer "+fieldAcceptToken)
	return err
}

// threadsWireVocabulary lists the steps of features/threads/wire.feature.
func threadsWireVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the peer sends (\d+) texts from "([a-z0-9-]+)" to "([a-z0-9-]+)" on thread "([^"]+)", each acknowledged$`, a.threads.peerSendsMany, "sends N texts, \"text 1\" to \"text N\", as the peer on the thread and expects a 200 ack for each"},
		{`^the peer posts (\{.*\})$`, a.threads.peerPosts, "posts the body to the box's texts as the peer, with the accept token"},
		{`^the peer posts a text on thread "([^"]+)" with (no token|the token "[^"]*"|the send token)$`, a.threads.peerPostsWithToken, "posts a well-formed text with no token or the named one"},
		{`^the peer posts a text of (\d+) bytes on thread "([^"]+)"$`, a.threads.peerPostsSized, "posts a text of the size from analyst to planner"},
		{`^the answer is the same as before$`, a.threads.answerSame, "expects the last answer to equal the one before it, status and body"},
		{`^the answer is 400 bad-request "(\w+)"$`, a.threads.answerBadRequest, "expects the last answer to be exactly 400 {\"reason\": \"bad-request\", \"detail\": member}"},
		{`^the box has a second connection "field" to the same peer$`, a.threads.secondConnection, "adds the connection field to the box's configuration: the kit's peer again, under accept token " + fieldAcceptToken + ", owner olga"},
		{`^the peer posts on the connection "field" (\{.*\})$`, a.threads.peerPostsOnField, "posts the body to the box's texts as the peer, with the connection field's accept token"},
		{`^the peer sends the same text again$`, a.threads.peerSendsAgain, "sends the kit's last text again, the same message id and all"},
		{`^the peer answers the next (\d+) texts? with (\d+) "([a-z-]+)"$`, a.threads.peerRejects, "scripts the peer to answer the next N texts with the status and reason"},
		{`^the peer found every text well-formed$`, a.threads.peerWellFormed, "expects every request the peer received to carry the send token and a body within spec/peer.md"},
		{`^the peer has received exactly (\d+) texts? once ("[^"]+"(?:(?:, | and )"[^"]+")*) (?:has|have) arrived$`, a.threads.peerReceivedOnce, "waits until each quoted text has arrived at the peer (sentinels: later texts of the agent conversations of earlier ones), then expects the peer to have received exactly N requests"},
		{`^the peer holds the next text$`, a.threads.peerHoldsNext, "makes the peer's answer to the next text wait until released"},
		{`^the peer releases the held texts$`, a.threads.peerReleases, "releases every held answer of the peer (later texts are acknowledged)"},
		{`^the peer holds the next text, then answers it with (\d+) "([a-z-]+)"$`, a.threads.peerHoldsThenRejects, "makes the peer's answer to the next text wait until released, then be the status and reason"},
	}
}

// peerSendsAgain sends the kit's last text again.
func (s *threadsSteps) peerSendsAgain() error {
	if s.sent == nil {
		return harnessErr("the peer has sent nothing yet")
	}
	_, err := s.postText(*s.sent, nil, "Bearer "+world.PeerAcceptToken)
	return err
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
