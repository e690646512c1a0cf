// Package partition is the pure part of sharing an engine's executions out between nodes. Every
// execution belongs to one of P partitions, by its key, with P fixed when the database is made;
// each partition is run by one node at a time, under a lease of its own. This package says which
// partition a key is in and which node should own each partition, given the nodes that are alive.
// It reads no clock and no store: the node takes, renews and gives up the leases it names.
package partition

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
)

// MaxPartitions bounds P: the plan weighs every pair of node and partition.
const MaxPartitions = 4096

// ErrCount: a partition count below 1 or above MaxPartitions.
var ErrCount = errors.New("partition: count out of range")

// Of returns the partition of key among p partitions: FNV-1a (64 bits) of the key's bytes,
// modulo p. It is part of the database's layout, as P is: an execution's partition never changes,
// so a change to this function is a migration of every stored execution.
//
// Errors: ErrCount.
func Of(key string, p int) (int, error) {
	if p < 1 || p > MaxPartitions {
		return 0, fmt.Errorf("%w: %d", ErrCount, p)
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	return int(h.Sum64() % uint64(p)), nil
}

// Plan is which node should own each partition: Plan[i] names the owner of partition i ("" when
// no node is alive).
type Plan []string

// Assign returns the plan for p partitions among nodes (node names; their order and repeats do
// not matter, so every node computes the same plan from the same set).
//
// The plan is balanced: with n nodes, each owns p/n partitions, or one more (p%n of them, chosen
// by a weight of each node's own). It moves little as nodes come and go: every pair of node and partition has a
// weight (FNV-1a of both), and the pairs are taken heaviest first, each partition going to the
// first node that wants it and still has room. A partition's owner changes only when its heavier
// node appears or leaves, or balance requires it (Moves counts the changes).
//
// Errors: ErrCount.
func Assign(p int, nodes []string) (Plan, error) { return Rebalance(p, nodes, nil) }

// Rebalance is Assign for nodes some of which hold partitions already (held[i] names the holder
// of partition i, "" for none; nil for no holder at all): first every node in nodes keeps the
// partitions it holds, up to its share (the heaviest pairs first), then the rest is given out as
// Assign does. So a node that leaves moves only its own partitions, and one that joins takes
// only what the others hold beyond their new shares; every node computes the same plan from the
// same members and holders.
//
// Errors: ErrCount.
func Rebalance(p int, nodes []string, held Plan) (Plan, error) {
	if p < 1 || p > MaxPartitions {
		return nil, fmt.Errorf("%w: %d", ErrCount, p)
	}
	set := slices.Clone(nodes)
	slices.Sort(set)
	set = slices.Compact(set)
	if len(set) > 0 && set[0] == "" {
		set = set[1:]
	}
	plan := make(Plan, p)
	if len(set) == 0 {
		return plan, nil
	}
	pairs := make([]pair, 0, p*len(set))
	for i, n := range set {
		for j := 0; j < p; j++ {
			pairs = append(pairs, pair{weight(n, j), i, j})
		}
	}
	slices.SortFunc(pairs, pairOrder)
	// Which nodes own one more: the p%n with the heaviest weight of their own, so that the choice
	// moves little as nodes come and go.
	room := make([]int, len(set))
	byWeight := make([]int, len(set))
	for i := range set {
		room[i], byWeight[i] = p/len(set), i
	}
	slices.SortFunc(byWeight, func(a, b int) int {
		wa, wb := weight(set[a], -1), weight(set[b], -1)
		if wa != wb {
			if wa > wb {
				return -1
			}
			return 1
		}
		return a - b
	})
	for _, i := range byWeight[:p%len(set)] {
		room[i]++
	}
	left := p
	take := func(keep bool) {
		for _, pr := range pairs {
			if left == 0 {
				return
			}
			if plan[pr.part] != "" || room[pr.node] == 0 {
				continue
			}
			if keep && (pr.part >= len(held) || held[pr.part] != set[pr.node]) {
				continue
			}
			plan[pr.part] = set[pr.node]
			room[pr.node]--
			left--
		}
	}
	take(true)
	take(false)
	return plan, nil
}

// pair is a node (its place among the members, in byte order of their names) and a partition,
// with the pair's weight.
type pair struct {
	w    uint64
	node int
	part int
}

// pairOrder is the order Rebalance takes the pairs in: heaviest first, pairs of equal weight by
// node, then by partition, so that every node sorts them alike.
func pairOrder(a, b pair) int {
	switch {
	case a.w != b.w:
		if a.w > b.w {
			return -1
		}
		return 1
	case a.node != b.node:
		return a.node - b.node
	}
	return a.part - b.part
}

// weight is the pair's place in the order Assign takes pairs in.
func weight(node string, part int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(part)))
	// FNV of names that differ in their last byte are close; a finalizer (SplitMix64's) spreads
	// them, so that a node's partitions are not runs of neighbours.
	x := h.Sum64()
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Owned returns the partitions pl gives node, in order.
func (pl Plan) Owned(node string) []int {
	var out []int
	for i, n := range pl {
		if n == node && node != "" {
			out = append(out, i)
		}
	}
	return out
}

// Moves counts the partitions whose owner differs between a and b (plans of the same count).
func Moves(a, b Plan) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}
