package reference

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// NodeOptions make an engine one of several on one shared database (spec/nodes.md). Zero values
// mean the defaults.
//
//	opt.StoreURL = "postgres://loom@db/loom"
//	opt.Node = reference.NodeOptions{ID: "node-1", Advertise: "http://10.0.0.7:8080"}
type NodeOptions struct {
	// ID names the node, unique among the engines of one database. Default: an id made at the
	// first start and kept in the data directory (file node-id), so that an engine restarted on
	// the same directory is the same holder and takes its lease back at once.
	ID string
	// Advertise is the base URL (http://host:port) the other nodes forward requests to while this
	// node holds the lease.
	Advertise string
	// Lease is how long a hold on the executions lasts unless renewed (default DefaultLease). A
	// node renews every Lease/4; a node that dies has its executions taken over by another
	// about Lease after its last renewal.
	Lease time.Duration
	// Partitions is how many partitions the executions are shared out in (default
	// DefaultPartitions), each held through a lease of its own, "partition/<i>", by one node at
	// a time. The count is part of the database's layout: recorded when the database is made,
	// and a node configured with another count than the one recorded refuses to start
	// (ErrPartitionsDiffer). A database made before partitions has one.
	Partitions int
}

// DefaultLease is NodeOptions.Lease's default.
const DefaultLease = 10 * time.Second

// DefaultPartitions is NodeOptions.Partitions's default: one partition, held through the lease
// "engine" as before partitions existed.
const DefaultPartitions = 1

// ErrPartitionsDiffer: the configured partition count is not the one the database was made with.
// The engine refuses to start rather than share the executions out anew. It matches
// loomtype.ErrConfig too.
var ErrPartitionsDiffer = fmt.Errorf("%w: the partition count differs from the database's", loomtype.ErrConfig)

// leaseName is the lease a node must hold to run the executions: one lease for them all, since
// a node keeps what it runs in memory (live output, subscriptions, the executions it drives) and
// one node at a time must drive each execution (spec/nodes.md).
const leaseName = "engine"

// ErrLeaseHeld: another engine holds the shared database's lease and it has not lapsed; Open
// refuses to run beside it (OpenNode follows it instead). It is store.ErrLeaseHeld.
var ErrLeaseHeld = store.ErrLeaseHeld

