package perf

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// scaleRows gathers the nodes-scale figure's values round after round; runs[i] of a round is
// the run of i+1 nodes.
type scaleRows struct {
	rate      [3][]float64
	deviation [3][]float64
	cpu       [3][][]float64 // by level, then by node
	fwdOwner  [3][]float64
	fwdTurn   [3][]float64
	stopped   [3][]float64 // the least-stopped node's share of periods stopped
	passes    []int
	fsync     []string
	pgPerTurn [3][]float64
	cores     [3][3][]float64 // by level: PostgreSQL, the client, the machine
}

func (sr *scaleRows) add(runs []scaleRun) {
	for i, s := range runs {
		sr.rate[i] = append(sr.rate[i], s.rate)
		sr.deviation[i] = append(sr.deviation[i], worstDeviation(s.served, s.ids))
		if sr.cpu[i] == nil {
			sr.cpu[i] = make([][]float64, len(s.ids))
		}
		least := math.Inf(1)
		for j, id := range s.ids {
			sr.cpu[i][j] = append(sr.cpu[i][j], s.cpu[id])
			least = min(least, s.stopped[id])
		}
		sr.fwdOwner[i] = append(sr.fwdOwner[i], s.fwdOwner)
		sr.fwdTurn[i] = append(sr.fwdTurn[i], s.fwdTurn)
		sr.stopped[i] = append(sr.stopped[i], least)
		sr.passes = append(sr.passes, s.passes)
		sr.pgPerTurn[i] = append(sr.pgPerTurn[i], s.pgPerTurn)
		for j, v := range []float64{s.pgCores, s.client, s.system} {
			sr.cores[i][j] = append(sr.cores[i][j], v)
		}
		sr.fsync = append(sr.fsync, s.fsync)
	}
}

// worstDeviation is, in percent, the largest distance of a node's share of the turns from an
// even share (100/len(ids) %), over that even share.
func worstDeviation(served map[string]int, ids []string) float64 {
	total := 0
	for _, id := range ids {
		total += served[id]
	}
	if total == 0 {
		return math.NaN()
	}
	even := float64(total) / float64(len(ids))
	worst := 0.0
	for _, id := range ids {
		worst = max(worst, math.Abs(float64(served[id])-even)/even*100)
	}
	return worst
}

