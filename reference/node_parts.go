package reference

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/store"
)

// nodePart is one partition as a node sees it: the engine the node runs for it while it holds
// the partition's lease, else the newest grant of that lease it saw, and when.
type nodePart struct {
	lease string // the partition's lease name
	ns    string // the partition's namespace in the store ("": the root)

	eng     *Engine
	opening bool // granted the lease, the engine is being opened
	holder  store.Lease
	seenAt  time.Time

	// draining: the partition is being handed to another node; no new request enters eng,
	// whose requests in flight (inflight of them) finish first. idle is closed once none is.
	draining bool
	inflight int
	idle     chan struct{}
	// dueSince is when the plan first gave the partition to another node while its engine ran
	// live work (zero: not due).
	dueSince time.Time
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

// run takes the partition leases it is to take whenever they are free, until the node closes:
// every one it wants, or, sharing them out with other nodes (balancing), those the plan of the
// live members gives it, releasing those the plan gives another.
func (n *Node) run() {
	tick := time.NewTicker(n.ttl / 4)
	defer tick.Stop()
	if n.balancing() && !n.join() {
		return
	}
	var due time.Time // since when a partition the node asks for has been held by another node
	for {
		var plan partition.Plan
		if n.balancing() {
			plan = n.plan()
		}
		n.step(plan)
		var soon <-chan time.Time
		if n.awaitsHandOver(plan, &due) {
			soon = time.After(min(handOverPoll, n.ttl/8))
		}
		select {
		case <-n.done:
			return
		case <-tick.C:
		case <-n.wake:
		case <-soon:
		}
	}
}

// join makes the node a member and waits one renewal period (a quarter of the lease) before it
// asks for any partition: nodes started together see each other's memberships by then, so each
// asks for its own share at once, instead of the first taking every partition and handing most
// of them over a moment later. false when the node closed meanwhile.
func (n *Node) join() bool {
	n.plan()
	select {
	case <-n.done:
		return false
	case <-time.After(n.ttl / 4):
		return true
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
	n.setOpening(i, true)
	defer n.setOpening(i, false)
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
	opt := n.opt
	if len(n.parts) > 1 {
		opt.Stream.Elsewhere = n.branchElsewhere // a branch may fall in another partition
	}
	if err := e.assemble(context.Background(), opt); err != nil {
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
	n.broadcast()
	n.mu.Unlock()
	n.logger.Info("node: serving as the lease holder", "node", n.id, "lease", name)
}

// setOpening records whether partition i's engine is being opened.
func (n *Node) setOpening(i int, on bool) {
	n.mu.Lock()
	n.parts[i].opening = on
	n.mu.Unlock()
}

// lost is called by partition i's engine e once it lost the lease: the node follows the
// partition's new holder.
func (n *Node) lost(i int, e *Engine) {
	n.mu.Lock()
	if n.parts[i].eng == e {
		n.parts[i].eng = nil
	}
	n.parts[i].seenAt = time.Time{}
	n.broadcast()
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

// serving is the engine that serves a request for dest on this node (nil when it holds no such
// partition, or hands it over), the channel closed at the next change of the node's engines, and
// whether the node is opening such a partition's engine (granted its lease, recovering it). A
// request for any partition goes to the partitions served here in turn, each once a round. With
// an engine comes leave, which the caller calls once the request is over: until then the request
// counts as in flight there, and a hand-over waits for it.
func (n *Node) serving(dest destination) (eng *Engine, leave func(), changed chan struct{}, opening bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !dest.anyPart {
		pt := &n.parts[dest.part]
		if pt.eng == nil || pt.draining {
			return nil, nil, n.changed, pt.opening
		}
		return pt.eng, n.enter(dest.part), n.changed, false
	}
	servedHere := func(pt *nodePart) bool { return pt.eng != nil && !pt.draining }
	k := 0
	for i := range n.parts {
		pt := &n.parts[i]
		if servedHere(pt) {
			k++
		}
		opening = opening || pt.opening || pt.draining
	}
	if k == 0 {
		return nil, nil, n.changed, opening
	}
	nth := int(n.turn.Add(1) % uint64(k))
	for i := range n.parts {
		if !servedHere(&n.parts[i]) {
			continue
		}
		if nth == 0 {
			return n.parts[i].eng, n.enter(i), n.changed, false
		}
		nth--
	}
	return nil, nil, n.changed, opening // not reached: k parts are served here
}

// enterPart is partition i's engine with its leave (see serving), or nil when this node does
// not serve the partition now.
func (n *Node) enterPart(i int) (*Engine, func()) {
	eng, leave, _, _ := n.serving(destination{part: i})
	return eng, leave
}

// enter counts a request in flight in partition i's engine and returns what ends it; n.mu is
// held.
func (n *Node) enter(i int) func() {
	n.parts[i].inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			pt := &n.parts[i]
			pt.inflight--
			if pt.inflight == 0 && pt.idle != nil {
				close(pt.idle)
				pt.idle = nil
			}
		})
	}
}

// spread is the partition a request for any partition is forwarded by when this node holds
// none: the partitions in turn, so that such requests spread over their holders.
func (n *Node) spread() int { return int(n.away.Add(1) % uint64(len(n.parts))) }

// holderOf is the live grant of partition i's lease held by another node with an address, read
// anew when the one seen is older than an eighth of the lease; zero when there is none.
func (n *Node) holderOf(ctx context.Context, i int) store.Lease {
	n.mu.Lock()
	holder, seenAt := n.parts[i].holder, n.parts[i].seenAt
	n.mu.Unlock()
	if time.Since(seenAt) > n.ttl/8 {
		holder = n.refreshHolder(ctx, i)
	}
	if !holderLive(holder) || holder.Holder == n.id || holder.Note == "" {
		return store.Lease{}
	}
	return holder
}

// forget drops the grant of partition i seen last, so that the next look reads it anew.
func (n *Node) forget(i int) {
	n.mu.Lock()
	n.parts[i].seenAt = time.Time{}
	n.mu.Unlock()
}

// handOverDefer bounds how long a partition due to move waits for a quiet moment (handOver).
const handOverDefer = 30 * time.Second

// handOver starts giving partition i up (release) in the background, and reports whether it
// did: not when it is already being given up, nor, while the partition has been due to move for
// less than handOverDefer, when it is busy: a request or a stream in flight in its engine (which
// the move would end), or live work (a model or tool call, which the next holder would run
// again; a ticket waiting, which it would not know). A planned move waits for a quiet moment, as
// a crash cannot.
func (n *Node) handOver(i int) bool {
	n.mu.Lock()
	pt := &n.parts[i]
	e := pt.eng
	if pt.draining || e == nil {
		n.mu.Unlock()
		return false
	}
	if pt.dueSince.IsZero() {
		pt.dueSince = time.Now()
	}
	waited := time.Since(pt.dueSince)
	inflight := pt.inflight
	n.mu.Unlock()
	if (inflight > 0 || e.liveWork() > 0) && waited < time.Duration(n.moveDefer.Load()) {
		return false
	}
	n.wg.Go(func() { n.release(i) })
	return true
}

// drainWait bounds how long a hand-over waits for the requests in flight in the partition's
// engine before it closes it all the same.
const drainWait = closeGrace

// release gives partition i up if this node runs it, and returns once it did: no new request
// enters its engine from now on (they wait for the next holder, or are answered 421 when another
// node forwarded them, which then asks the next holder); its open streams end, so that their
// clients resume at the next holder; once the requests in flight are over (or drainWait passed),
// the engine closes and the lease is given up, so that another node is granted it at once. The
// node asks for it again unless the plan, by then, gives it another.
func (n *Node) release(i int) {
	n.mu.Lock()
	e := n.parts[i].eng
	if e == nil || n.parts[i].draining {
		n.mu.Unlock()
		return
	}
	pt := &n.parts[i]
	pt.draining = true
	idle := make(chan struct{})
	if pt.inflight == 0 {
		close(idle)
	} else {
		pt.idle = idle
	}
	n.broadcast()
	n.mu.Unlock()
	e.endStreams()
	if !n.drained(e, idle) {
		n.logger.Warn("node: requests or model and tool calls still in flight at the end of a hand-over", "node", n.id, "partition", i)
	}
	n.mu.Lock()
	if pt.eng != e {
		// The node closed (or lost the lease) meanwhile: whoever took the engine stops it.
		pt.draining, pt.idle = false, nil
		n.mu.Unlock()
		return
	}
	pt.eng, pt.draining, pt.idle = nil, false, nil
	pt.seenAt, pt.dueSince = time.Time{}, time.Time{}
	n.broadcast()
	n.mu.Unlock()
	_ = e.Close()
}

// drained waits, for drainWait at most, until idle is closed (no request in flight in e any
// more) and e runs no live work, woken by the engine as each ends (Engine.liveQuiet); false when
// the bound came first, or the node closed meanwhile.
func (n *Node) drained(e *Engine, idle <-chan struct{}) bool {
	wait := time.NewTimer(drainWait)
	defer wait.Stop()
	select {
	case <-idle:
	case <-wait.C:
		return false
	case <-n.done:
		return false
	}
	for {
		quiet := e.liveQuiet()
		if quiet == nil {
			return true
		}
		select {
		case <-quiet:
		case <-wait.C:
			return false
		case <-n.done:
			return false
		}
	}
}

// broadcast wakes every request waiting for a change of the node's engines; n.mu is held.
func (n *Node) broadcast() {
	close(n.changed)
	n.changed = make(chan struct{})
}
