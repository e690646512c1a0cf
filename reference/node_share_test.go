package reference

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// leaseOf makes a node's lease d long (partitionedNode's edit).
func leaseOf(d time.Duration) func(*Options) {
	return func(o *Options) { o.Node.Lease = d }
}

// leasesOf opens the database url for the test's own looks at the leases.
func leasesOf(t *testing.T, url string) *postgres.Postgres {
	t.Helper()
	st, err := postgres.Open(context.Background(), url, postgres.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// grantOf is the newest grant of lease name (zero when it was never granted).
func grantOf(t *testing.T, st *postgres.Postgres, name string) store.Lease {
	t.Helper()
	l, _, err := st.Holder(context.Background(), name)
	require.NoError(t, err)
	return l
}

// inflight is how many requests are in flight in partition i's engine of n.
func inflight(n *Node, i int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.parts[i].inflight
}

// draining reports whether n is handing partition i over.
func draining(n *Node, i int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.parts[i].draining
}

// sharesOf is the plan of nodes for p partitions and what it gives each of them.
func sharesOf(t *testing.T, p int, nodes ...string) (partition.Plan, map[string][]int) {
	t.Helper()
	plan, err := partition.Assign(p, nodes)
	require.NoError(t, err)
	shares := map[string][]int{}
	for _, n := range nodes {
		shares[n] = planned(plan, n)
		require.NotEmpty(t, shares[n], "the plan gives %s a partition", n)
	}
	return plan, shares
}

// TestAHandOverKeepsRenewingTheLeases: while a node drains a partition it hands over (a request
// still in flight there), it goes on renewing its membership, so the others keep it in their
// plan, and the partition's lease under the same grant, so no other node is let in before the
// drain ends.
func TestAHandOverKeepsRenewingTheLeases(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	st := leasesOf(t, url)
	a, _ := partitionedNode(t, url, "node-a", p, nil, nil)
	waitHeld(t, a, 0, 1, 2, 3)
	_, shares := sharesOf(t, p, "node-a", "node-b")
	i := shares["node-b"][0]
	eng, leave := a.enterPart(i)
	require.NotNil(t, eng)
	defer leave()

	// A planned move waits for a quiet moment (handOver), up to handOverDefer: here it waits
	// not at all, as at the end of that wait, so the drain starts with the request in flight.
	a.moveDefer.Store(0)
	b, _ := partitionedNode(t, url, "node-b", p, nil, nil)
	waitDraining(t, a, i)
	member0 := grantOf(t, st, memberPrefix+"node-a")
	lease0 := grantOf(t, st, "partition/"+strconv.Itoa(i))
	require.Equal(t, "node-a", lease0.Holder)
	deadline := time.Now().Add(30 * time.Second)
	for {
		still := draining(a, i)
		member, lease := grantOf(t, st, memberPrefix+"node-a"), grantOf(t, st, "partition/"+strconv.Itoa(i))
		require.Equal(t, lease0.Token, lease.Token, "partition %d granted anew while a request runs there", i)
		if member.Token >= member0.Token+2 && lease.Expires.After(lease0.Expires) {
			break
		}
		require.True(t, still, "the hand-over of partition %d ended before node-a renewed its membership twice and the partition's lease", i)
		require.True(t, time.Now().Before(deadline), "node-a renewed nothing while it drained")
		time.Sleep(10 * time.Millisecond)
	}
	leave()
	waitHeld(t, b, shares["node-b"]...)
	waitHeld(t, a, shares["node-a"]...)
}

// brokenWriter is a connection that broke as the answer was being written: the handler
// abandons the request (http.ErrAbortHandler), as net/http's server does with one whose client
// went away.
type brokenWriter struct{ h http.Header }

func (w brokenWriter) Header() http.Header       { return w.h }
func (w brokenWriter) Write([]byte) (int, error) { panic(http.ErrAbortHandler) }
func (w brokenWriter) WriteHeader(int)           { panic(http.ErrAbortHandler) }

// serveAbandoned serves r at n as net/http would, the abandonment of a request (a panic with
// http.ErrAbortHandler) taken as the end of it.
func serveAbandoned(n *Node, w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			panic(v)
		}
	}()
	n.ServeHTTP(w, r)
}

