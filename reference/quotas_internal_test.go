package reference

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var (
	qAlice = loomtype.Identity{Tenant: "t", Actor: "alice"}
	qBob   = loomtype.Identity{Tenant: "t", Actor: "bob"}
)

// The bounds of these tests: two streams and three tickets waiting per principal.
const (
	qStreams = 2
	qTickets = 3
)

// quotaOptions are the options of the engines of these tests: a caller is the actor its bearer
// token names.
func quotaOptions() Options {
	opt := Options{Conversation: conversation.Config{Keys: [][]byte{make([]byte, 32)}},
		Gateway: gateway.Config{MaxStreamsPerPrincipal: qStreams, Authenticate: func(r *http.Request) (loomtype.Identity, error) {
			actor, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || actor == "" {
				return loomtype.Identity{}, gateway.ErrUnauthenticated
			}
			return loomtype.Identity{Tenant: "t", Actor: actor}, nil
		}},
		Stream: StreamConfig{PrincipalTickets: qTickets}}
	logErrors(&opt)
	return opt
}

// sharedStore opens a SQLite store for several engines of the test.
func sharedStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// partitionEngine assembles the engine of partition i of raw, as a node running one engine per
// partition does: its executions in the partition's namespace, the bounds of every principal in
// the root's global namespace, taken as "partition/<i>"; edits change quotaOptions. It is stopped
// at the end of the test.
func partitionEngine(t *testing.T, raw store.Store, i int, edits ...func(*Options)) *Engine {
	t.Helper()
	view, err := store.Namespace(raw, store.PartitionNamespace(i))
	require.NoError(t, err)
	opt := quotaOptions()
	for _, edit := range edits {
		edit(&opt)
	}
	// Partition i of two: it runs what falls there, and shares the bounds with the other.
	owns := func(id string) bool {
		j, err := partition.Of(partition.KeyOf(id), 2)
		return err == nil && j == i
	}
	e := &Engine{raw: raw, st: view, root: raw, holder: "partition/" + strconv.Itoa(i), owns: owns, logger: opt.Logger}
	require.NoError(t, e.assemble(context.Background(), opt))
	t.Cleanup(func() { e.stopParts(0) })
	return e
}

// conversationOf starts a conversation of who on e and returns its id.
func conversationOf(t *testing.T, e *Engine, who loomtype.Identity) string {
	t.Helper()
	st, _, err := e.cv.Start(context.Background(), who, conversation.StartOptions{})
	require.NoError(t, err)
	return st.ID
}

// refusedTickets checks an open of who's session id on e is the tickets bound's refusal.
func refusedTickets(t *testing.T, e *Engine, who loomtype.Identity, id string) {
	t.Helper()
	_, err := e.ss.Open(context.Background(), who, id, 0, "")
	var qe *sessions.QuotaError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, sessions.QuotaTickets, qe.Reason)
	require.EqualValues(t, qTickets, qe.Max)
}

// Two engines of one store (two partitions) make a principal's tickets between them, and both
// refuse the one past stream.principalTickets; another principal's open is answered; a ticket
// presented on one engine stops counting on the other.
func TestTicketsWaitingAreCountedAcrossPartitions(t *testing.T) {
	ctx := context.Background()
	raw := sharedStore(t)
	a, b := partitionEngine(t, raw, 0), partitionEngine(t, raw, 1)
	ca, cb := conversationOf(t, a, qAlice), conversationOf(t, b, qAlice)
	var first string
	for i := range qTickets {
		e, id := a, ca
		if i%2 == 1 {
			e, id = b, cb
		}
		op, err := e.ss.Open(ctx, qAlice, id, 0, "")
		require.NoError(t, err, "ticket %d of %d", i+1, qTickets)
		if i == 0 {
			first = op.Ticket
		}
	}
	refusedTickets(t, a, qAlice, ca)
	refusedTickets(t, b, qAlice, cb)
	_, err := b.ss.Open(ctx, qBob, conversationOf(t, b, qBob), 0, "")
	require.NoError(t, err, "another principal")
	_, err = a.ss.Redeem(first, qAlice, "")
	require.NoError(t, err)
	_, err = b.ss.Open(ctx, qAlice, cb, 0, "")
	require.NoError(t, err, "after a ticket was presented on the other engine")
	refusedTickets(t, b, qAlice, cb)
}

// The tickets of an engine that stopped without their being presented (its partition lost) count
// until its partition's next engine opens, and the next open on any engine then drops them.
func TestADeadPartitionsTicketsAreFreedByTheNextOpen(t *testing.T) {
	ctx := context.Background()
	raw := sharedStore(t)
	a, b := partitionEngine(t, raw, 0), partitionEngine(t, raw, 1)
	ca, cb := conversationOf(t, a, qAlice), conversationOf(t, b, qAlice)
	for i := range qTickets {
		_, err := a.ss.Open(ctx, qAlice, ca, 0, "")
		require.NoError(t, err, "ticket %d", i+1)
	}
	a.stopParts(0) // gives nothing back, as a crash would not
	refusedTickets(t, b, qAlice, cb)
	partitionEngine(t, raw, 0) // the partition taken over
	for i := range qTickets {
		_, err := b.ss.Open(ctx, qAlice, cb, 0, "")
		require.NoError(t, err, "ticket %d after the takeover", i+1)
	}
	refusedTickets(t, b, qAlice, cb)
}

