package perf

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

// openNode opens a node named id on the database at url, with its data directory dir and the
// lease, and serves it on a loopback port it advertises.
func (e *env) openNode(dir, url, id string, lease time.Duration) (*target, *reference.Node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	opt, err := e.options(dir, url, nil)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	opt.Node = reference.NodeOptions{ID: id, Advertise: "http://" + ln.Addr().String(), Lease: lease}
	n, err := reference.OpenNode(e.ctx, opt)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	go func() { _ = n.Serve(ln) }()
	tr := newTransport()
	return &target{base: opt.Node.Advertise, hc: &http.Client{Transport: tr}, tr: tr, stop: n.Close}, n, nil
}

// waitLeading waits until n holds the lease.
func waitLeading(n *reference.Node) error {
	deadline := time.Now().Add(stallGuard)
	for !n.Leading() {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s did not take the lease within %v", n.ID(), stallGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// pgTakeover: two nodes on one database, the holder killed in-process (Node.Kill: nothing more
// reaches the database, the lease is not given up); the time from the kill until a request sent
// through the follower is answered by the follower itself (its Loom-Node header), beside the
// lease. Each run is on a new database holding one conversation.
func pgTakeover(e *env) ([]Row, error) {
	leases := []time.Duration{time.Second, 2 * time.Second}
	var rows []Row
	for _, l := range leases {
		rows = append(rows, Row{Measure: fmt.Sprintf("takeover: kill of the holder to the follower's answer, lease %v", l),
			Unit: "ms", BaselineName: "the lease", Goal: Goal{Text: "about the lease plus recovery (spec/nodes.md)"}})
	}
	rows[0].Note = "one GET /conversations/{id} sent through the follower right after the kill, which waits for a holder"
	for r := range e.rounds() {
		line := fmt.Sprintf("round %d:", r+1)
		for i, l := range leases {
			d, err := takeover(e, fmt.Sprintf("%d-%d", r, i), l)
			if err != nil {
				return nil, err
			}
			rows[i].Baseline = append(rows[i].Baseline, ms(l))
			rows[i].Measured = append(rows[i].Measured, ms(d))
			line += fmt.Sprintf(" lease %v: %v;", l, d.Round(time.Millisecond))
		}
		e.logf("%s", line)
	}
	return rows, nil
}

// takeover runs one takeover with the lease l and returns its time.
func takeover(e *env, tag string, l time.Duration) (time.Duration, error) {
	db, err := e.database()
	if err != nil {
		return 0, err
	}
	a, an, err := e.openNode(filepath.Join(e.dir, "a-"+tag), db.url, "perf-a", l)
	if err != nil {
		return 0, err
	}
	killed := false
	defer func() {
		if !killed {
			a.close()
		}
	}()
	if err := waitLeading(an); err != nil {
		return 0, err
	}
	b, _, err := e.openNode(filepath.Join(e.dir, "b-"+tag), db.url, "perf-b", l)
	if err != nil {
		return 0, err
	}
	defer b.close()
	// A conversation, started through the follower: it reaches the holder, and the follower
	// knows where the holder is.
	c, err := b.newConv(e.ctx, 0)
	if err != nil {
		return 0, err
	}
	e.logf("killing the holder (lease %v): what it logs as it dies is expected", l)
	start := time.Now()
	an.Kill()
	killed = true
	a.tr.CloseIdleConnections()
	for {
		code, body, h, err := b.do(e.ctx, 0, http.MethodGet, "/conversations/"+c.id, "")
		if err == nil && code == http.StatusOK && h.Get(reference.NodeHeader) == "perf-b" {
			return time.Since(start), nil
		}
		if time.Since(start) > stallGuard {
			return 0, fmt.Errorf("no answer from the follower within %v after the kill: status %d %s, %v", stallGuard, code, body, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// pgNode: what a node costs at rest. The heap in use and the goroutines a holder adds once it
// took the lease, and a follower beside it, each beside an engine on SQLite at rest; the
// database connections each holds; the transactions per second the database counts while both
// are idle (pg_stat_database, over a window).
func pgNode(e *env) ([]Row, error) {
	window := e.span(10*time.Second, time.Second)
	settle := e.span(time.Second, 200*time.Millisecond)
	rows := pgNodeRows(window)
	for r := range e.rounds() {
		liteHeap, liteG, idle, err := liteAtRest(e, r, settle)
		if err != nil {
			return nil, err
		}
		db, err := e.database()
		if err != nil {
			return nil, err
		}
		before := measureFootprint(idle)
		a, an, err := e.openNode(filepath.Join(e.dir, fmt.Sprintf("a-%d", r)), db.url, "perf-a", 0)
		if err != nil {
			return nil, err
		}
		closeA := func() { a.close() }
		if err := waitLeading(an); err != nil {
			closeA()
			return nil, err
		}
		time.Sleep(settle)
		after := measureFootprint(-1)
		ah, ag := perLive(before, after)
		actA, err := postgres.DatabaseActivity(e.ctx, "", db.name)
		if err != nil {
			closeA()
			return nil, err
		}
		txA, err := idleRate(e, db.name, window)
		if err != nil {
			closeA()
			return nil, err
		}
		before = measureFootprint(-1)
		b, _, err := e.openNode(filepath.Join(e.dir, fmt.Sprintf("b-%d", r)), db.url, "perf-b", 0)
		if err != nil {
			closeA()
			return nil, err
		}
		time.Sleep(settle)
		after = measureFootprint(-1)
		bh, bg := perLive(before, after)
		actB, err := postgres.DatabaseActivity(e.ctx, "", db.name)
		var txAB float64
		if err == nil {
			txAB, err = idleRate(e, db.name, window)
		}
		b.close()
		closeA()
		if err != nil {
			return nil, err
		}
		vals := []float64{ah, ag, bh, bg, float64(actA.Connections), float64(actB.Connections - actA.Connections), txA, txAB}
		for i, v := range vals {
			rows[i].Measured = append(rows[i].Measured, v)
			if i < 4 {
				rows[i].Baseline = append(rows[i].Baseline, []float64{liteHeap, liteG}[i%2])
			}
		}
		e.logf("round %d: SQLite engine %.0f B %.0f goroutines; holder %.0f B %.0f goroutines %d connections %.1f tx/s; follower %.0f B %.0f goroutines %d connections; both %.1f tx/s",
			r+1, liteHeap, liteG, ah, ag, actA.Connections, txA, bh, bg, actB.Connections-actA.Connections, txAB)
	}
	return rows, nil
}

// pgNodeRows are the rows of the pg-node figure, each measured over window where it is a rate.
func pgNodeRows(window time.Duration) []Row {
	base := "engine on SQLite at rest"
	return []Row{
		{Measure: "heap of a holder node at rest", Unit: "bytes", BaselineName: base,
			Note: "live Go heap (HeapAlloc after GC) the node added once it took the lease, no conversations; SQLite's own page cache is outside the Go heap"},
		{Measure: "goroutines of a holder node at rest", BaselineName: base},
		{Measure: "heap of a follower node at rest", Unit: "bytes", BaselineName: base},
		{Measure: "goroutines of a follower node at rest", BaselineName: base},
		{Measure: "database connections of the holder"},
		{Measure: "database connections of the follower"},
		{Measure: "transactions/s while idle, the holder alone", Unit: "tx/s",
			Note: fmt.Sprintf("xact_commit + xact_rollback of pg_stat_database over %v (the server publishes them up to a second late, an idle session's within about ten); default lease 10 s", window)},
		{Measure: "transactions/s while idle, holder and follower", Unit: "tx/s"},
	}
}

// liteAtRest is the pg-node figure's baseline: the heap and goroutines an engine on SQLite adds,
// open and idle, settled for settle; idle is the goroutines before it opened, which what follows
// winds down to before it is measured.
func liteAtRest(e *env, round int, settle time.Duration) (heap, goroutines float64, idle int, err error) {
	before := measureFootprint(-1)
	lite, _, err := e.openEngine(filepath.Join(e.dir, fmt.Sprintf("lite-%d", round)), "", nil)
	if err != nil {
		return 0, 0, 0, err
	}
	time.Sleep(settle)
	after := measureFootprint(-1)
	lite.close()
	heap, goroutines = perLive(before, after)
	return heap, goroutines, before.goroutines, nil
}

// idleRate is the transactions per second the database name counts over window.
func idleRate(e *env, name string, window time.Duration) (float64, error) {
	a0, err := postgres.DatabaseActivity(e.ctx, "", name)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	select {
	case <-time.After(window):
	case <-e.ctx.Done():
		return 0, e.ctx.Err()
	}
	a1, err := postgres.DatabaseActivity(e.ctx, "", name)
	if err != nil {
		return 0, err
	}
	return float64(a1.Transactions-a0.Transactions) / time.Since(start).Seconds(), nil
}

// perLive is the live heap and the goroutines between two footprints.
func perLive(before, after footprint) (live, goroutines float64) {
	return float64(after.live - before.live), float64(after.goroutines - before.goroutines)
}
