package perf

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

const (
	// scaleConvs is the conversations the nodes-scale figure runs at once.
	scaleConvs = 32
	// scalePartitions is P, divisible by 1, 2 and 3: each node holds an equal share (12, 6, 4)
	// at every count of nodes measured, so an uneven split of partitions is not what is seen.
	scalePartitions = 12
	// nodeShare is each node's CPU budget, in cores. Three nodes take 0.9 of the machine's two
	// cores, leaving 1.1 to PostgreSQL and to the bench's client (32 conversations over HTTP and
	// SSE): then it is the nodes' budget, not the two cores, that bounds one node, and a second
	// and third node have a core to add their budget from.
	nodeShare = 0.3
	// budgetPeriod and budgetSample: the budget's period (a node stopped for the rest of it once
	// it used nodeShare of it) and how often it reads a node's CPU time.
	budgetPeriod = 20 * time.Millisecond
	budgetSample = 2 * time.Millisecond
	// scaleLease is the nodes' lease: the balancer runs each quarter of it, so the partitions are
	// shared out within a few seconds of the last node's start.
	scaleLease = 2 * time.Second
)

// scaleRun is what one run of n nodes measured.
type scaleRun struct {
	ids      []string
	rate     float64            // turns/s, requests sent to each conversation's owner
	served   map[string]int     // turns each node served (their answers' Loom-Node)
	cpu      map[string]float64 // each node's CPU time per turn it served, ms
	stopped  map[string]float64 // the share of budget periods in which each node was stopped
	fwdOwner float64            // share of turn requests forwarded, sent to the owner
	fwdTurn  float64            // share forwarded, sent to the nodes in turn
	passes   int                // passes over every conversation and node until the owners held still
	fsync    string
	// Over the owner-routed load: PostgreSQL's CPU time per turn (ms) and the cores busy of
	// PostgreSQL, of this process (the client and the budget) and of the whole machine. pgRoot
	// is PostgreSQL's main process (0: not on this machine's /proc, and those not measured).
	pgRoot                             int
	pgPerTurn, pgCores, client, system float64
}

// nodesScale: turns/s at 32 conversations with 1, 2 and 3 `loom` node processes on one
// database at P = 12, each node held to nodeShare of a core and GOMAXPROCS=1; each node's share
// of the turns and CPU per turn; the share of requests forwarded when the client sends each
// conversation's turns to its owner and when it sends them to the nodes in turn. The baseline of
// every row is the same setup with one node, in the same round.
func nodesScale(e *env) ([]Row, error) {
	if !budgetSupported() {
		return nil, &skipError{"the CPU budget per node needs Linux"}
	}
	bin, err := buildLoom(e)
	if err != nil {
		return nil, err
	}
	window := e.span(5*time.Second, 300*time.Millisecond)
	levels := []int{1, 2, 3}
	var rows scaleRows
	for r := range e.rounds() {
		runs := make([]scaleRun, len(levels))
		for i, n := range levels {
			if runs[i], err = runScale(e, bin, n, window); err != nil {
				return nil, err
			}
		}
		rows.add(runs)
		line := fmt.Sprintf("round %d (fsync %s):", r+1, runs[0].fsync)
		for _, s := range runs {
			line += fmt.Sprintf(" %s %.0f turns/s, served %v, CPU ms/turn %v, stopped %v, forwarded %.2f owner / %.2f in turn, settled after %d passes, PostgreSQL %.2f ms/turn %.2f cores, client %.2f cores, machine %.2f cores;",
				nodesText(len(s.ids)), s.rate, s.served, roundMap(s.cpu), roundMap(s.stopped), s.fwdOwner, s.fwdTurn, s.passes, s.pgPerTurn, s.pgCores, s.client, s.system)
		}
		e.logf("%s", line)
	}
	return rows.rows(window), nil
}