// openEvents opens the event stream of conversation id as actor on the gateway at url and
// returns the answer (its body open while the stream is).
func openEvents(t *testing.T, ctx context.Context, url, actor, id string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/conversations/"+id+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+actor)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// A principal's event streams open on two engines of one store count against one
// gateway.maxStreamsPerPrincipal: N open, the N+1th is 429 on both, another principal's is served,
// and a stream closed on one engine frees a slot on the other.
func TestStreamsOpenAreCountedAcrossPartitions(t *testing.T) {
	raw := sharedStore(t)
	a, b := partitionEngine(t, raw, 0), partitionEngine(t, raw, 1)
	sa, sb := httptest.NewServer(a.gw), httptest.NewServer(b.gw)
	t.Cleanup(sa.Close)
	t.Cleanup(sb.Close)
	ca, cb := conversationOf(t, a, qAlice), conversationOf(t, b, qAlice)
	ctx := context.Background()
	firstCtx, closeFirst := context.WithCancel(ctx)
	defer closeFirst()
	require.Equal(t, http.StatusOK, openEvents(t, firstCtx, sa.URL, "alice", ca).StatusCode)
	for i := 1; i < qStreams; i++ {
		require.Equal(t, http.StatusOK, openEvents(t, ctx, sb.URL, "alice", cb).StatusCode, "stream %d", i+1)
	}
	require.Equal(t, http.StatusTooManyRequests, openEvents(t, ctx, sa.URL, "alice", ca).StatusCode)
	require.Equal(t, http.StatusTooManyRequests, openEvents(t, ctx, sb.URL, "alice", cb).StatusCode)
	require.Equal(t, http.StatusOK, openEvents(t, ctx, sb.URL, "bob", conversationOf(t, b, qBob)).StatusCode)
	closeFirst()
	// The slot is given back when a's handler returns, after the client has gone: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := openEvents(t, ctx, sb.URL, "alice", cb)
		if resp.StatusCode == http.StatusOK {
			break
		}
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		resp.Body.Close()
		require.True(t, time.Now().Before(deadline), "the closed stream's slot was never given back")
	}
	require.Equal(t, http.StatusTooManyRequests, openEvents(t, ctx, sa.URL, "alice", ca).StatusCode)
}

// Two nodes on one PostgreSQL database of four partitions: a principal's tickets waiting, made on
// engines of different partitions and nodes, count against one stream.principalTickets, kept at
// the store's root under global/; once a node is gone and the other has taken its partitions
// over, the tickets its engines made no longer count.
func TestTicketsAcrossTheNodesOfAPartitionedDatabase(t *testing.T) {
	const p = 4
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	edit := func(o *Options) { o.Stream.PrincipalTickets = qTickets }
	a, _ := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, edit)
	waitHeld(t, a, 0, 1)
	b, _ := partitionedNode(t, url, "node-b", p, nil, edit)
	waitHeld(t, b, 2, 3)
	conv := func(n *Node, i int) string {
		s, _, err := n.engineOf(i).Conversations().Start(ctx, anonymous, conversation.StartOptions{ID: chosenIn(t, i, p)})
		require.NoError(t, err)
		return s.ID
	}
	open := func(n *Node, i int, id string) error {
		_, err := n.engineOf(i).ss.Open(ctx, anonymous, id, 0, "")
		return err
	}
	refused := func(err error) {
		t.Helper()
		var qe *sessions.QuotaError
		require.ErrorAs(t, err, &qe)
		require.Equal(t, sessions.QuotaTickets, qe.Reason)
	}
	c0, c1, c2 := conv(a, 0), conv(a, 1), conv(b, 2)
	require.NoError(t, open(a, 0, c0))
	require.NoError(t, open(a, 1, c1))
	require.NoError(t, open(a, 0, c0))
	refused(open(b, 2, c2))

	st, err := postgres.Open(ctx, url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	kept, err := st.MetaPrefix(ctx, quota.Namespace+"tbl/")
	require.NoError(t, err)
	require.NotEmpty(t, kept, "the counts are kept at the root's global namespace")
	for i := range p {
		kvs, err := st.MetaPrefix(ctx, store.PartitionNamespace(i)+quota.Namespace)
		require.NoError(t, err)
		require.Empty(t, kvs, "partition %d keeps no counts of its own", i)
	}

	require.NoError(t, a.Close()) // its tickets are never presented
	waitHeld(t, b, 0, 1, 2, 3)
	for range qTickets {
		require.NoError(t, open(b, 2, c2))
	}
	refused(open(b, 0, c0))
}

// The streams open on the whole system, everyone's, count against one gateway.maxStreams across
// partitions: N open on two engines, the N+1th is 429 on both, for anyone.
func TestAllStreamsOpenAreCountedAcrossPartitions(t *testing.T) {
	const total = 2
	raw := sharedStore(t)
	withTotal := func(o *Options) { o.Gateway.MaxStreams = total }
	a, b := partitionEngine(t, raw, 0, withTotal), partitionEngine(t, raw, 1, withTotal)
	sa, sb := httptest.NewServer(a.gw), httptest.NewServer(b.gw)
	t.Cleanup(sa.Close)
	t.Cleanup(sb.Close)
	ctx := context.Background()
	require.Equal(t, http.StatusOK, openEvents(t, ctx, sa.URL, "alice", conversationOf(t, a, qAlice)).StatusCode)
	require.Equal(t, http.StatusOK, openEvents(t, ctx, sb.URL, "bob", conversationOf(t, b, qBob)).StatusCode)
	carol := loomtype.Identity{Tenant: "t", Actor: "carol"}
	require.Equal(t, http.StatusTooManyRequests, openEvents(t, ctx, sa.URL, "carol", conversationOf(t, a, carol)).StatusCode)
	require.Equal(t, http.StatusTooManyRequests, openEvents(t, ctx, sb.URL, "carol", conversationOf(t, b, carol)).StatusCode)
}
