// Package store is the reference engine's durable event store: append-only streams of events,
// read back with bounded range reads in either direction, plus a small metadata table and a
// bounded set of remembered keys for deduplication. Change notifications wake readers; they are
// never a source of events.
//
// The Store interface is what the rest of the engine uses, so a server database can replace the
// SQLite implementation (Open) when one node is not enough.
package store

import (
	"context"
	"errors"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Event is one appended fact. Within a (Stream, Gen) pair, Seq runs 1, 2, 3... with no gaps.
type Event struct {
	Stream string
	Gen    int64
	Seq    int64
	Kind   string
	Data   []byte
	// Time is when the event was appended, in Unix milliseconds.
	Time int64
}

// NewEvent is an event to append.
type NewEvent struct {
	Kind string
	Data []byte
}

// MaxRead is the largest number of events one read returns, whatever limit is asked for.
const MaxRead = 1024

// Errors returned by stores.
var (
	// ErrConflict: an Append's expected head did not match the stream's head.
	ErrConflict = errors.New("store: append conflict")
	// ErrClosed: the store is closed or was killed. It matches loomtype.ErrStoreClosed.
	ErrClosed = loomtype.ErrStoreClosed
)

// Store is an append-only event store.
//
// All methods are safe for concurrent use. Writes are serialised; a read sees every write that
// committed before it began.
type Store interface {
	// Update runs fn in one write transaction. If fn returns an error nothing it did is kept.
	// Subscribers of every stream fn appended to are notified after the commit.
	Update(ctx context.Context, fn func(Tx) error) error
	// ReadForward returns up to limit events of (stream, gen) with Seq > after, oldest first.
	ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]Event, error)
	// ReadBackward returns up to limit events of (stream, gen) with Seq < before, newest first.
	ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]Event, error)
	// Head returns the newest Seq of (stream, gen), 0 when it is empty.
	Head(ctx context.Context, stream string, gen int64) (int64, error)
	// Meta returns the metadata value stored under key.
	Meta(ctx context.Context, key string) (val []byte, ok bool, err error)
	// MetaPrefix returns every metadata pair whose key starts with prefix, by key order.
	MetaPrefix(ctx context.Context, prefix string) ([]KV, error)
	// Subscribe returns a channel that receives a value (coalesced, never blocking the writer)
	// after each commit that appended to stream, and a function that ends the subscription.
	Subscribe(stream string) (<-chan struct{}, func())
	// Close waits for the write in progress, then releases the store.
	Close() error
	// Kill stops the store as a crash would: the write in progress either commits or not, and
	// nothing after it, read or write, reaches the store. Used to simulate a crash of an
	// in-process engine.
	Kill()
}

// Tx is one write transaction.
type Tx interface {
	// Append appends events to (stream, gen). When expect >= 0 the stream's head must equal
	// expect or the append fails with ErrConflict. It returns the Seq of the last event.
	Append(stream string, gen, expect int64, evs ...NewEvent) (int64, error)
	// Head is Store.Head inside the transaction.
	Head(stream string, gen int64) (int64, error)
	// PutMeta stores val under key.
	PutMeta(key string, val []byte) error
	// Meta reads key inside the transaction.
	Meta(key string) ([]byte, bool, error)
	// Remember adds key to the bounded set scope and reports whether it was new. The set keeps
	// the newest keep keys; older ones are forgotten.
	Remember(scope, key string, keep int) (fresh bool, err error)
}

// KV is one metadata pair.
type KV struct {
	Key string
	Val []byte
}
