package steps

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/loomcheck/loomcheck/harness/sutclient"
)

// nodeRead is what a read of a whole history sent to one node came to.
type nodeRead struct {
	entries []entry
	served  []string
	err     error
}

// killsServingNode kills (SIGKILL) the node that serves the named conversation, as its own
// answer names it.
func (s *nodesSteps) killsServingNode(name string) error {
	node, _, err := s.servingNode(name)
	if err != nil {
		return err
	}
	oc, ok := s.drv.(ownerCrasher)
	if !ok {
		return harnessErr("the driver cannot kill one node of several")
	}
	if err := oc.crashOwner(node, nil); err != nil {
		return err
	}
	s.transport.CloseIdleConnections()
	s.killed = node
	return nil
}

// readsDuringTakeover sends, at once after the kill, a read of conversation waiting's whole
// history to the node that serves conversation served (a surviving one), and then a read of
// served's history to that same node: the second is answered by that node, unchanged, while
// the first still waits for the takeover of its conversation. The first is judged by
// waitingReadAnswered.
func (s *nodesSteps) readsDuringTakeover(served, waiting string) error {
	if s.killed == "" {
		return harnessErr("no node was killed")
	}
	node := s.served[served]
	if node == s.killed {
		return harnessErr("conversation %s was served by the node killed", served)
	}
	base, err := s.nodeURL("the node of "+served, node)
	if err != nil {
		return err
	}
	cw, err := s.conv(waiting)
	if err != nil {
		return err
	}
	cs, err := s.conv(served)
	if err != nil {
		return err
	}
	done := make(chan nodeRead, 1)
	go func() {
		es, sv, err := s.historyAt(s.ctx, cw.owner, cw.id, reqOpts{Base: base})
		done <- nodeRead{entries: es, served: sv, err: err}
	}()
	s.pending, s.pendingConv = done, waiting
	es, sv, err := s.historyAt(s.ctx, cs.owner, cs.id, reqOpts{Base: base})
	if err != nil {
		return err
	}
	op := "GET /conversations/" + cs.id + "/history at " + node + " after " + s.killed + " was killed"
	if err := namedEach(op, sv, node); err != nil {
		return err
	}
	if err := sameRecords(op, es, s.before[served]); err != nil {
		return err
	}
	select {
	case r := <-done:
		s.pending = nil
		got := "answered first"
		if r.err != nil {
			got += ": " + r.err.Error()
		}
		return fail("a read of "+waiting+" sent to "+node+" at the kill, and a read of "+served+" sent after it",
			got, "the read of "+served+" answered while the read of "+waiting+" still waits for another node to take "+waiting+" over")
	default:
	}
	return nil
}

// waitingReadAnswered waits for the read readsDuringTakeover left waiting: it is answered by a
// surviving node, and the history it holds begins with the records remembered before the kill,
// each byte for byte, followed only by records of later turns.
func (s *nodesSteps) waitingReadAnswered(name string) error {
	if s.pending == nil || s.pendingConv != name {
		return harnessErr("no read of %s waits", name)
	}
	ctx, cancel := s.wait()
	defer cancel()
	var r nodeRead
	select {
	case r = <-s.pending:
	case <-ctx.Done():
		return fail("the read of "+name+" sent at the kill", "no answer yet", "an answer once a surviving node took "+name+" over")
	}
	s.pending = nil
	if r.err != nil {
		return r.err
	}
	op := "the read of " + name + " sent at the kill of " + s.killed
	ns, _ := s.drv.(nodeSet)
	urls := ns.nodeURLs()
	for _, sv := range r.served {
		if _, ok := urls[sv]; !ok || sv == s.killed {
			return fail(op, fmt.Sprintf("an answer naming %q", sv), "an answer naming a surviving node")
		}
	}
	old := s.areas.history.remembered
	if len(old) == 0 {
		return harnessErr("no history was remembered")
	}
	if len(r.entries) < len(old) {
		return fail(op, describeEntries(r.entries), fmt.Sprintf("the %d remembered records, and only later turns' after them", len(old)))
	}
	if err := sameRecords(op, r.entries[:len(old)], old); err != nil {
		return err
	}
	last := old[len(old)-1].Turn
	for _, e := range r.entries[len(old):] {
		if e.Turn <= last {
			return fail(op+", after the remembered records", e.String(), fmt.Sprintf("only records of turns after turn %d", last))
		}
	}
	return nil
}

