package partition

import (
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
