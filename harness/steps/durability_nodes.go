package steps

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
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
	}
}
