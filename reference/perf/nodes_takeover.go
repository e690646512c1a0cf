package perf

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

// takeoverLease is the lease of the pg-partition-takeover figure's nodes.
const takeoverLease = 2 * time.Second

// answer is one answer a retrying client got: when its request was sent, how long it took, the
// node that served it, and whether it was the success the client waited for.
type answer struct {
	sent time.Time
	took time.Duration
	node string
	ok   bool
}

// partClient is the retrying client of one conversation, one per partition.
type partClient struct {
	c       *conv
	part    int
	owner   string // the node holding the partition before the kill
	mu      sync.Mutex
	answers []answer
	acked   []string // the messageIds answered 202
}

func (pc *partClient) note(a answer) {
	pc.mu.Lock()
	pc.answers = append(pc.answers, a)
	pc.mu.Unlock()
}

// partTakeover is what one kill measured.
type partTakeover struct {
	takeovers   []time.Duration // kill to the survivor's first answer, each partition of the dead node
	worstBefore time.Duration   // worst answer time of the survivor's partitions before the kill
	worstDuring time.Duration   // the same from the kill to the last takeover
	failed      int             // answers of the survivor's partitions that failed in that span
	lost, dup   int             // turns acknowledged and absent; turns recorded twice
	acked       int
	fsync       string // the server's fsync setting
}

// pgPartitionTakeover: two `loom` node processes at P = 12, a conversation in every partition,
// each driven through the survivor by a retrying client (a turn posted with a messageId until
// answered 202, then its status read until answered 200, again and again); one node SIGKILLed.
// The time from the kill to the first answer the survivor served for each partition the dead node
// held (p50, max) beside the lease; the survivor's own partitions' worst answer time from the
// kill to the last takeover beside the same before the kill; turns lost and duplicated.
func pgPartitionTakeover(e *env) ([]Row, error) {
	bin, err := buildLoom(e)
	if err != nil {
		return nil, err
	}
	before := e.span(2*time.Second, 300*time.Millisecond)
	rows := takeoverRows(before)
	for r := range e.rounds() {
		m, err := runPartTakeover(e, bin, before)
		if err != nil {
			return nil, err
		}
		ts := m.takeovers
		add := func(i int, v, b float64) {
			rows[i].Measured = append(rows[i].Measured, v)
			if !math.IsNaN(b) {
				rows[i].Baseline = append(rows[i].Baseline, b)
			}
		}
		lease := ms(takeoverLease)
		add(0, ms(Percentile(ts, 0.5)), lease)
		add(1, ms(Percentile(ts, 1)), lease)
		add(2, ms(m.worstDuring), ms(m.worstBefore))
		add(3, float64(m.failed), math.NaN())
		add(4, float64(m.lost), math.NaN())
		add(5, float64(m.dup), math.NaN())
		if r == 0 {
			rows[0].Note = fmt.Sprintf("PostgreSQL fsync %s (the first round's); ", m.fsync) + rows[0].Note
		}
		e.logf("round %d: %d partitions taken over, p50 %v max %v (lease %v); survivor's partitions worst %v during, %v before, %d failed; %d turns acknowledged, %d lost, %d duplicated",
			r+1, len(ts), Percentile(ts, 0.5).Round(time.Millisecond), Percentile(ts, 1).Round(time.Millisecond), takeoverLease,
			m.worstDuring.Round(time.Millisecond), m.worstBefore.Round(time.Millisecond), m.failed, m.acked, m.lost, m.dup)
	}
	return rows, nil
}

// takeoverRows are the pg-partition-takeover figure's rows.
func takeoverRows(before time.Duration) []Row {
	lease := "the lease"
	return []Row{
		{Measure: "partition takeover: kill to the survivor's first answer, p50 over the dead node's partitions", Unit: "ms",
			BaselineName: lease, Goal: Goal{Text: "about the lease plus recovery (spec/nodes.md)"},
			Note: fmt.Sprintf("two `loom` processes at P = %d, lease %v, a conversation per partition, each client sending every request through the survivor and retrying at once (a turn with its messageId until 202, then GET until 200); node-2 SIGKILLed after %v", scalePartitions, takeoverLease, before)},
		{Measure: "partition takeover: kill to the survivor's first answer, max over the dead node's partitions", Unit: "ms",
			BaselineName: lease, Goal: Goal{Text: "about the lease plus recovery (spec/nodes.md)"}},
		{Measure: "survivor's own partitions: worst answer time from the kill to the last takeover", Unit: "ms",
			BaselineName: fmt.Sprintf("the same, over the %v before the kill (the clients' first %v warm them up)", before/2, before/2),
			Goal:         Goal{Text: "no pause: far under the lease (<= a quarter of it)", Of: "measured", AtMost: true, Bound: ms(takeoverLease) / 4}},
		{Measure: "survivor's own partitions: failed answers from the kill to the last takeover", Goal: Goal{Text: "0", Of: "measured", AtMost: true, Bound: 0}},
		{Measure: "turns lost across the kill (acknowledged 202, absent from the history)", Goal: Goal{Text: "0", Of: "measured", AtMost: true, Bound: 0},
			Note: "each turn retried with the same messageId until answered 202 (spec/http.md: a turn sent twice by one principal with one messageId is delivered once); the histories read whole through the survivor once each conversation's status counts the turns acknowledged (at most " + recordWait.String() + " after the clients stopped)"},
		{Measure: "turns duplicated across the kill (a messageId recorded twice)", Goal: Goal{Text: "0", Of: "measured", AtMost: true, Bound: 0}},
	}
}

