package steps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/harness/sutclient"
)

// nodesSteps send requests to one node of several and kill the node that runs a conversation
// (features/durability/nodes.feature).
type nodesSteps struct {
	*scenario
	// served names the node that served each conversation's creation, by the conversation's name.
	served map[string]string
	// before is a conversation's history as its node answered it before the kill, by name.
	before map[string][]entry
	// stream is the event stream opened at a node before the kill, of the conversation
	// streamConv.
	stream     *stream
	streamConv string
	// killed is the node the kill step killed.
	killed string
	// pending is the read sent at the kill to a surviving node, answered once its conversation
	// is taken over; pendingConv is that conversation.
	pending     chan nodeRead
	pendingConv string
}

// nodeRead is what a read of a whole history sent to one node came to.
type nodeRead struct {
	entries []entry
	served  []string
	err     error
}

// nodesNeeded is the reason a run cannot judge a scenario about several nodes: its system does
// not run as enough nodes, or as enough partitions. It is ErrNotApplicable (errors.Is).
type nodesNeeded struct {
	// driver is the run's driver; nodes and partitions are what it runs (0 nodes: one process;
	// 0 partitions: node.partitions not set, the default of one).
	driver            string
	nodes, partitions int
	// wantNodes and wantPartitions are what the scenario needs.
	wantNodes, wantPartitions int
}

func (e *nodesNeeded) Error() string {
	want := fmt.Sprintf("at least %d nodes", e.wantNodes)
	if e.wantPartitions > 1 {
		want += fmt.Sprintf(" of at least %d partitions (loomcheck run --nodes N --partitions P)", e.wantPartitions)
	} else {
		want += " (loomcheck run --nodes N)"
	}
	if e.nodes == 0 {
		return fmt.Sprintf("%v: the %s driver runs the system as one process, and the scenario needs %s", ErrNotApplicable, e.driver, want)
	}
	parts := fmt.Sprintf("%d partitions", e.partitions)
	switch e.partitions {
	case 0:
		parts = "1 partition (node.partitions not set: its default)"
	case 1:
		parts = "1 partition"
	}
	return fmt.Sprintf("%v: the system runs as %d nodes of %s, and the scenario needs %s", ErrNotApplicable, e.nodes, parts, want)
}

func (e *nodesNeeded) Is(target error) bool { return target == ErrNotApplicable }

// runsAsNodes starts the system, which must run as at least n nodes (of at least parts
// partitions, when named); on any other the scenario is not applicable.
func (s *nodesSteps) runsAsNodes(n int, parts string) error {
	p := 1
	if parts != "" {
		var err error
		if p, err = strconv.Atoi(parts); err != nil {
			return harnessErr("partitions %q: %v", parts, err)
		}
	}
	need := &nodesNeeded{driver: s.run.Kind.Name, wantNodes: n, wantPartitions: p}
	ns, ok := s.drv.(nodeSet)
	if !ok {
		return &HarnessError{Err: need}
	}
	need.nodes, need.partitions = ns.shape()
	if need.nodes < n || max(need.partitions, 1) < p {
		return &HarnessError{Err: need}
	}
	return s.sut()
}

// nodeURL is the own address of the running node named node.
func (s *nodesSteps) nodeURL(op, node string) (string, error) {
	ns, ok := s.drv.(nodeSet)
	if !ok {
		return "", harnessErr("the system does not run as several nodes")
	}
	urls := ns.nodeURLs()
	if u, ok := urls[node]; ok {
		return u, nil
	}
	names := make([]string, 0, len(urls))
	for name := range urls {
		names = append(names, name)
	}
	sort.Strings(names)
	return "", fail(op, fmt.Sprintf("an answer naming %q in %s", node, nodeHeader),
		"the name of one of the running nodes: "+strings.Join(names, ", "))
}

// sendsStraightToServer sends who's further requests straight to the node that served the last
// answer (the one its Loom-Node names), and counts the answers that come from there.
func (s *nodesSteps) sendsStraightToServer(string) error {
	if s.last == nil {
		return harnessErr("no answer to read the serving node from")
	}
	node := s.last.Header.Get(nodeHeader)
	base, err := s.nodeURL(s.last.Op, node)
	if err != nil {
		return err
	}
	u, err := url.Parse(base)
	if err != nil {
		return harnessErr("node address %q: %v", base, err)
	}
	s.answers.pin(node, u.Host)
	s.mu.Lock()
	s.via = base
	s.mu.Unlock()
	return nil
}

// everyAnswerNamedIt expects every answer that came from the node the requests are sent to
// straight to name that node: none was served by another, through a hop.
func (s *nodesSteps) everyAnswerNamedIt() error {
	sent, hops := s.answers.pinnedAnswers()
	if sent == 0 {
		return harnessErr("no answer came from the node the requests were sent to")
	}
	if len(hops) > 0 {
		return fail(fmt.Sprintf("the %d answers of the node %s", sent, s.answers.pinned), strings.Join(hops, "; "),
			"each answer naming the node it was sent to, which serves its own conversation without a hop")
	}
	return nil
}