// retriesUntilAnswered sends the text as who to the current conversation under the message id,
// through the address in front of the nodes, as a client that retries does: again, on a
// connection of its own each time, while no node answers or one answers that it cannot serve
// now (421, 502, 503, 504). The message was acknowledged before, so the answer is 202 saying it
// was not delivered again.
func (s *nodesSteps) retriesUntilAnswered(who, text, id string) error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	body := map[string]any{"text": unescape(text), "messageId": id}
	path := "/conversations/" + url.PathEscape(c.id) + "/turns"
	var last *response
	var lastErr error
	ok, err := s.poll(1, func() (bool, error) {
		r, err := s.cl.Do(s.ctx, who, http.MethodPost, path, body, reqOpts{Headers: map[string]string{"Connection": "close"}})
		var f *Failure
		switch {
		case r == nil && errors.As(err, &f):
			lastErr = err // no answer: sent again
			return false, nil
		case err != nil:
			return false, err
		}
		last = r
		switch r.Status {
		case http.StatusMisdirectedRequest, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if !ok {
		if last == nil {
			return lastErr
		}
		return fail(last.Op, fmt.Sprintf("%d %s", last.Status, clip(string(last.Body), 200)), "an answer once a node took the conversation over")
	}
	s.last = last
	var ack struct {
		Delivered *bool `json:"delivered"`
	}
	if last.Status != http.StatusAccepted || json.Unmarshal(last.Body, &ack) != nil || ack.Delivered == nil || *ack.Delivered {
		return fail(last.Op+" (message id "+id+" again, after the kill)", fmt.Sprintf("%d %s", last.Status, clip(string(last.Body), 200)),
			`202 {"delivered": false}: the message id was acknowledged before the kill`)
	}
	return nil
}

// streamDeliversAfterKill sends the text to the named conversation at the node that serves it
// and expects who's event stream of it, opened at that node before the kill, to deliver the
// reply's record: the kill of another node did not end it, nor moved the conversation (the
// answer to the send names the node it was sent to).
func (s *nodesSteps) streamDeliversAfterKill(who, name, text string) error {
	if s.stream == nil || s.streamConv != name {
		return harnessErr("no event stream of %s was opened before the kill", name)
	}
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	node := s.served[name]
	base, err := s.nodeURL("the node of "+name, node)
	if err != nil {
		return err
	}
	text = unescape(text)
	r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations/"+url.PathEscape(c.id)+"/turns",
		map[string]any{"text": text, "messageId": s.nextMessageID()}, reqOpts{Base: base})
	if err != nil {
		return err
	}
	if r.Status != http.StatusAccepted {
		return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "202")
	}
	moved := r.Header.Get(nodeHeader) != node
	ctx, cancel := s.wait()
	defer cancel()
	var ended bool
	evs, err := s.stream.WaitFor(ctx, "the reply to "+strconv.Quote(text), func(evs []sseEvent, end bool) bool {
		ended = end
		return end || repliedOnStream(evs, text)
	})
	if err != nil {
		return err
	}
	if moved {
		return fail(r.Op+" sent to "+node+" after "+s.killed+" was killed",
			"served by "+r.Header.Get(nodeHeader)+": "+name+" was moved off a surviving node",
			"served by "+node+": the death of another node moves none of the survivors' executions")
	}
	if ended {
		return fail(s.stream.Op+" at "+node+", open since before "+s.killed+" was killed",
			"the stream ended ("+sutclient.Summarize(evs)+"), though "+node+" still serves "+name,
			"the stream open, delivering the reply: the death of another node pauses only the executions it ran")
	}
	return nil
}

// repliedOnStream reports whether evs hold the user record of text and, after it, a complete
// reply of its turn.
func repliedOnStream(evs []sseEvent, text string) bool {
	var turn int64
	for _, ev := range messageEvents(evs) {
		var e entry
		if json.Unmarshal([]byte(ev.Data), &e) != nil {
			continue
		}
		switch {
		case e.Role == "user" && e.text() == text:
			turn = e.Turn
		case turn != 0 && e.Role == "assistant" && e.Turn == turn && e.Status == "complete":
			return true
		}
	}
	return false
}

// durabilityNodesDeathVocabulary lists the steps of features/durability/nodes.feature that kill
// a node and judge what the others do meanwhile and after.
func durabilityNodesDeathVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the node that serves "([^"]*)" is killed$`, a.nodes.killsServingNode, "kills (SIGKILL) the node that serves the named conversation, as its own answer names it"},
		{`^a read of "([^"]*)" at its node is answered there while a read of "([^"]*)" at that node waits$`, a.nodes.readsDuringTakeover, "sends a read of the second conversation to the node of the first (a surviving one), then a read of the first there: the first's is answered by that node, unchanged, while the other still waits"},
		{`^the read of "([^"]*)" is then answered by a surviving node, the remembered records whole$`, a.nodes.waitingReadAnswered, "waits for the read left waiting at the kill: answered by a surviving node, the remembered records first, each byte for byte, then only later turns'"},
		{`^(\w[\w' ]*?), retrying until answered, sends "((?:[^"\\]|\\.)*)" again with message id "([^"]*)"$`, a.nodes.retriesUntilAnswered, "sends the text under the message id through the front until a node serves it, and expects 202 saying it was not delivered again"},
		{`^(\w[\w' ]*?)'s event stream of "([^"]*)", open since before the kill, delivers the reply to "((?:[^"\\]|\\.)*)" sent to its node$`, a.nodes.streamDeliversAfterKill, "sends the text to the named conversation at its node and expects that node to serve it and the event stream opened there before the kill to deliver its reply"},
	}
}