// runScale runs n nodes on a new database: starts them, waits until they shared the partitions
// out, starts the conversations through the nodes in turn, waits until every conversation's
// owner holds still, and measures the turns (owner routing for window, then nodes in turn for
// half of it) under the CPU budget.
func runScale(e *env, bin string, n int, window time.Duration) (scaleRun, error) {
	var s scaleRun
	db, err := e.database()
	if err != nil {
		return s, err
	}
	spec := nodeSpec{bin: bin, url: db.url, partitions: scalePartitions, lease: scaleLease, env: []string{"GOMAXPROCS=1"}}
	var nodes []*loomNode
	defer func() { stopNodes(nodes) }()
	for i := range n {
		id := fmt.Sprintf("node-%d", i+1)
		nd, err := e.startLoomNode(spec, id)
		if err != nil {
			return s, err
		}
		nodes = append(nodes, nd)
		s.ids = append(s.ids, id)
	}
	if _, err := e.waitPartitionsShared(db.url, scalePartitions, s.ids); err != nil {
		return s, err
	}
	act, err := postgres.DatabaseActivity(e.ctx, "", db.name)
	if err != nil {
		return s, err
	}
	s.fsync = act.Fsync
	if parent, err := parentOf(act.BackendPID); err == nil && act.BackendPID != 0 {
		if _, err := treeCPU(parent); err == nil {
			s.pgRoot = parent
		}
	}
	pids := make([]int, n)
	for i, nd := range nodes {
		pids[i] = nd.pid
	}
	budget, err := startBudget(pids, nodeShare, budgetPeriod, budgetSample)
	if err != nil {
		return s, err
	}
	defer budget.stop()
	return s, measureScale(e, &s, nodes, budget, window)
}

// measureScale starts the conversations and runs the two loads of one run into s.
func measureScale(e *env, s *scaleRun, nodes []*loomNode, budget *cpuBudget, window time.Duration) error {
	byID := map[string]*loomNode{}
	for _, nd := range nodes {
		byID[nd.id] = nd
	}
	convs := make([]*conv, scaleConvs)
	owners := make([]*loomNode, scaleConvs)
	defer func() {
		for _, c := range convs {
			if c != nil {
				c.stop()
			}
		}
	}()
	if err := startScaleConvs(e, nodes, byID, convs, owners); err != nil {
		return err
	}
	passes, err := waitOwners(e, nodes, convs)
	if err != nil {
		return err
	}
	s.passes = passes
	for _, c := range convs {
		if err := c.listen(e.ctx); err != nil {
			return err
		}
	}
	if err := each(convs, func(c *conv) error { _, err := c.turn(e.ctx, "warm up"); return err }); err != nil {
		return err
	}
	cpu0 := map[string]time.Duration{}
	for _, nd := range nodes {
		cpu0[nd.id], _ = statCPU(nd.pid)
	}
	around := aroundLoad(s.pgRoot)
	owned, err := scaleLoad(e, convs, func(i, _ int) *loomNode { return owners[i] }, window)
	if err != nil {
		return err
	}
	s.rate, s.served, s.fwdOwner = owned.rate, owned.served, owned.forwarded
	s.pgPerTurn, s.pgCores, s.client, s.system = around(owned.turns)
	s.cpu, s.stopped = map[string]float64{}, map[string]float64{}
	for _, nd := range nodes {
		c1, err := statCPU(nd.pid)
		if err != nil {
			return err
		}
		if k := s.served[nd.id]; k > 0 {
			s.cpu[nd.id] = ms(c1-cpu0[nd.id]) / float64(k)
		}
		s.stopped[nd.id] = budget.stoppedShare(nd.pid)
	}
	inTurn, err := scaleLoad(e, convs, func(i, k int) *loomNode { return nodes[(i+k)%len(nodes)] }, window/2)
	if err != nil {
		return err
	}
	s.fwdTurn = inTurn.forwarded
	return nil
}

// startScaleConvs starts convs through the nodes in turn; owners[i] is the node that served
// conversation i's creation (its Loom-Node), which its client then talks to.
func startScaleConvs(e *env, nodes []*loomNode, byID map[string]*loomNode, convs []*conv, owners []*loomNode) error {
	for i := range convs {
		via := nodes[i%len(nodes)]
		c, node, err := via.t.newConvAt(e.ctx, i)
		if err != nil {
			return err
		}
		if owners[i] = byID[node]; owners[i] == nil {
			c.stop()
			return fmt.Errorf("POST /conversations through %s: answered by %q, no node of this run", via.id, node)
		}
		c.t = owners[i].t
		convs[i] = c
	}
	return nil
}

// scaleLoadResult is what one load measured.
type scaleLoadResult struct {
	turns     int
	rate      float64
	served    map[string]int
	forwarded float64
}

