package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Activity is a measuring aid, not part of the store: what the server says about one database
// and how it keeps commits (reference/perf quotes it beside the figures it measures there).
type Activity struct {
	// Connections is the number of sessions connected to the database (pg_stat_activity).
	Connections int
	// Transactions is the number of transactions the database committed or rolled back since
	// the server's statistics were reset (pg_stat_database: xact_commit + xact_rollback). The
	// server publishes a session's counts at the end of its transactions, at most once a
	// second, and those of an idle session within about ten seconds.
	Transactions int64
	// RowsWritten is the rows the database inserted, updated or deleted (pg_stat_database:
	// tup_inserted + tup_updated + tup_deleted), published as Transactions is.
	RowsWritten int64
	// WALBytes is the server's write-ahead log position in bytes (pg_current_wal_lsn): the
	// difference of two readings is what every database of the server logged between them.
	WALBytes int64
	// Fsync and SynchronousCommit are the server's settings of those names: with either "off" a
	// commit does not wait for the disk.
	Fsync, SynchronousCommit string
	// BackendPID is the server process that answered the reading (pg_backend_pid()): on the same
	// machine, its parent is the server's main process.
	BackendPID int
}

// DatabaseActivity reads the Activity of the database name through a connection of its own to
// adminURL (as CreateDatabase takes it: the empty string means the PG* environment variables),
// which should name another database so as not to count itself.
//
// Errors: the server cannot be reached, or refuses the reads.
//
//	a, err := postgres.DatabaseActivity(ctx, "", "loombench_1")
//	if err != nil { return err }
//	fmt.Println(a.Connections, a.Transactions)
func DatabaseActivity(ctx context.Context, adminURL, name string) (Activity, error) {
	var a Activity
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return a, fmt.Errorf("store: activity of %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pg_stat_activity WHERE datname = $1),
		COALESCE((SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1), 0),
		COALESCE((SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = $1), 0),
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,
		current_setting('fsync'), current_setting('synchronous_commit'), pg_backend_pid()`, name).
		Scan(&a.Connections, &a.Transactions, &a.RowsWritten, &a.WALBytes, &a.Fsync, &a.SynchronousCommit, &a.BackendPID)
	if err != nil {
		return a, fmt.Errorf("store: activity of %s: %w", name, err)
	}
	return a, nil
}
