package reference

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// planned is the partitions plan gives node, in order.
func planned(plan partition.Plan, node string) []int {
	var out []int
	for i, o := range plan {
		if o == node {
			out = append(out, i)
		}
	}
	return out
}

// TestTwoNodesBalanceFourPartitions: a node alone holds every partition; once a second joins,
// the first gives up the partitions the plan of both gives the second, which takes them: two
// each, as partition.Assign says. A node that leaves gives its membership up and the other takes
// its partitions back.
func TestTwoNodesBalanceFourPartitions(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	a, baseA := partitionedNode(t, url, "node-a", p, nil, nil)
	waitHeld(t, a, 0, 1, 2, 3)
	code, _, body := send(t, "POST", baseA+"/conversations", `{"id":"`+chosenIn(t, 0, p)+`"}`)
	require.Equal(t, 201, code, string(body))
	id := idOf(t, body)

	b, baseB := partitionedNode(t, url, "node-b", p, nil, nil)
	plan, err := partition.Assign(p, []string{"node-a", "node-b"})
	require.NoError(t, err)
	forA, forB := planned(plan, "node-a"), planned(plan, "node-b")
	require.Len(t, forA, 2)
	require.Len(t, forB, 2)
	waitHeld(t, b, forB...)
	waitHeld(t, a, forA...)

	// Each node serves its own partitions and forwards the rest.
	_, served := history(t, baseB, id)
	require.Equal(t, plan[0], served)
	_, served = history(t, baseA, id)
	require.Equal(t, plan[0], served)

	// B leaves: A holds every partition again, B's given up at B's close.
	require.NoError(t, b.Close())
	waitHeld(t, a, 0, 1, 2, 3)
	h, served := history(t, baseA, id)
	require.Empty(t, h)
	require.Equal(t, "node-a", served)
}