// runPartTakeover runs one kill on a new database and measures it.
func runPartTakeover(e *env, bin string, before time.Duration) (partTakeover, error) {
	var m partTakeover
	db, err := e.database()
	if err != nil {
		return m, err
	}
	spec := nodeSpec{bin: bin, url: db.url, partitions: scalePartitions, lease: takeoverLease}
	var nodes []*loomNode
	defer func() { stopNodes(nodes) }()
	for _, id := range []string{"node-1", "node-2"} {
		nd, err := e.startLoomNode(spec, id)
		if err != nil {
			return m, err
		}
		nodes = append(nodes, nd)
	}
	survivor, victim := nodes[0], nodes[1]
	holders, err := e.waitPartitionsShared(db.url, scalePartitions, []string{survivor.id, victim.id})
	if err != nil {
		return m, err
	}
	act, err := postgres.DatabaseActivity(e.ctx, "", db.name)
	if err != nil {
		return m, err
	}
	m.fsync = act.Fsync
	clients, err := onePerPartition(e, nodes, holders)
	if err != nil {
		return m, err
	}
	convs := make([]*conv, len(clients))
	for i, pc := range clients {
		convs[i] = pc.c
	}
	if _, err := waitOwners(e, nodes, convs); err != nil {
		return m, err
	}
	kill, last, err := driveAcrossKill(e, clients, survivor, victim, before)
	if err != nil {
		return m, err
	}
	judgeTakeover(&m, clients, survivor.id, kill, last, before/2)
	m.lost, m.dup, m.acked, err = countTurns(e, survivor, clients)
	return m, err
}

// onePerPartition starts conversations through the nodes in turn until every partition has one,
// and returns a client for each, talking to the first node (the survivor). Each has an id the
// client chose (routed to its partition's holder by that id): creations without one, served where
// they land, do not reach every partition a node holds (the node's turn counter moves twice per
// creation, so a held partition right after another held one may never be picked).
func onePerPartition(e *env, nodes []*loomNode, holders map[string]string) ([]*partClient, error) {
	byPart := map[int]*partClient{}
	for i := 0; len(byPart) < scalePartitions; i++ {
		if i > 50*scalePartitions {
			return nil, fmt.Errorf("no conversation landed in %d of the %d partitions", scalePartitions-len(byPart), scalePartitions)
		}
		c, _, err := nodes[i%len(nodes)].t.newConvWith(e.ctx, i, fmt.Sprintf(`{"id":"takeover-%d"}`, i))
		if err != nil {
			return nil, err
		}
		p, err := partition.Of(partition.KeyOf(c.id), scalePartitions)
		if err != nil {
			return nil, err
		}
		if byPart[p] == nil {
			c.t = nodes[0].t
			byPart[p] = &partClient{c: c, part: p, owner: holders["partition/"+strconv.Itoa(p)]}
		}
	}
	out := make([]*partClient, 0, scalePartitions)
	for p := range scalePartitions {
		out = append(out, byPart[p])
	}
	return out, nil
}

