package partition

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Pairs of equal weight (two FNV-1a values alike: no pair of names at hand has them, so they are
// made here) are taken by node, then by partition (docs/partitions.md, The plan, exactly, 4).
func TestPairsOfEqualWeightAreTakenByNodeThenPartition(t *testing.T) {
	for _, c := range []struct {
		a, b pair
		want int // the sign of pairOrder(a, b): -1, a first
	}{
		{pair{w: 9, node: 1, part: 0}, pair{w: 7, node: 0, part: 0}, -1}, // heavier first
		{pair{w: 7, node: 0, part: 5}, pair{w: 9, node: 1, part: 0}, 1},
		{pair{w: 5, node: 0, part: 3}, pair{w: 5, node: 1, part: 0}, -1}, // equal: the first node
		{pair{w: 5, node: 2, part: 0}, pair{w: 5, node: 1, part: 3}, 1},
		{pair{w: 5, node: 1, part: 2}, pair{w: 5, node: 1, part: 3}, -1}, // same node: the first partition
		{pair{w: 5, node: 1, part: 4}, pair{w: 5, node: 1, part: 3}, 1},
		{pair{w: 5, node: 1, part: 3}, pair{w: 5, node: 1, part: 3}, 0},
	} {
		got := pairOrder(c.a, c.b)
		assert.Equal(t, c.want, sign(got), "pairOrder(%+v, %+v) = %d", c.a, c.b, got)
	}
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// The weight of a node and a partition is the one docs/partitions.md writes out (The plan,
// exactly, 2): FNV-1a (64 bits) of the node's name, a zero byte and the partition in decimal,
// through SplitMix64's finalizer; a node's own weight is that of partition -1. Computed here
// apart, every bit compared.
func TestWeightIsTheWrittenOne(t *testing.T) {
	written := func(node string, part int) uint64 {
		z := uint64(14695981039346656037)
		for _, b := range []byte(node + "\x00" + strconv.Itoa(part)) {
			z ^= uint64(b)
			z *= 1099511628211
		}
		z ^= z >> 30
		z *= 0xbf58476d1ce4e5b9
		z ^= z >> 27
		z *= 0x94d049bb133111eb
		z ^= z >> 31
		return z
	}
	for _, node := range []string{"node-1", "node-2", "a", "", "é"} {
		for _, part := range []int{-1, 0, 1, 11, 4095} {
			assert.Equal(t, written(node, part), weight(node, part), "weight(%q, %d)", node, part)
		}
	}
}