// isServerURL reports whether u names a PostgreSQL database.
func isServerURL(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// openStore opens the store opt names: PostgreSQL for a StoreURL, else the SQLite file of the
// data directory.
func openStore(ctx context.Context, opt Options) (store.Store, error) {
	if opt.StoreURL != "" {
		if !isServerURL(opt.StoreURL) {
			return nil, fmt.Errorf("%w: the store URL must be a postgres:// or postgresql:// URL", loomtype.ErrConfig)
		}
		return postgres.Open(ctx, opt.StoreURL, postgres.Options{})
	}
	over := int64(checkAtOpenBytes)
	if opt.CheckStoreAtOpen {
		over = 0
	}
	return sqlite.Open(ctx, filepath.Join(opt.DataDir, dbFile), sqlite.Options{SyncNormal: opt.SyncNormal, AllowEmpty: opt.AllowEmpty,
		Cached: kernel.Bookkeeping, CheckInBackgroundOver: over})
}

// checkAtOpenBytes is the largest database (with its write-ahead log) the engine checks whole
// before Open returns, a read of a few tens of milliseconds; a larger one is checked in the
// background, each conversation's log checked whole before it is first served (sqlite.Options).
const checkAtOpenBytes = 1 << 20

// ErrPartitionRouting: more than one partition is configured for a standalone engine (Open),
// which cannot share its executions out (a node, OpenNode, routes requests between partitions).
// It matches errors.ErrUnsupported.
var ErrPartitionRouting = fmt.Errorf("%w: not shared across partitions yet", errors.ErrUnsupported)

// configuredPartitions is opt's partition count, its default filled in.
func configuredPartitions(opt Options) (int, error) {
	want := opt.Node.Partitions
	if want == 0 {
		want = DefaultPartitions
	}
	if want < 1 || want > partition.MaxPartitions {
		return 0, fmt.Errorf("%w: node.partitions must be 1 to %d", loomtype.ErrConfig, partition.MaxPartitions)
	}
	return want, nil
}

// onePartition refuses, before anything is read or recorded, a configuration of more than one
// partition (ErrPartitionRouting): what a standalone engine must see.
func onePartition(opt Options) error {
	want, err := configuredPartitions(opt)
	if err == nil && want > 1 {
		err = fmt.Errorf("%w: a standalone engine of %d partitions (run it as a node)", ErrPartitionRouting, want)
	}
	return err
}

// partitionCount is the partition count of the database raw, checked against opt's: the count
// the database recorded (opt's, when it had none yet), or ErrPartitionsDiffer when they disagree.
// An embedded store is one partition.
func partitionCount(ctx context.Context, raw store.Store, opt Options) (int, error) {
	want, err := configuredPartitions(opt)
	if err != nil {
		return 0, err
	}
	l, ok := raw.(store.Layout)
	if !ok {
		if want != 1 {
			return 0, fmt.Errorf("%w: the embedded store is one partition (partitions need a shared database)", loomtype.ErrConfig)
		}
		return 1, nil
	}
	got, err := l.Partitions(ctx, want)
	if err != nil {
		return 0, err
	}
	if got != want {
		return 0, fmt.Errorf("%w: configured %d, the database was made with %d", ErrPartitionsDiffer, want, got)
	}
	return got, nil
}

// validNodeID reports whether id may name a node: 1 to 64 letters, digits, '.', '_' or '-'.
func validNodeID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// nodeID is opt.Node.ID, or the data directory's own id, made the first time.
func nodeID(opt Options) (string, error) {
	if id := opt.Node.ID; id != "" {
		if !validNodeID(id) {
			return "", fmt.Errorf("%w: a node id is 1 to 64 letters, digits, '.', '_' or '-'", loomtype.ErrConfig)
		}
		return id, nil
	}
	path := filepath.Join(opt.DataDir, "node-id")
	if b, err := os.ReadFile(path); err == nil && validNodeID(string(b)) {
		return string(b), nil
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	id := "node-" + hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(id), 0o600); err != nil {
		return "", fmt.Errorf("reference: keep the node id: %w", err)
	}
	return id, nil
}

// leaseHold is an engine's hold on the shared database's lease: the fenced view it writes
// through, and the renewal that keeps it.
type leaseHold struct {
	leases store.Leases
	ttl    time.Duration
	logger *slog.Logger
	fenced store.Store

	mu    sync.Mutex
	lease store.Lease
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// leaseTTL is opt's lease duration.
func leaseTTL(opt Options) time.Duration {
	if opt.Node.Lease > 0 {
		return opt.Node.Lease
	}
	return DefaultLease
}

// holdLease takes the lease of raw for this engine, or answers ErrLeaseHeld (a *store.HeldError
// naming the holder) when another engine holds it.
func holdLease(ctx context.Context, raw store.Store, opt Options) (*leaseHold, error) {
	ls, ok := raw.(store.Leases)
	if !ok {
		return nil, fmt.Errorf("%w: the store cannot be shared (it has no leases)", loomtype.ErrConfig)
	}
	id, err := nodeID(opt)
	if err != nil {
		return nil, err
	}
	ttl := leaseTTL(opt)
	l, err := ls.Acquire(ctx, leaseName, id, opt.Node.Advertise, ttl)
	if err != nil {
		return nil, err
	}
	return newHold(ls, l, ttl, opt.Logger), nil
}

func newHold(ls store.Leases, l store.Lease, ttl time.Duration, lg *slog.Logger) *leaseHold {
	if lg == nil {
		lg = slog.Default()
	}
	return &leaseHold{leases: ls, ttl: ttl, logger: lg, lease: l, fenced: ls.Fence(l), done: make(chan struct{})}
}

// keep renews the lease every ttl/4 until stop; once a renewal is refused as fenced, or none has
// succeeded before the grant lapses, it calls lost (once, from its own goroutine) and ends.
func (h *leaseHold) keep(lost func()) {
	h.wg.Go(func() {
		tick := time.NewTicker(h.ttl / 4)
		defer tick.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-tick.C:
			}
			h.mu.Lock()
			l := h.lease
			h.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), h.ttl/4)
			nl, err := h.leases.Renew(ctx, l, h.ttl)
			cancel()
			if err == nil {
				h.mu.Lock()
				h.lease = nl
				h.mu.Unlock()
				continue
			}
			if errors.Is(err, store.ErrClosed) {
				return
			}
			// A renewal that failed for another reason (the database unreachable) is tried
			// again until the grant would have lapsed by our clock: past it another node may
			// hold it, and the fence refuses our writes anyway.
			if !errors.Is(err, store.ErrFenced) && time.Until(l.Expires) > h.ttl/4 {
				h.logger.Warn("lease renewal failed; trying again", "error", err)
				continue
			}
			select {
			case <-h.done:
				return
			default:
			}
			go lost()
			return
		}
	})
}

// stop ends the renewal and waits for it.
func (h *leaseHold) stop() {
	h.once.Do(func() { close(h.done) })
	h.wg.Wait()
}

// release stops the renewal and gives the lease up, so that another node may take it at once.
func (h *leaseHold) release() {
	h.stop()
	h.mu.Lock()
	l := h.lease
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = h.leases.Release(ctx, l)
}
