package reference

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/store"
)

// memberPrefix names the membership leases: a node of several partitions that shares them out
// holds "node/<its name>" while it runs, renewed with its partitions' leases, and every node
// reads the live ones to know who shares the partitions.
const memberPrefix = "node/"

// partitionPrefix begins every partition lease's name ("partition/<i>", newParts).
const partitionPrefix = "partition/"

// balancing reports whether the node shares the partitions out with the other nodes: at more
// than one partition, unless it was told which partitions to ask for (want: a node pinned to
// some partitions, which the package's tests use).
func (n *Node) balancing() bool { return len(n.parts) > 1 && n.want == nil }

// plan renews this node's membership and returns the plan of every live member (this node
// included): partition.Rebalance over the members whose membership has not lapsed by this node's
// clock, each keeping what it holds up to its share. nil when the store could not be read: the node then asks for every partition lease,
// as a node alone would.
func (n *Node) plan() partition.Plan {
	ctx, cancel := context.WithTimeout(context.Background(), n.ttl)
	defer cancel()
	l, err := n.leases.Acquire(ctx, memberPrefix+n.id, n.id, n.opt.Node.Advertise, n.ttl)
	if err != nil {
		n.logger.Warn("node: renewing the membership failed", "error", err)
		return nil
	}
	n.mu.Lock()
	n.member = l
	n.mu.Unlock()
	ls, err := n.leases.Grants(ctx, memberPrefix)
	if err != nil {
		n.logger.Warn("node: reading the members failed", "error", err)
		return nil
	}
	live := []string{n.id}
	now := time.Now()
	for _, m := range ls {
		if m.Expires.After(now) {
			live = append(live, m.Holder)
		}
	}
	plan, err := partition.Rebalance(len(n.parts), live, n.holders(ctx, now))
	if err != nil {
		return nil
	}
	return plan
}

// holders names the live holder of each partition as the store's grants say ("" for a lapsed or
// missing grant); nil when they could not be read, the plan then made as if nobody held any.
func (n *Node) holders(ctx context.Context, now time.Time) partition.Plan {
	ls, err := n.leases.Grants(ctx, partitionPrefix)
	if err != nil {
		n.logger.Warn("node: reading the partitions' holders failed", "error", err)
		return nil
	}
	out := make(partition.Plan, len(n.parts))
	for _, l := range ls {
		i, err := strconv.Atoi(strings.TrimPrefix(l.Name, partitionPrefix))
		if err != nil || i < 0 || i >= len(out) || !l.Expires.After(now) {
			continue
		}
		out[i] = l.Holder
	}
	return out
}

// leaveMembership gives the membership up, so the other nodes share this node's partitions out
// at once.
func (n *Node) leaveMembership() {
	n.mu.Lock()
	l := n.member
	n.mu.Unlock()
	if l.Token == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.ttl)
	defer cancel()
	_ = n.leases.Release(ctx, l)
}

// step is one pass of the node's loop: with a plan, it releases the partitions it holds that
// the plan gives another node and asks for those it gives this one (granted once free or
// lapsed); without one, it asks for every partition it wants.
func (n *Node) step(plan partition.Plan) {
	for i := range n.parts {
		if n.want != nil && !n.want(i) {
			continue
		}
		mine := plan == nil || plan[i] == n.id
		held := n.engineOf(i) != nil
		if held && mine {
			n.notDue(i)
		}
		switch {
		case held && !mine:
			n.logger.Info("node: giving a partition to the node the plan names", "node", n.id, "partition", i, "to", plan[i])
			n.handOver(i)
		case !held && mine:
			n.tryLead(i)
		}
		select {
		case <-n.done:
			return
		default:
		}
	}
}

// notDue records that partition i is no longer due to move (the plan gives it back).
func (n *Node) notDue(i int) {
	n.mu.Lock()
	n.parts[i].dueSince = time.Time{}
	n.mu.Unlock()
}

// handOverPoll is how often a node asks again for a partition another node is handing it,
// rather than once a quarter of the lease: the holder gives the lease up once its requests in
// flight are over, and the node asks at once after, so that those requests wait little.
const handOverPoll = 100 * time.Millisecond

// awaitsHandOver reports whether the node should ask for its partitions again soon: one that it
// asks for (that the plan gives it) is held by another live node, which hands it over at its
// next pass (within a quarter of the lease) and gives it up once its requests in flight are over
// (within drainWait). It asks soon for at most that long from when it first found one held
// (since, which it resets when none is), then once a renewal period again, so that a holder
// that does not give a partition up is not asked without end.
func (n *Node) awaitsHandOver(plan partition.Plan, since *time.Time) bool {
	held := false
	n.mu.Lock()
	for i := range n.parts {
		if n.want != nil && !n.want(i) || plan != nil && plan[i] != n.id {
			continue
		}
		pt := &n.parts[i]
		if pt.eng == nil && !pt.opening && holderLive(pt.holder) && pt.holder.Holder != n.id {
			held = true
			break
		}
	}
	n.mu.Unlock()
	if !held {
		*since = time.Time{}
		return false
	}
	if since.IsZero() {
		*since = time.Now()
	}
	return time.Since(*since) < n.ttl/4+drainWait
}

// holderLive reports whether l is a grant that has not lapsed.
func holderLive(l store.Lease) bool { return l.Holder != "" && time.Until(l.Expires) > 0 }