// TestAnAbandonedRequestLeavesItsPartition: a request counts as in flight in its partition's
// engine only until it is over, however it ends: its client gone before it was served, or its
// answer abandoned half-way (a panic). A count left behind would keep every later hand-over of
// the partition waiting for a request that is no more.
func TestAnAbandonedRequestLeavesItsPartition(t *testing.T) {
	const p = 2
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	a, _ := partitionedNode(t, url, "node-a", p, func(int) bool { return true }, nil)
	waitHeld(t, a, 0, 1)
	s, _, err := a.engineOf(0).Conversations().Start(ctx, anonymous, conversation.StartOptions{ID: chosenIn(t, 0, p)})
	require.NoError(t, err)
	path := "/conversations/" + s.ID + "/history"

	gone, cancel := context.WithCancel(ctx)
	cancel()
	r := httptest.NewRequestWithContext(gone, "GET", path, nil)
	r.Host = "127.0.0.1"
	serveAbandoned(a, httptest.NewRecorder(), r)
	require.Zero(t, inflight(a, 0), "partition 0 counts %d requests in flight after one whose client was gone", inflight(a, 0))

	r = httptest.NewRequestWithContext(ctx, "GET", path, nil)
	r.Host = "127.0.0.1"
	serveAbandoned(a, brokenWriter{h: http.Header{}}, r)
	require.Zero(t, inflight(a, 0), "partition 0 counts %d requests in flight after one abandoned by a panic", inflight(a, 0))

	// Served whole, it leaves too; and the partition, handed over, is given up at once.
	w := httptest.NewRecorder()
	r = httptest.NewRequestWithContext(ctx, "GET", path, nil)
	r.Host = "127.0.0.1"
	a.ServeHTTP(w, r)
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Zero(t, inflight(a, 0))
}

// TestNodesStartedTogetherTakeTheirShareOnce: a node that starts registers and waits one renewal
// period before it asks for a partition (no partition is granted before it, by the database's
// clock), so a second node started within that period is in its first plan: each node is granted
// its own share at once, and no partition is granted twice (a node that took another's share
// would hand it over a moment later, a second grant).
func TestNodesStartedTogetherTakeTheirShareOnce(t *testing.T) {
	const p = 4
	const ttl = 8 * time.Second // two seconds of window for the second node to start in
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	st := leasesOf(t, url)
	a, _ := partitionedNode(t, url, "node-a", p, nil, leaseOf(ttl))
	deadline := time.Now().Add(30 * time.Second)
	var joined store.Lease
	for joined.Token == 0 {
		require.True(t, time.Now().Before(deadline), "node-a never registered")
		time.Sleep(2 * time.Millisecond)
		joined = grantOf(t, st, memberPrefix+"node-a")
	}
	require.Equal(t, int64(1), joined.Token, "node-a's first registration")
	registered := joined.Expires.Add(-ttl)
	b, _ := partitionedNode(t, url, "node-b", p, nil, leaseOf(ttl))

	var first []store.Lease
	for len(first) == 0 {
		require.True(t, time.Now().Before(deadline), "no partition was ever granted")
		time.Sleep(2 * time.Millisecond)
		var err error
		first, err = st.Grants(ctx, "partition/")
		require.NoError(t, err)
	}
	for _, l := range first {
		// A grant's expiry, less the lease, is when it was made (or later, once renewed).
		require.GreaterOrEqual(t, l.Expires.Add(-ttl).Sub(registered), ttl/4, "%s granted within node-a's first renewal period", l.Name)
	}

	plan, shares := sharesOf(t, p, "node-a", "node-b")
	waitHeld(t, a, shares["node-a"]...)
	waitHeld(t, b, shares["node-b"]...)
	for i, l := range grants(t, st, p) {
		require.Equal(t, plan[i], l.Holder, "partition %d", i)
		require.Equal(t, int64(1), l.Token, "partition %d was granted more than once", i)
	}
}

// TestATakeoverLeavesTheOtherPartitionsRunning: once a node dies its membership lapses, and the
// plan of the others no longer names it; they take its partitions over, while those they held
// go on with the same engines under the same grants.
func TestATakeoverLeavesTheOtherPartitionsRunning(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	st := leasesOf(t, url)
	a, _ := partitionedNode(t, url, "node-a", p, nil, leaseOf(2*time.Second))
	b, _ := partitionedNode(t, url, "node-b", p, nil, leaseOf(2*time.Second))
	_, shares := sharesOf(t, p, "node-a", "node-b")
	waitHeld(t, a, shares["node-a"]...)
	waitHeld(t, b, shares["node-b"]...)
	kept := map[int]*Engine{}
	tokens := map[int]int64{}
	for _, i := range shares["node-a"] {
		kept[i], tokens[i] = a.engineOf(i), token(a.engineOf(i))
	}

	b.Kill()
	lapse := grantOf(t, st, memberPrefix+"node-b").Expires
	for !time.Now().After(lapse) {
		time.Sleep(10 * time.Millisecond)
	}
	plan := a.plan()
	require.Equal(t, []int{0, 1, 2, 3}, planned(plan, "node-a"), "a membership that lapsed still counts: %v", plan)

	waitHeld(t, a, 0, 1, 2, 3)
	for _, i := range shares["node-a"] {
		require.Same(t, kept[i], a.engineOf(i), "partition %d was restarted by the takeover", i)
		require.Equal(t, tokens[i], token(a.engineOf(i)), "partition %d was granted anew", i)
	}
}