// scaleLoad has every conversation send a turn and wait for its reply, again and again for
// window, its k-th turn posted through via(i, k) (i the conversation's index); it counts the
// turns each node served and the share of posts served by a node other than the one they were
// sent to.
func scaleLoad(e *env, convs []*conv, via func(i, k int) *loomNode, window time.Duration) (scaleLoadResult, error) {
	type tally struct {
		served    map[string]int
		forwarded int
	}
	tallies := make([]tally, len(convs))
	index := map[*conv]int{}
	for i, c := range convs {
		index[c] = i
	}
	start := time.Now()
	err := each(convs, func(c *conv) error {
		i := index[c]
		t := &tallies[i]
		t.served = map[string]int{}
		for k := 0; time.Since(start) < window; k++ {
			to := via(i, k)
			node, err := c.sendVia(e.ctx, to.t, "hello")
			if err != nil {
				return err
			}
			if _, err := c.reply(nil); err != nil {
				return err
			}
			t.served[node]++
			if node != to.id {
				t.forwarded++
			}
		}
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return scaleLoadResult{}, err
	}
	res := scaleLoadResult{served: map[string]int{}}
	total, fwd := 0, 0
	for _, t := range tallies {
		for id, k := range t.served {
			res.served[id] += k
			total += k
		}
		fwd += t.forwarded
	}
	res.rate, res.turns = perSecond(total, took), total
	if total > 0 {
		res.forwarded = float64(fwd) / float64(total)
	}
	return res, nil
}

// waitOwners asks every node for every conversation (GET /conversations/{id}) until two passes
// in a row name the same owner for each conversation (the answer's Loom-Node), every node's
// answer naming the same one, and every node serves some; it returns the passes it took.
func waitOwners(e *env, nodes []*loomNode, convs []*conv) (int, error) {
	deadline := time.Now().Add(stallGuard)
	var prev map[string]string
	for pass := 1; ; pass++ {
		cur, ok := map[string]string{}, true
		for _, nd := range nodes {
			for _, c := range convs {
				code, _, h, err := nd.t.do(e.ctx, c.user, http.MethodGet, "/conversations/"+c.id, "")
				owner := h.Get(reference.NodeHeader)
				if err != nil || code != http.StatusOK || (cur[c.id] != "" && cur[c.id] != owner) {
					ok = false
				}
				cur[c.id] = owner
			}
		}
		serving := map[string]bool{}
		for _, o := range cur {
			serving[o] = true
		}
		for _, nd := range nodes {
			ok = ok && serving[nd.id]
		}
		if ok && equalMaps(prev, cur) {
			return pass, nil
		}
		if ok {
			prev = cur
		} else {
			prev = nil
		}
		if time.Now().After(deadline) {
			return pass, fmt.Errorf("the conversations' owners did not hold still within %v", stallGuard)
		}
	}
}

// aroundLoad reads the CPU time of PostgreSQL (the process tree of pgRoot, when not 0), of this
// process and of the machine; the function it returns reads them again and gives PostgreSQL's
// CPU per turn (ms) over turns and the cores each kept busy in between (NaN where not read).
func aroundLoad(pgRoot int) func(turns int) (pgPerTurn, pgCores, client, system float64) {
	read := func() (pg, self, all time.Duration, pgOK, ok bool) {
		var err1, err2, err3 error
		if pgRoot != 0 {
			pg, err1 = treeCPU(pgRoot)
		}
		self, err2 = processCPU(os.Getpid())
		all, err3 = machineBusy()
		return pg, self, all, pgRoot != 0 && err1 == nil, err2 == nil && err3 == nil
	}
	pg0, self0, all0, pgOK0, ok0 := read()
	start := time.Now()
	return func(turns int) (float64, float64, float64, float64) {
		pg1, self1, all1, pgOK1, ok1 := read()
		wall := time.Since(start).Seconds()
		nan := math.NaN()
		pgPerTurn, pgCores, client, system := nan, nan, nan, nan
		if pgOK0 && pgOK1 && turns > 0 {
			pgPerTurn, pgCores = ms(pg1-pg0)/float64(turns), (pg1-pg0).Seconds()/wall
		}
		if ok0 && ok1 {
			client, system = (self1-self0).Seconds()/wall, (all1-all0).Seconds()/wall
		}
		return pgPerTurn, pgCores, client, system
	}
}

// roundMap rounds every value to two decimals, for the log.
func roundMap(m map[string]float64) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprintf("%.2f", v)
	}
	return out
}