// rows are the figure's rows; window is the owner-routed load's length.
func (sr *scaleRows) rows(window time.Duration) []Row {
	one := "1 node, the same round"
	fsync := "unknown"
	if len(sr.fsync) > 0 {
		fsync = sr.fsync[0]
		if slices.ContainsFunc(sr.fsync, func(f string) bool { return f != fsync }) {
			fsync = "mixed"
		}
	}
	rows := []Row{
		{Measure: fmt.Sprintf("turns/s, %d conversations, 1 node", scaleConvs), Unit: "turns/s", Measured: sr.rate[0],
			Note: fmt.Sprintf("`loom` processes on one PostgreSQL database (fsync %s), P = %d (divisible by 1, 2 and 3: an equal share of partitions each); each node GOMAXPROCS=1 and held to %.1f of a core (SIGSTOP once it used %.1f × %v of a period, CPU read every %v; 3 nodes take 0.9 of the 2 cores, leaving 1.1 to PostgreSQL and the client); lease %v; the conversations started through the nodes in turn once the partition leases were shared out, each then sent its turns to its owner (the creation's Loom-Node) for %v per run; measured once every node named the same owner of every conversation on two passes in a row (%s passes)",
				fsync, scalePartitions, nodeShare, nodeShare, budgetPeriod, budgetSample, scaleLease, window, passesText(sr.passes))},
		{Measure: fmt.Sprintf("turns/s, %d conversations, 2 nodes over 1", scaleConvs), Unit: "turns/s", Measured: sr.rate[1], Baseline: sr.rate[0],
			BaselineName: one, Goal: Goal{Text: ">= 1.6x", Of: "ratio", Bound: 1.6}},
		{Measure: fmt.Sprintf("turns/s, %d conversations, 3 nodes over 1", scaleConvs), Unit: "turns/s", Measured: sr.rate[2], Baseline: sr.rate[0],
			BaselineName: one, Goal: Goal{Text: "reported"}},
	}
	for i := 1; i < 3; i++ {
		rows = append(rows, Row{Measure: fmt.Sprintf("worst node's share of the turns from even, %d nodes", i+1), Unit: "%",
			Measured: sr.deviation[i], Goal: Goal{Text: "<= 10%", Of: "measured", AtMost: true, Bound: 10},
			Note: "turns counted by the Loom-Node of each turn's answer; |share - even| / even"})
	}
	for i := range 3 {
		for j, v := range sr.cpu[i] {
			r := Row{Measure: fmt.Sprintf("CPU per turn, node-%d of %d", j+1, i+1), Unit: "ms", Measured: v}
			if i > 0 {
				r.Baseline, r.BaselineName = sr.cpu[0][0], one
			} else {
				r.Note = "utime + stime of the node's /proc/<pid>/stat over the owner-routed load, over the turns it served"
			}
			rows = append(rows, r)
		}
	}
	for i := 1; i < 3; i++ {
		rows = append(rows, Row{Measure: fmt.Sprintf("share of turn requests forwarded, sent to the owner, %d nodes", i+1),
			Measured: sr.fwdOwner[i], Goal: Goal{Text: "0", Of: "measured", AtMost: true, Bound: 0},
			Note: "a POST whose answer's Loom-Node is not the node it was sent to"})
	}
	for i := 1; i < 3; i++ {
		rows = append(rows, Row{Measure: fmt.Sprintf("share of turn requests forwarded, sent to the nodes in turn, %d nodes", i+1),
			Measured: sr.fwdTurn[i], Goal: Goal{Text: fmt.Sprintf("about (n-1)/n = %.2f", float64(i)/float64(i+1))},
			Note: fmt.Sprintf("each conversation's k-th turn posted through node k mod n, for %v", window/2)})
	}
	for i := range 3 {
		rows = append(rows, Row{Measure: "share of budget periods in which the least-stopped node used its share up, " + nodesText(i+1),
			Measured: sr.stopped[i], Goal: Goal{Text: "reported"},
			Note: "near 1: the budget, not the machine, bounds every node"})
	}
	return append(rows, sr.cpuRows()...)
}

// cpuRows are the rows of PostgreSQL's CPU per turn and of the cores PostgreSQL, the client and
// the machine kept busy, each only when it was read in every run.
func (sr *scaleRows) cpuRows() []Row {
	whole := func(v []float64) bool { return !slices.ContainsFunc(v, math.IsNaN) }
	var rows []Row
	for i := range 3 {
		if !whole(sr.pgPerTurn[i]) {
			return nil
		}
		r := Row{Measure: "PostgreSQL's CPU per turn, " + nodesText(i+1), Unit: "ms", Measured: sr.pgPerTurn[i],
			Note: "utime + stime of the server's main process and its children (/proc, those reaped included) over the owner-routed load, over the turns; the whole server, so run it alone"}
		if i > 0 {
			r.Baseline, r.BaselineName, r.Note = sr.pgPerTurn[0], "1 node, the same round", ""
		}
		rows = append(rows, r)
	}
	for j, who := range []string{"PostgreSQL", "the client (this process: 32 conversations and the budget)", "the whole machine (/proc/stat)"} {
		for i := range 3 {
			if !whole(sr.cores[i][j]) {
				continue
			}
			rows = append(rows, Row{Measure: fmt.Sprintf("cores busy, %s, %s", who, nodesText(i+1)), Unit: "cores",
				Measured: sr.cores[i][j], Goal: Goal{Text: "reported"}})
		}
	}
	return rows
}

// nodesText is "1 node", "2 nodes".
func nodesText(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

// passesText lists the passes each run took, "2, 3, 2".
func passesText(p []int) string {
	s := ""
	for i, v := range p {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprint(v)
	}
	return s
}