// TestANodeThatClosesGivesItsLeasesUp: a node that closes gives up its membership and its
// partitions' leases, so the others' next plan leaves it out and they are granted its
// partitions at once, not a lease later.
func TestANodeThatClosesGivesItsLeasesUp(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	st := leasesOf(t, url)
	lease := leaseOf(8 * time.Second) // nothing lapses between the close and the look
	a, _ := partitionedNode(t, url, "node-a", p, nil, lease)
	b, _ := partitionedNode(t, url, "node-b", p, nil, lease)
	_, shares := sharesOf(t, p, "node-a", "node-b")
	waitHeld(t, a, shares["node-a"]...)
	waitHeld(t, b, shares["node-b"]...)

	require.NoError(t, b.Close())
	now := time.Now()
	member := grantOf(t, st, memberPrefix+"node-b")
	require.Equal(t, "node-b", member.Holder)
	require.False(t, member.Expires.After(now), "node-b's membership outlives its close")
	for _, i := range shares["node-b"] {
		l := grantOf(t, st, "partition/"+strconv.Itoa(i))
		require.False(t, l.Expires.After(now), "node-b's lease of partition %d outlives its close", i)
	}
	waitHeld(t, a, 0, 1, 2, 3)
}

// TestAHandOverIsBoundedAndGivesTheLeaseUp: a request that never ends holds a hand-over back
// for at most the drain's bound; then the engine stops and the lease is given up at once (it
// has lapsed when the hand-over returns), under the grant the node held.
func TestAHandOverIsBoundedAndGivesTheLeaseUp(t *testing.T) {
	const p = 2
	url := pgtest.TempDatabase(t)
	st := leasesOf(t, url)
	var keep1 atomic.Bool
	keep1.Store(true)
	a, _ := partitionedNode(t, url, "node-a", p, func(i int) bool { return i == 0 || keep1.Load() }, leaseOf(time.Minute))
	waitHeld(t, a, 0, 1)
	held := grantOf(t, st, "partition/1")
	eng, leave := a.enterPart(1)
	require.NotNil(t, eng)
	defer leave()

	keep1.Store(false)
	released := make(chan struct{})
	go func() { a.release(1); close(released) }()
	select {
	case <-released:
	case <-time.After(drainWait + 30*time.Second):
		t.Fatal("a request that never ends holds the hand-over back past its bound")
	}
	l := grantOf(t, st, "partition/1")
	require.Equal(t, held.Token, l.Token)
	require.False(t, l.Expires.After(time.Now()), "the lease outlives the hand-over")
	require.False(t, slices.Contains(a.held(), 1))
}

// TestAPartitionHandedOverIsTakenAtOnce: a node that asks for a partition another node holds
// asks again soon while the holder hands it over, so it is granted the partition as soon as the
// holder gives it up, not a renewal period (a quarter of the lease) later: the requests that wait
// for the partition meanwhile wait little.
func TestAPartitionHandedOverIsTakenAtOnce(t *testing.T) {
	const p = 2
	const ttl = 40 * time.Second // a renewal period of ten seconds
	url := pgtest.TempDatabase(t)
	var keep1 atomic.Bool
	keep1.Store(true)
	a, _ := partitionedNode(t, url, "node-a", p, func(i int) bool { return i == 0 || keep1.Load() }, leaseOf(ttl))
	waitHeld(t, a, 0, 1)
	before := token(a.engineOf(1))
	b, _ := partitionedNode(t, url, "node-b", p, func(i int) bool { return i == 1 }, leaseOf(ttl))
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.mu.Lock()
		seen := b.parts[1].holder.Holder
		b.mu.Unlock()
		if seen == "node-a" {
			break // node-b asked for partition 1 and was refused
		}
		require.True(t, time.Now().Before(deadline), "node-b never asked for partition 1")
		time.Sleep(5 * time.Millisecond)
	}

	keep1.Store(false)
	a.release(1)
	released := time.Now()
	for !slices.Equal(b.held(), []int{1}) {
		require.Less(t, time.Since(released), ttl/8, "node-b waits for its next renewal period to take the partition given up")
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, before+1, token(b.engineOf(1)))
}
