package perf

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

// requiredCommits is the durable commits the rules require of one answered turn: the
// acknowledged message, the user's record before the model is called, and the reply. A constant,
// not counted from the engine, so that a fourth commit shows as cost.
const requiredCommits = 3

// statsSettle is how long the server may take to publish a session's counts: at the end of its
// transactions at most once a second, and those of an idle session within about ten.
const statsSettle = 11 * time.Second

// pgTurnCost: what one answered turn costs the database, at one conversation: transactions
// (beside the commits the rules require), rows written and write-ahead log bytes. The counts of
// an equal span with the engine idle (its lease renewals) are measured first and taken off.
func pgTurnCost(e *env) ([]Row, error) {
	window := e.span(2*time.Second, 150*time.Millisecond)
	db, err := e.database()
	if err != nil {
		return nil, err
	}
	pg, _, err := e.openEngine(filepath.Join(e.dir, "pg"), db.url, nil)
	if err != nil {
		return nil, err
	}
	defer pg.close()
	rows := []Row{
		{Measure: "database transactions per turn, 1 conversation", Unit: "tx/turn",
			BaselineName: "the commits the rules require", Goal: Goal{Text: "<= 1.5x", Of: "ratio", AtMost: true, Bound: 1.5},
			Note: "xact_commit + xact_rollback of pg_stat_database over the turns, less those of an equal idle span; read " + statsSettle.String() + " after each span, when the server has published them"},
		{Measure: "rows written per turn, 1 conversation", Unit: "rows/turn",
			Note: "tup_inserted + tup_updated + tup_deleted of pg_stat_database, less the idle span's"},
		{Measure: "write-ahead log per turn, 1 conversation", Unit: "bytes",
			Note: "pg_current_wal_lsn over the turns, less the idle span's (the whole server: run it alone)"},
	}
	for r := range e.rounds() {
		idle, err := spanActivity(e, db.name, window, nil)
		if err != nil {
			return nil, err
		}
		var turns int
		busy, err := spanActivity(e, db.name, window, func() error {
			l, err := runTurns(e.ctx, pg, 1, window)
			turns = len(l.lat)
			return err
		})
		if err != nil {
			return nil, err
		}
		if turns == 0 {
			return nil, fmt.Errorf("pg-turn-cost: no turn answered in %v", window)
		}
		n := float64(turns)
		tx := float64(busy.Transactions-idle.Transactions) / n
		rw := float64(busy.RowsWritten-idle.RowsWritten) / n
		wal := float64(busy.WALBytes-idle.WALBytes) / n
		rows[0].Measured, rows[0].Baseline = append(rows[0].Measured, tx), append(rows[0].Baseline, requiredCommits)
		rows[1].Measured = append(rows[1].Measured, rw)
		rows[2].Measured = append(rows[2].Measured, wal)
		e.logf("round %d: %d turns; per turn %.2f transactions, %.1f rows, %.0f WAL bytes (fsync %s, synchronous_commit %s)",
			r+1, turns, tx, rw, wal, busy.Fsync, busy.SynchronousCommit)
	}
	return rows, nil
}

// spanActivity is what database name counted while work ran (nothing: an idle span as long as
// window), each reading taken once the server has published the counts before it.
func spanActivity(e *env, name string, window time.Duration, work func() error) (postgres.Activity, error) {
	var zero postgres.Activity
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-e.ctx.Done():
			return e.ctx.Err()
		}
	}
	if err := wait(statsSettle); err != nil {
		return zero, err
	}
	a0, err := postgres.DatabaseActivity(e.ctx, "", name)
	if err != nil {
		return zero, err
	}
	start := time.Now()
	if work != nil {
		if err := work(); err != nil {
			return zero, err
		}
	}
	if err := wait(max(0, window-time.Since(start)) + statsSettle); err != nil {
		return zero, err
	}
	a1, err := postgres.DatabaseActivity(e.ctx, "", name)
	if err != nil {
		return zero, err
	}
	return postgres.Activity{Transactions: a1.Transactions - a0.Transactions, RowsWritten: a1.RowsWritten - a0.RowsWritten,
		WALBytes: a1.WALBytes - a0.WALBytes, Fsync: a1.Fsync, SynchronousCommit: a1.SynchronousCommit}, nil
}
