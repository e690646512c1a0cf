// Package store is the contract of the reference engine's durable event store: append-only
// streams of events, read back with bounded range reads in either direction, plus a small
// metadata table and a bounded set of remembered keys for deduplication. Change notifications
// wake readers; they are never a source of events.
//
// This package holds the interface, the shared types and the errors only. The backends are
// packages of their own, each the one importer of its database driver: reference/store/sqlite
// (embedded, the default) and reference/store/postgres (a server several engine nodes share).
// reference/store/storetest is the suite every backend passes.
//
// Besides Store, a backend may offer optional capabilities, found with a type assertion:
// Killer (a crash in-process, for crash tests), WriteCrasher (a crash right after a chosen
// write), Leases (ownership with fencing, for several nodes on one store), and Relaxed (a
// commit that does not wait for the disk, with the count of the opens that may have lost one).
// Leases are per name: a grant of one name fences the writes under that name alone, so a store
// shared out in partitions gives each its own name ("partition/<i>"), and Leases.Grants reads
// every grant under a prefix at once, for whoever routes requests to the holders.
package store

import (
	"context"
	"errors"
	"fmt"

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
	// ErrCrashed is what the write that reached the point armed by WriteCrasher.CrashAfterWrite
	// returns: it has committed, but the store died before telling anyone. It matches ErrClosed.
	ErrCrashed = fmt.Errorf("%w: crashed at the armed write", ErrClosed)
)

// Store is an append-only event store.
//
// All methods are safe for concurrent use. Writes are serializable: each behaves as if it ran
// alone, in some order consistent with what each saw (a backend may run writes that touch
// nothing in common at once; the shared suite, storetest, holds every backend to this); a read
// sees every write that committed before it began.
type Store interface {
	// Update runs fn in one write transaction. If fn returns an error nothing it did is kept.
	// Subscribers of every stream fn appended to are notified after the commit.
	//
	// Concurrent Updates may share one commit (group commit); each is still whole and apart:
	// fn sees what the Updates ordered before it did, fn's error (or panic) undoes fn's work and
	// nothing else, and each caller is told its own outcome (a commit that fails fails every
	// Update that shared it). fn runs on the caller's goroutine.
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
	// Close waits for the write in progress, then releases the store. Every call after it
	// answers ErrClosed (Subscribe excepted: its channel then never fires).
	Close() error
}

// Killer is a store that can stop as a crash would, for crash tests of an in-process engine.
//
//	if k, ok := st.(store.Killer); ok {
//		k.Kill()
//		<-k.Released()
//	}
type Killer interface {
	// Kill stops the store as a crash would: the write in progress (one commit, which
	// concurrent Updates may share) either commits whole or not, and nothing after it, read or
	// write, reaches the store (each answers ErrClosed).
	Kill()
	// Released is closed once the store has let go of its resources (files, connections), after
	// Close or Kill: what it wrote is then at rest. After Kill a store may keep an idle handle
	// that writes nothing, for the next open of the same storage in the process (the SQLite
	// store keeps one connection, so that its log stays as a crash leaves it).
	Released() <-chan struct{}
}

// WriteCrasher is a store that can crash itself right after a chosen durable write (a committed
// transaction that changed something), for the kit's crash exploration.
//
//	crashed := st.(store.WriteCrasher).CrashAfterWrite(3)
//	<-crashed // the third write committed; nothing after it did
type WriteCrasher interface {
	// Writes is the number of durable writes committed since the store was opened: one per
	// Update that changed something, whether or not Updates shared a commit.
	Writes() int64
	// CrashAfterWrite arms a crash right after the n-th durable write from now (n >= 1): that
	// write commits (with the writes before it that share its commit) and returns ErrCrashed,
	// every later call ErrClosed, and the returned channel is closed. Arming again replaces the
	// previous point.
	CrashAfterWrite(n int64) <-chan struct{}
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
	// DeleteMeta removes key and its value (nothing when there is none): a later Meta finds no
	// key and MetaPrefix lists none.
	DeleteMeta(key string) error
	// Remember adds key to the bounded set scope and reports whether it was new. The set keeps
	// the newest keep keys; older ones are forgotten.
	Remember(scope, key string, keep int) (fresh bool, err error)
}

// KV is one metadata pair.
type KV struct {
	Key string
	Val []byte
}
