package reference

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// TestAHandOverWaitsForTheRequestsInFlight: a node giving a partition up lets no new request
// into the partition's engine, ends its open streams, and keeps the lease (so no other node runs
// the partition) until the requests in flight there are over; then it gives the lease up and the
// next holder serves the requests that waited meanwhile, one of them sent to the former holder.
func TestAHandOverWaitsForTheRequestsInFlight(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	var aKeeps1, bTakes1 atomic.Bool
	aKeeps1.Store(true)
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 && (i != 1 || aKeeps1.Load()) }, nil)
	waitHeld(t, a, 0, 1)
	b, _ := partitionedNode(t, url, "node-b", p, func(i int) bool { return i >= 2 || i == 1 && bTakes1.Load() }, nil)
	waitHeld(t, b, 2, 3)

	code, served, body := send(t, "POST", baseA+"/conversations", `{"id":"`+chosenIn(t, 1, p)+`"}`)
	require.Equal(t, 201, code, string(body))
	require.Equal(t, "node-a", served)
	id := idOf(t, body)

	// A stream open on partition 1, and a request in flight in its engine.
	stream := openStream(t, baseA, id)
	waitInflight(t, a, 1, 1)
	eng, leave := a.enterPart(1)
	require.NotNil(t, eng)
	before := token(eng)

	aKeeps1.Store(false)
	bTakes1.Store(true)
	released := make(chan struct{})
	go func() { a.release(1); close(released) }()

	// The stream ends; the request in flight keeps the partition here.
	_, err := io.Copy(io.Discard, stream)
	require.NoError(t, err)
	waitDraining(t, a, 1)
	gone, _ := a.enterPart(1)
	require.Nil(t, gone, "a request entered a partition being handed over")
	select {
	case <-released:
		t.Fatal("the partition was given up with a request in flight")
	default:
	}
	_, err = a.leases.Acquire(context.Background(), "partition/1", "probe", "", time.Second)
	var held *store.HeldError
	require.ErrorAs(t, err, &held, "the lease was free with a request in flight")
	require.Equal(t, "node-a", held.Lease.Holder)

	// A request for the partition sent now waits, and is served by the next holder.
	answered := make(chan string, 1)
	go func() {
		_, by := history(t, baseA, id)
		answered <- by
	}()
	leave()
	<-released
	waitHeld(t, a, 0)
	waitHeld(t, b, 1, 2, 3)
	require.Equal(t, "node-b", <-answered)
	require.Greater(t, token(b.engineOf(1)), before)
}

// openStream opens conversation id's session stream at base and returns its body once the
// headers came.
func openStream(t *testing.T, base, id string) io.Reader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/sessions/"+id+"/stream", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, 200, resp.StatusCode)
	return bufio.NewReader(resp.Body)
}

// waitInflight waits until k requests are in flight in partition i's engine of n.
func waitInflight(t *testing.T, n *Node, i, k int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n.mu.Lock()
		got := n.parts[i].inflight
		n.mu.Unlock()
		if got == k {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d requests in flight in partition %d, never %d", got, i, k)
		time.Sleep(5 * time.Millisecond)
	}
}

// waitDraining waits until n is handing partition i over.
func waitDraining(t *testing.T, n *Node, i int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n.mu.Lock()
		d := n.parts[i].draining
		n.mu.Unlock()
		if d {
			return
		}
		require.True(t, time.Now().Before(deadline), "partition %d never handed over", i)
		time.Sleep(5 * time.Millisecond)
	}
}

// heldModel answers every request once release is closed, telling asked of each request.
type heldModel struct {
	asked   chan string
	release chan struct{}
	calls   atomic.Int64
}

func (m *heldModel) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	m.calls.Add(1)
	last := req.Messages[len(req.Messages)-1].Content
	m.asked <- last
	select {
	case <-m.release:
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
	return model.Response{Content: "re: " + last, FinishReason: model.FinishStop}, nil
}

