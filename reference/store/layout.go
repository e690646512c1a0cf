package store

import (
	"context"
	"errors"
)

// ErrPartitionCount: a partition count below 1.
var ErrPartitionCount = errors.New("store: a partition count is at least 1")

// Layout is a store that records how many partitions its executions are shared out in: the
// count is part of the database's layout (every execution's partition is computed from it), so
// it is fixed when the database is made and never changes after.
//
//	if l, ok := st.(store.Layout); ok { p, err = l.Partitions(ctx, 12) }
type Layout interface {
	// Partitions records propose as the store's partition count when it has none yet, and
	// returns the count recorded: propose, or the count recorded before (1 for a database
	// written before partitions existed). Errors: ErrPartitionCount for a propose below 1,
	// ErrClosed.
	Partitions(ctx context.Context, propose int) (int, error)
}
