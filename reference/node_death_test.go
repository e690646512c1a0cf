package reference

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// TestANodesDeathPausesOnlyItsPartitions: two nodes started together (the second once the first
// registered its membership, within its join wait) share four partitions out, each asking for its
// own share only, so that every partition is granted once (token 1). One
// node dies (Kill: its leases lapse unreleased); the other takes its partitions over, each
// granted a second time, while its own partitions run on: the same engines, under their first
// grant, never given up and taken again. The lease is long enough for the second node to start
// within the first one's join wait (a quarter of the lease).
func TestANodesDeathPausesOnlyItsPartitions(t *testing.T) {
	const p = 4
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	long := func(o *Options) { o.Node.Lease = 4 * time.Second }
	st, err := postgres.Open(ctx, url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	a, _ := partitionedNode(t, url, "node-a", p, nil, long)
	waitMember(t, st, "node-a")
	b, _ := partitionedNode(t, url, "node-b", p, nil, long)
	plan, err := partition.Assign(p, []string{"node-a", "node-b"})
	require.NoError(t, err)
	forA, forB := planned(plan, "node-a"), planned(plan, "node-b")
	require.NotEmpty(t, forA)
	require.NotEmpty(t, forB)
	waitHeld(t, a, forA...)
	waitHeld(t, b, forB...)

	for i, l := range grants(t, st, p) {
		require.Equal(t, plan[i], l.Holder, "partition %d", i)
		require.EqualValues(t, 1, l.Token, "partition %d changed hands while the nodes started together", i)
	}
	engines := map[int]*Engine{}
	for _, i := range forB {
		engines[i] = b.engineOf(i)
	}

	a.Kill()
	waitHeld(t, b, 0, 1, 2, 3)
	after := grants(t, st, p)
	for _, i := range forA {
		require.Equal(t, "node-b", after[i].Holder, "partition %d", i)
		require.EqualValues(t, 2, after[i].Token, "partition %d of the dead node is granted once more", i)
	}
	for _, i := range forB {
		require.EqualValues(t, 1, after[i].Token, "partition %d of the surviving node was given up and taken again", i)
		require.Same(t, engines[i], b.engineOf(i), "partition %d of the surviving node runs on the engine it had", i)
	}
}

// waitMember waits until the node named name holds its membership lease.
func waitMember(t *testing.T, st *postgres.Postgres, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ls, err := st.Grants(context.Background(), memberPrefix)
		require.NoError(t, err)
		for _, l := range ls {
			if l.Holder == name {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "node %s never registered its membership", name)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNodesStartedTogetherEachAskForTheirShare: a node that shares partitions out registers its
// membership and asks for no partition for one renewal period (a quarter of the lease), so a
// second node started meanwhile is in the plan of both before either asks: no partition is
// granted while the second starts, and then each node takes its own share once (token 1),
// nothing handed over.
func TestNodesStartedTogetherEachAskForTheirShare(t *testing.T) {
	const p = 4
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	long := func(o *Options) { o.Node.Lease = 20 * time.Second }
	st, err := postgres.Open(ctx, url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	a, _ := partitionedNode(t, url, "node-a", p, nil, long)
	waitMember(t, st, "node-a")
	b, _ := partitionedNode(t, url, "node-b", p, nil, long)
	waitMember(t, st, "node-b")
	ls, err := st.Grants(ctx, "partition/")
	require.NoError(t, err)
	require.Empty(t, ls, "partitions granted before the nodes started together saw each other")
	require.Empty(t, a.held())

	plan, err := partition.Assign(p, []string{"node-a", "node-b"})
	require.NoError(t, err)
	waitHeld(t, a, planned(plan, "node-a")...)
	waitHeld(t, b, planned(plan, "node-b")...)
	for i, l := range grants(t, st, p) {
		require.Equal(t, plan[i], l.Holder, "partition %d", i)
		require.EqualValues(t, 1, l.Token, "partition %d changed hands", i)
	}
}