// TestAMoveWaitsForTheLiveWork: a partition the plan gives another node while a model call
// runs in it is not handed over (so the call is not cut off and asked again by the next holder)
// until the call ended; then it moves, and the model was asked once.
func TestAMoveWaitsForTheLiveWork(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	m := &heldModel{asked: make(chan string, 4), release: make(chan struct{})}
	var aKeeps1, bTakes1 atomic.Bool
	aKeeps1.Store(true)
	withModel := func(o *Options) { o.Deps.Provider = m }
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 && (i != 1 || aKeeps1.Load()) }, withModel)
	waitHeld(t, a, 0, 1)
	b, _ := partitionedNode(t, url, "node-b", p, func(i int) bool { return i >= 2 || i == 1 && bTakes1.Load() }, withModel)
	waitHeld(t, b, 2, 3)

	code, _, body := send(t, "POST", baseA+"/conversations", `{"id":"`+chosenIn(t, 1, p)+`"}`)
	require.Equal(t, 201, code, string(body))
	id := idOf(t, body)
	code, _ = post(t, baseA, "/conversations/"+id+"/turns", `{"text":"hello","messageId":"m1"}`)
	require.Equal(t, 202, code)
	require.Equal(t, "hello", <-m.asked)

	// Due to move while the model call runs: it stays, and keeps serving.
	aKeeps1.Store(false)
	bTakes1.Store(true)
	require.False(t, a.handOver(1), "a partition was handed over during a model call")
	_, served := history(t, baseA, id)
	require.Equal(t, "node-a", served)

	// The call ends; the next look hands the partition over, and the next holder asks nothing.
	close(m.release)
	untilTrue(t, "the turn answered", func() bool {
		h, _ := history(t, baseA, id)
		return len(h) == 2
	})
	untilTrue(t, "no model call in flight", func() bool { return a.engineOf(1).liveWork() == 0 })

	// A ticket waiting holds the move back, and so does the stream it opens.
	code, _, body = send(t, "POST", baseA+"/sessions/"+id+"/stream/open", `{}`)
	require.Equal(t, 200, code, string(body))
	var opened struct{ Ticket string }
	require.NoError(t, json.Unmarshal(body, &opened))
	require.False(t, a.handOver(1), "a partition was handed over with a ticket waiting")
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", baseA+"/sessions/"+id+"/stream?ticket="+opened.Ticket, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	waitInflight(t, a, 1, 1)
	require.False(t, a.handOver(1), "a partition was handed over with a stream open")
	cancel()
	resp.Body.Close()
	waitInflight(t, a, 1, 0)
	require.True(t, a.handOver(1), "a quiet partition due to move was not handed over")
	waitHeld(t, a, 0)
	waitHeld(t, b, 1, 2, 3)
	h, served := history(t, baseA, id)
	require.Equal(t, "node-b", served)
	require.Equal(t, []string{"user hello", "assistant re: hello"}, h)
	require.EqualValues(t, 1, m.calls.Load(), "model calls")
}

// untilTrue waits until cond holds.
func untilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "never %s", what)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestCreationsWithoutAnIDTakeEveryPartitionInTurn: conversations started without an id at a
// node are minted in the partitions it serves, each in turn; through a node that serves none,
// in every partition, each in turn.
func TestCreationsWithoutAnIDTakeEveryPartitionInTurn(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	a, baseA := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, nil)
	waitHeld(t, a, 0, 1)
	b, _ := partitionedNode(t, url, "node-b", p, func(i int) bool { return i >= 2 }, nil)
	waitHeld(t, b, 2, 3)
	_, baseC := partitionedNode(t, url, "node-c", p, func(int) bool { return false }, nil)
	count := func(base string, rounds int) map[int]int {
		got := map[int]int{}
		for range rounds {
			code, _, body := send(t, "POST", base+"/conversations", `{}`)
			require.Equal(t, 201, code, string(body))
			got[partOf(t, idOf(t, body), p)]++
		}
		return got
	}
	require.Equal(t, map[int]int{0: 3, 1: 3}, count(baseA, 6))
	require.Equal(t, map[int]int{0: 2, 1: 2, 2: 2, 3: 2}, count(baseC, 8))
}