// driveAcrossKill runs every client through the survivor for before, SIGKILLs victim, and
// goes on until every partition the victim held was answered by the survivor, then stops the
// clients (each once its current turn is acknowledged). It returns the kill's time and the last
// takeover's.
func driveAcrossKill(e *env, clients []*partClient, survivor, victim *loomNode, before time.Duration) (time.Time, time.Time, error) {
	var stop atomic.Bool
	var killAt atomic.Pointer[time.Time]
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	taken := make(chan struct{}, len(clients))
	for _, pc := range clients {
		wg.Go(func() {
			if err := pc.run(e, survivor, &stop, &killAt, victim.id, taken); err != nil {
				errs <- err
			}
		})
	}
	select {
	case <-time.After(before):
	case err := <-errs:
		stop.Store(true)
		wg.Wait()
		return time.Time{}, time.Time{}, err
	}
	e.logf("killing %s: what the survivor logs about it is expected", victim.id)
	now := time.Now()
	killAt.Store(&now)
	victim.kill()
	var last time.Time
	owned := 0
	for _, pc := range clients {
		if pc.owner == victim.id {
			owned++
		}
	}
	guard := time.After(stallGuard)
	for range owned {
		select {
		case <-taken:
			last = time.Now()
		case err := <-errs:
			stop.Store(true)
			wg.Wait()
			return now, last, err
		case <-guard:
			stop.Store(true)
			wg.Wait()
			return now, last, fmt.Errorf("the survivor did not answer for every partition of %s within %v", victim.id, stallGuard)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	return now, last, <-errs
}

// run is one client's loop: a turn with a fresh messageId, retried until 202, then the
// conversation's status, retried until 200, until stop. The first success the survivor itself
// served after the kill, for a partition of the victim, is signalled on taken.
func (pc *partClient) run(e *env, survivor *loomNode, stop *atomic.Bool, killAt *atomic.Pointer[time.Time], victim string, taken chan<- struct{}) error {
	signalled := pc.owner != victim
	try := func(method, path, body string, want int) error {
		for {
			start := time.Now()
			code, _, h, err := survivor.t.do(e.ctx, pc.c.user, method, path, body)
			a := answer{sent: start, took: time.Since(start), node: h.Get(reference.NodeHeader), ok: err == nil && code == want}
			pc.note(a)
			if k := killAt.Load(); !signalled && a.ok && a.node == survivor.id && k != nil && start.After(*k) {
				signalled = true
				taken <- struct{}{}
			}
			if a.ok {
				return nil
			}
			if e.ctx.Err() != nil {
				return e.ctx.Err()
			}
			time.Sleep(time.Millisecond)
		}
	}
	for k := 0; !stop.Load(); k++ {
		key := fmt.Sprintf("%s-%d", pc.c.id, k)
		body, _ := json.Marshal(map[string]string{"text": key, "messageId": key})
		if err := try(http.MethodPost, "/conversations/"+pc.c.id+"/turns", string(body), http.StatusAccepted); err != nil {
			return err
		}
		pc.acked = append(pc.acked, key)
		if err := try(http.MethodGet, "/conversations/"+pc.c.id, "", http.StatusOK); err != nil {
			return err
		}
	}
	return nil
}

// judgeTakeover reads the answers: for each partition of the dead node the time from the kill to
// the survivor's first success; for the survivor's own partitions the worst answer time in the
// span settled before the kill and from the kill to the last takeover, and the failures in the
// latter.
func judgeTakeover(m *partTakeover, clients []*partClient, survivor string, kill, last time.Time, before time.Duration) {
	for _, pc := range clients {
		if pc.owner != survivor {
			for _, a := range pc.answers {
				if a.ok && a.node == survivor && a.sent.After(kill) {
					m.takeovers = append(m.takeovers, a.sent.Add(a.took).Sub(kill))
					break
				}
			}
			continue
		}
		for _, a := range pc.answers {
			switch {
			case a.sent.Before(kill) && a.sent.After(kill.Add(-before)):
				m.worstBefore = max(m.worstBefore, a.took)
			case !a.sent.Before(kill) && a.sent.Before(last):
				m.worstDuring = max(m.worstDuring, a.took)
				if !a.ok {
					m.failed++
				}
			}
		}
	}
}

// recordWait bounds how long, after the clients stopped, a conversation may take to record the
// turns it acknowledged (202: durably accepted, recorded in the transcript once the
// conversation reaches them): a turn still absent then is counted lost.
const recordWait = 20 * time.Second

// waitRecorded waits until the conversation's status counts as many turns as its client had
// acknowledged, or recordWait passed.
func waitRecorded(e *env, survivor *loomNode, pc *partClient) error {
	deadline := time.Now().Add(recordWait)
	for time.Now().Before(deadline) {
		code, b, _, err := survivor.t.do(e.ctx, pc.c.user, http.MethodGet, "/conversations/"+pc.c.id, "")
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("status of %s: %d %s %v", pc.c.id, code, b, err)
		}
		var st struct {
			Turns int `json:"turns"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
		if st.Turns >= len(pc.acked) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// countTurns reads every conversation's history through the survivor and counts the
// acknowledged messageIds absent from it and those recorded more than once.
func countTurns(e *env, survivor *loomNode, clients []*partClient) (lost, dup, acked int, err error) {
	for _, pc := range clients {
		if err := waitRecorded(e, survivor, pc); err != nil {
			return 0, 0, 0, err
		}
		seen, err := messageIDs(e, survivor, pc.c)
		if err != nil {
			return 0, 0, 0, err
		}
		for _, k := range pc.acked {
			acked++
			switch n := seen[k]; {
			case n == 0:
				e.logf("lost: %s of partition %d (held by %s before the kill)", k, pc.part, pc.owner)
				lost++
			case n > 1:
				dup++
			}
		}
	}
	return lost, dup, acked, nil
}

// messageIDs reads c's whole history through t, page after page until done, and counts the
// user records of each messageId.
func messageIDs(e *env, t *loomNode, c *conv) (map[string]int, error) {
	seen := map[string]int{}
	cursor := ""
	for {
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		code, b, _, err := t.t.do(e.ctx, c.user, http.MethodGet, "/conversations/"+c.id+"/history?"+q.Encode(), "")
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("history of %s: status %d: %s %v", c.id, code, b, err)
		}
		var page struct {
			Entries []struct {
				Role      string `json:"role"`
				MessageID string `json:"messageId"`
			} `json:"entries"`
			NextCursor string `json:"nextCursor"`
			Done       bool   `json:"done"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("history of %s: %w", c.id, err)
		}
		for _, en := range page.Entries {
			if en.Role == "user" {
				seen[en.MessageID]++
			}
		}
		if page.Done {
			return seen, nil
		}
		cursor = page.NextCursor
	}
}