// sameHistoryAtEveryOtherNode reads the current conversation's whole history at the node the
// requests are sent to, then at every other running node: each is the same, record for record,
// and every answer names the node that serves the conversation.
func (s *nodesSteps) sameHistoryAtEveryOtherNode() error {
	c, err := s.conv("")
	if err != nil {
		return err
	}
	s.mu.Lock()
	own := s.via
	s.mu.Unlock()
	if own == "" {
		return harnessErr("the requests are not sent straight to one node")
	}
	node := s.answers.pinned
	want, _, err := s.historyAt(s.ctx, c.owner, c.id, reqOpts{Base: own})
	if err != nil {
		return err
	}
	ns, _ := s.drv.(nodeSet)
	others := 0
	for name, base := range ns.nodeURLs() {
		if base == own {
			continue
		}
		others++
		got, served, err := s.historyAt(s.ctx, c.owner, c.id, reqOpts{Base: base})
		if err != nil {
			return err
		}
		op := fmt.Sprintf("GET /conversations/%s/history sent to %s", c.id, name)
		for _, sv := range served {
			if sv != node {
				return fail(op, fmt.Sprintf("an answer naming %q", sv), fmt.Sprintf("an answer naming %q, the node that serves the conversation", node))
			}
		}
		if err := sameRecords(op, got, want); err != nil {
			return err
		}
	}
	if others == 0 {
		return harnessErr("no other node runs")
	}
	return nil
}

// sameRecords fails unless got holds exactly the records of want, each byte for byte.
func sameRecords(op string, got, want []entry) error {
	if len(got) != len(want) {
		return fail(op, describeEntries(got), describeEntries(want))
	}
	for i := range want {
		if a, b := compact(got[i].raw), compact(want[i].raw); !bytes.Equal(a, b) {
			return fail(fmt.Sprintf("%s, record %d", op, i+1), string(a), string(b))
		}
	}
	return nil
}

// startsUntilDifferentNodes starts conversations as who through the address in front of the
// nodes, each on a connection of its own, until two were served by different nodes: the first
// is filed as first and made the current one, the other as second. A system of several
// partitions shares them out among its nodes, so a few starts reach two of them; one whose
// starts all name one node fails.
func (s *nodesSteps) startsUntilDifferentNodes(who, first, second string) error {
	ns, ok := s.drv.(nodeSet)
	if !ok {
		return harnessErr("the system does not run as several nodes")
	}
	n, p := ns.shape()
	var seen []string
	for range 4 * n {
		r, err := s.cl.Do(s.ctx, who, http.MethodPost, "/conversations", map[string]any{}, reqOpts{Headers: map[string]string{"Connection": "close"}})
		if err != nil {
			return err
		}
		if r.Status != http.StatusCreated {
			return fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "201 and a new conversation")
		}
		var st status
		if err := r.JSON(&st); err != nil {
			return err
		}
		node := r.Header.Get(nodeHeader)
		if _, err := s.nodeURL(r.Op, node); err != nil {
			return err
		}
		name := first
		if len(seen) > 0 {
			if node == s.served[first] {
				seen = append(seen, node)
				continue
			}
			name = second
		}
		c := &conv{name: name, id: st.ID, owner: who}
		s.convs[name], s.served[name] = c, node
		seen = append(seen, node)
		if name == second {
			s.current = s.convs[first]
			return nil
		}
	}
	return fail(fmt.Sprintf("%d conversations started through the front", len(seen)), "every one served by "+seen[0],
		fmt.Sprintf("conversations served by at least two nodes: the system runs %d nodes of %d partitions, shared out among them", n, p))
}

// turnsAnsweredIn has n turns answered as who in the named conversation, which stays the
// current one only for them.
func (s *nodesSteps) turnsAnsweredIn(who string, n int, name string) error {
	c, err := s.conv(name)
	if err != nil {
		return err
	}
	prev := s.current
	s.current = c
	defer func() { s.current = prev }()
	return s.areas.conversation.hasHadTurnsAnswered(who, n)
}

// servingNode asks the node that served the named conversation last for its status, and
// returns the node the answer names (the one serving it now) and its address.
func (s *nodesSteps) servingNode(name string) (string, string, error) {
	c, err := s.conv(name)
	if err != nil {
		return "", "", err
	}
	base, err := s.nodeURL("the start of "+name, s.served[name])
	if err != nil {
		return "", "", err
	}
	r, err := s.cl.Do(s.ctx, c.owner, http.MethodGet, "/conversations/"+url.PathEscape(c.id), nil, reqOpts{Base: base})
	if err != nil {
		return "", "", err
	}
	if r.Status != http.StatusOK {
		return "", "", fail(r.Op, fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), "200 and the conversation")
	}
	node := r.Header.Get(nodeHeader)
	if base, err = s.nodeURL(r.Op, node); err != nil {
		return "", "", err
	}
	s.served[name] = node
	return node, base, nil
}

