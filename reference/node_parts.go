package reference

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/store"
)

// nodePart is one partition as a node sees it: the engine the node runs for it while it holds
// the partition's lease, else the newest grant of that lease it saw, and when.
type nodePart struct {
	lease string // the partition's lease name
	ns    string // the partition's namespace in the store ("": the root)

	eng    *Engine
	holder store.Lease
	seenAt time.Time
}

// newParts are the parts of p partitions: at one, the lease leaseName and the store's root, as
// before partitions existed; beyond, partition i has the lease "partition/<i>" and the
// namespace store.PartitionNamespace(i).
func newParts(p int) []nodePart {
	if p == 1 {
		return []nodePart{{lease: leaseName}}
	}
	parts := make([]nodePart, p)
	for i := range parts {
		ns := store.PartitionNamespace(i)
		parts[i] = nodePart{lease: strings.TrimSuffix(ns, "/"), ns: ns}
	}
	return parts
}

// owns is what the engine of partition i runs: the executions whose key falls in i (nil, all of
// them, at one partition).
func (n *Node) owns(i int) func(string) bool {
	p := len(n.parts)
	if p == 1 {
		return nil
	}
	return func(id string) bool {
		j, err := partition.Of(partition.KeyOf(id), p)
		return err == nil && j == i
	}
}

// run takes every partition lease it is to take whenever it is free, until the node closes.
func (n *Node) run() {
	tick := time.NewTicker(n.ttl / 4)
	defer tick.Stop()
	for {
		for i := range n.parts {
			if n.want != nil && !n.want(i) {
				continue
			}
			if n.engineOf(i) == nil {
				n.tryLead(i)
			}
			select {
			case <-n.done:
				return
			default:
			}
		}
		select {
		case <-n.done:
			return
		case <-tick.C:
		case <-n.wake:
		}
	}
}

// tryLead asks for partition i's lease and, granted it, opens the partition's engine on it (which
// recovers the partition's open executions) and starts serving from it.
func (n *Node) tryLead(i int) {
	name, ns := n.parts[i].lease, n.parts[i].ns
	ctx, cancel := context.WithTimeout(context.Background(), n.ttl)
	defer cancel()
	l, err := n.leases.Acquire(ctx, name, n.id, n.opt.Node.Advertise, n.ttl)
	var held *store.HeldError
	switch {
	case errors.As(err, &held):
		n.mu.Lock()
		n.parts[i].holder, n.parts[i].seenAt = held.Lease, time.Now()
		n.mu.Unlock()
		return
	case err != nil:
		if !errors.Is(err, store.ErrClosed) {
			n.logger.Warn("node: asking for the lease failed", "lease", name, "error", err)
		}
		return
	}
	n.logger.Info("node: granted the lease; recovering the executions", "node", n.id, "lease", name, "token", l.Token)
	hold := newHold(n.leases, l, n.ttl, n.logger)
	st := hold.fenced
	if ns != "" {
		st, _ = store.Namespace(st, ns) // ns is a namespace: no error
	}
	// The per-principal bounds are shared by every partition: kept at the root, fenced by this
	// partition's lease and taken as it (openQuotas).
	e := &Engine{node: true, raw: n.raw, st: st, hold: hold, owns: n.owns(i), dir: n.opt.DataDir, edge: n.edge, logger: n.logger,
		root: hold.fenced, holder: name}
	e.onLost = func() { n.lost(i, e) }
	// Recovery may take a while; the hold is renewed meanwhile.
	hold.keep(e.lose)
	if err := e.assemble(context.Background(), n.opt); err != nil {
		hold.release()
		n.logger.Error("node: the executions could not be recovered; giving the lease back", "lease", name, "error", err)
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		e.Close()
		return
	}
	n.parts[i].eng = e
	n.parts[i].holder, n.parts[i].seenAt = l, time.Now()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
	n.logger.Info("node: serving as the lease holder", "node", n.id, "lease", name)
}

// lost is called by partition i's engine e once it lost the lease: the node follows the
// partition's new holder.
func (n *Node) lost(i int, e *Engine) {
	n.mu.Lock()
	if n.parts[i].eng == e {
		n.parts[i].eng = nil
	}
	n.parts[i].seenAt = time.Time{}
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// engineOf is the engine of partition i while this node holds its lease, else nil.
func (n *Node) engineOf(i int) *Engine {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.parts[i].eng
}

// held is the partitions this node holds, in order.
func (n *Node) held() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []int
	for i, pt := range n.parts {
		if pt.eng != nil {
			out = append(out, i)
		}
	}
	return out
}

// Leading reports whether this node holds a lease (at one partition, the lease) and runs
// executions now.
func (n *Node) Leading() bool { return len(n.held()) > 0 }

// Engine is the engine this node runs while it holds the lease, else nil; with several
// partitions, the engine of partition 0.
func (n *Node) Engine() *Engine { return n.engineOf(0) }

// takeEngines takes every engine off the node's parts and returns them.
func (n *Node) takeEngines() []*Engine {
	var out []*Engine
	for i := range n.parts {
		if e := n.parts[i].eng; e != nil {
			out = append(out, e)
			n.parts[i].eng = nil
		}
	}
	return out
}

// partitionOf is the partition a request is about: at one partition 0; beyond, the partition of
// the execution the path names (a conversation, a session, a run, an execution of the runtime
// door), the threads partition for the routes of profile threads, else 0. Requests that name no
// execution yet (creations) and the routing between nodes that picks where they land are not
// built: such a request goes to partition 0.
func (n *Node) partitionOf(r *http.Request) int {
	p := len(n.parts)
	if p == 1 {
		return 0
	}
	key, ok := pathKey(r.URL.Path)
	if !ok {
		return 0
	}
	i, err := partition.Of(key, p)
	if err != nil {
		return 0
	}
	return i
}

// pathKey is the partition key of the execution path names, if it names one.
func pathKey(path string) (string, bool) {
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch seg[0] {
	case "conversations", "sessions", "runs":
		if len(seg) > 1 && seg[1] != "" {
			return partition.KeyOf(seg[1]), true
		}
	case "runtime":
		if len(seg) > 2 && seg[1] == "executions" && seg[2] != "" {
			return partition.KeyOf(seg[2]), true
		}
	case "peer", "roles", "tasks", "threads", "agent-conversations", "connections":
		return partition.ThreadsKey, true
	}
	return "", false
}