// opensStreamAtNode reads the named conversation's history at the node that serves it, keeps
// it, and opens its event stream there as who.
func (s *nodesSteps) opensStreamAtNode(who, name string) error {
	node, base, err := s.servingNode(name)
	if err != nil {
		return err
	}
	c, _ := s.conv(name)
	es, served, err := s.historyAt(s.ctx, who, c.id, reqOpts{Base: base})
	if err != nil {
		return err
	}
	if err := namedEach("GET /conversations/"+c.id+"/history at "+node, served, node); err != nil {
		return err
	}
	s.before[name] = es
	s.mu.Lock()
	s.via = base
	s.mu.Unlock()
	st, err := s.cl.OpenStream(s.ctx, who, "/conversations/"+url.PathEscape(c.id)+"/events", nil)
	s.mu.Lock()
	s.via = ""
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if st.Status != http.StatusOK {
		return fail(st.Op, fmt.Sprintf("%d %s", st.Status, clip(string(st.Body), 120)), "200 and an event stream")
	}
	if err := namedEach(st.Op+" at "+node, []string{st.Header.Get(nodeHeader)}, node); err != nil {
		return err
	}
	s.stream, s.streamConv = st, name
	return nil
}

// namedEach fails unless every answer named node.
func namedEach(op string, served []string, node string) error {
	for _, sv := range served {
		if sv != node {
			return fail(op, fmt.Sprintf("an answer naming %q", sv), fmt.Sprintf("an answer naming %q, the node it was sent to", node))
		}
	}
	return nil
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
// reply's record: the kill of another node did not end it. Only a hand-over of the
// conversation to another node ends it (spec/nodes.md, Hand-over); the answer to the send then
// names that other node.
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
	if ended && !moved {
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

// durabilityNodesVocabulary lists the steps of features/durability/nodes.feature.
func durabilityNodesVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the system runs as at least (\d+) nodes(?: of at least (\d+) partitions)?$`, a.nodes.runsAsNodes, "starts the system, which must run as at least N nodes (of at least P partitions, when named); on any other the scenario is not applicable"},
		{`^(\w[\w' ]*?) sends every further request straight to the node that served it$`, a.nodes.sendsStraightToServer, "sends the scenario's further requests to the own address of the node the last answer named (Loom-Node), and counts the answers from there"},
		{`^every answer from that node named it$`, a.nodes.everyAnswerNamedIt, "expects every answer from the node the requests are sent to straight to name that node"},
		{`^the history read at every other node is the same, each answer naming that node$`, a.nodes.sameHistoryAtEveryOtherNode, "reads the current conversation's history at every other running node and expects it the same, record for record, each answer naming the node that serves it"},
		{`^(\w[\w' ]*?) has started conversations until "([^"]*)" and "([^"]*)" are served by different nodes$`, a.nodes.startsUntilDifferentNodes, "starts conversations as who through the front, a connection each, until two were served by different nodes (a bounded number of tries), filed under the two names; the first is the current one"},
		{`^(\w[\w' ]*?) has had (\d+) turns? answered in conversation "([^"]*)"$`, a.nodes.turnsAnsweredIn, "has N turns answered as who in the named conversation, the current one staying as it was"},
		{`^(\w[\w' ]*?) opens the event stream of "([^"]*)" at the node that serves it$`, a.nodes.opensStreamAtNode, "reads the named conversation's history at the node that serves it, keeps it, and opens its event stream there"},
		{`^the node that serves "([^"]*)" is killed$`, a.nodes.killsServingNode, "kills (SIGKILL) the node that serves the named conversation, as its own answer names it"},
		{`^a read of "([^"]*)" at its node is answered there while a read of "([^"]*)" at that node waits$`, a.nodes.readsDuringTakeover, "sends a read of the second conversation to the node of the first (a surviving one), then a read of the first there: the first's is answered by that node, unchanged, while the other still waits"},
		{`^the read of "([^"]*)" is then answered by a surviving node, the remembered records whole$`, a.nodes.waitingReadAnswered, "waits for the read left waiting at the kill: answered by a surviving node, the remembered records first, each byte for byte, then only later turns'"},
		{`^(\w[\w' ]*?), retrying until answered, sends "((?:[^"\\]|\\.)*)" again with message id "([^"]*)"$`, a.nodes.retriesUntilAnswered, "sends the text under the message id through the front until a node serves it, and expects 202 saying it was not delivered again"},
		{`^(\w[\w' ]*?)'s event stream of "([^"]*)", open since before the kill, delivers the reply to "((?:[^"\\]|\\.)*)" sent to its node$`, a.nodes.streamDeliversAfterKill, "sends the text to the named conversation at its node and expects the event stream opened there before the kill to deliver its reply, unless the conversation was handed to another node"},
	}
}
