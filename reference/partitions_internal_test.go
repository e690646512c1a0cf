package reference

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/partition"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// anonymous is the caller of an insecure gateway.
var anonymous = loomtype.Identity{Actor: "anonymous"}

// partitionedNode opens, on url, a node named name of p partitions that asks for the partitions
// want admits, its options changed by edit (when not nil), serves it on a loopback listener, and
// closes it when the test ends.
func partitionedNode(t *testing.T, url, name string, p int, want func(int) bool, edit func(*Options)) (*Node, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	opt := Options{
		DataDir: filepath.Join(t.TempDir(), name), StoreURL: url,
		Node:         NodeOptions{ID: name, Advertise: base, Lease: 800 * time.Millisecond, Partitions: p},
		Conversation: conversation.Config{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}},
		Gateway:      gateway.Config{Insecure: true},
	}
	if edit != nil {
		edit(&opt)
	}
	n, err := openNode(context.Background(), opt, want)
	require.NoError(t, err)
	go func() { _ = n.Serve(ln) }()
	t.Cleanup(func() { _ = n.Close() })
	return n, base
}

// waitHeld waits until n holds exactly the partitions want.
func waitHeld(t *testing.T, n *Node, want ...int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(n.held(), want) {
		require.True(t, time.Now().Before(deadline), "node %s holds %v, never %v", n.ID(), n.held(), want)
		time.Sleep(10 * time.Millisecond)
	}
}

// chosenIn is a chosen id whose conversation (ChosenID of anonymous) falls in partition i of p.
func chosenIn(t *testing.T, i, p int) string {
	for k := 0; ; k++ {
		chosen := "conv-" + strconv.Itoa(i) + "-" + strconv.Itoa(k)
		j, err := partition.Of(partition.KeyOf(conversation.ChosenID(anonymous, chosen)), p)
		require.NoError(t, err)
		if j == i {
			return chosen
		}
	}
}

// grants is the newest grant of every partition lease, by partition.
func grants(t *testing.T, st *postgres.Postgres, p int) []store.Lease {
	t.Helper()
	ls, err := st.Grants(context.Background(), "partition/")
	require.NoError(t, err)
	require.Len(t, ls, p)
	out := make([]store.Lease, p)
	for i := range out {
		for _, l := range ls {
			if l.Name == "partition/"+strconv.Itoa(i) {
				out[i] = l
			}
		}
		require.NotZero(t, out[i].Token, "partition %d granted", i)
	}
	return out
}

// history is the transcript of conversation id as the node at base serves it, and the node that
// served it.
func history(t *testing.T, base, id string) ([]string, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(base + "/conversations/" + id + "/history")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, string(b))
	var page struct{ Entries []struct{ Role, Text string } }
	require.NoError(t, json.Unmarshal(b, &page))
	var out []string
	for _, e := range page.Entries {
		out = append(out, e.Role+" "+e.Text)
	}
	return out, resp.Header.Get(NodeHeader)
}

// token is the grant e's writes are fenced by.
func token(e *Engine) int64 {
	e.hold.mu.Lock()
	defer e.hold.mu.Unlock()
	return e.hold.lease.Token
}

// post sends body to path at base and returns the status and the node that served it.
func post(t *testing.T, base, path, body string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Post(base+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(NodeHeader)
}

// waitHistory waits until conversation id, read at base, has n entries, and returns them and
// the node that served the last read.
func waitHistory(t *testing.T, base, id string, n int) ([]string, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, served := history(t, base, id)
		if len(h) >= n {
			return h, served
		}
		require.True(t, time.Now().Before(deadline), "%s never reached %d entries: %v", id, n, h)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTwoNodesShareFourPartitions: two nodes on one database of four partitions. Each partition
// is held by exactly one node, through a lease of its own whose token fences its engine's writes;
// each engine writes in its partition's namespace alone and answers for its partition's
// executions alone. Once a node dies, the other takes its partitions over when their leases
// lapse and recovers their executions, while its own partitions go on under the same grants.
func TestTwoNodesShareFourPartitions(t *testing.T) {
	const p = 4
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	a, _ := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, nil)
	waitHeld(t, a, 0, 1)
	b, baseB := partitionedNode(t, url, "node-b", p, nil, nil)
	waitHeld(t, b, 2, 3)
	require.Equal(t, []int{0, 1}, a.held())
	owner := func(i int) *Node { return [...]*Node{a, a, b, b}[i] }

	st, err := postgres.Open(ctx, url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	before := grants(t, st, p)
	for i, l := range before {
		require.Equal(t, owner(i).ID(), l.Holder, "partition %d", i)
		require.Equal(t, l.Token, token(owner(i).engineOf(i)), "partition %d's engine is fenced by its grant", i)
	}
	_, granted, err := st.Holder(ctx, leaseName)
	require.NoError(t, err)
	require.False(t, granted, "no node asks for the lease of one partition")

	ids := make([]string, p)
	for i := range p {
		eng := owner(i).engineOf(i)
		s, _, err := eng.Conversations().Start(ctx, anonymous, conversation.StartOptions{ID: chosenIn(t, i, p)})
		require.NoError(t, err)
		ids[i] = s.ID
		_, err = eng.Conversations().SendTurn(ctx, anonymous, s.ID, "hello "+strconv.Itoa(i), conversation.SendOptions{MessageID: "m1"})
		require.NoError(t, err)
		other := owner((i + 2) % p).engineOf((i + 2) % p)
		_, _, err = other.Conversations().Start(ctx, anonymous, conversation.StartOptions{ID: chosenIn(t, i, p)})
		require.ErrorIs(t, err, kernel.ErrNotHere, "partition %d's conversation started by another partition's engine", i)
	}
	for i, id := range ids {
		h, served := waitHistory(t, baseB, id, 2)
		require.Equal(t, []string{"user hello " + strconv.Itoa(i), "assistant You said: \"hello " + strconv.Itoa(i) + "\""}, h)
		require.Equal(t, owner(i).ID(), served, "partition %d's conversation is served by its holder", i)
	}
	// Everything is written in its partition's namespace, nothing at the root.
	root, err := st.MetaPrefix(ctx, "exec/")
	require.NoError(t, err)
	require.Empty(t, root)
	for i, id := range ids {
		kvs, err := st.MetaPrefix(ctx, store.PartitionNamespace(i)+"exec/")
		require.NoError(t, err)
		var execs []string
		for _, kv := range kvs {
			execs = append(execs, strings.TrimPrefix(kv.Key, store.PartitionNamespace(i)+"exec/"))
		}
		require.Contains(t, execs, id)
		for _, x := range execs {
			j, err := partition.Of(partition.KeyOf(x), p)
			require.NoError(t, err)
			require.Equal(t, i, j, "execution %s recorded in partition %d", x, i)
		}
	}

	kept := []*Engine{b.engineOf(2), b.engineOf(3)}
	a.Kill()
	waitHeld(t, b, 0, 1, 2, 3)
	after := grants(t, st, p)
	for i, l := range after {
		require.Equal(t, b.ID(), l.Holder, "partition %d", i)
		require.Equal(t, l.Token, token(b.engineOf(i)), "partition %d", i)
		if i < 2 {
			require.Greater(t, l.Token, before[i].Token, "partition %d granted anew", i)
		} else {
			require.Equal(t, before[i].Token, l.Token, "partition %d kept its grant", i)
			require.Same(t, kept[i-2], b.engineOf(i), "partition %d kept its engine", i)
		}
	}
	// The dead node's grant of partition 0 fences its writes; the new grants write.
	old, err := store.Namespace(st.Fence(before[0]), store.PartitionNamespace(0))
	require.NoError(t, err)
	require.ErrorIs(t, old.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("probe", []byte("x")) }), store.ErrFenced)
	for i := range p {
		_, err := b.engineOf(i).Conversations().Status(ctx, anonymous, ids[i])
		require.NoError(t, err, "partition %d's conversation recovered", i)
		code, served := post(t, baseB, "/conversations/"+ids[i]+"/turns", `{"text":"again","messageId":"m2"}`)
		require.Equal(t, 202, code)
		require.Equal(t, b.ID(), served)
		h, _ := waitHistory(t, baseB, ids[i], 4)
		require.Equal(t, []string{"user hello " + strconv.Itoa(i), "assistant You said: \"hello " + strconv.Itoa(i) + "\"", "user again", "assistant You said: \"again\""}, h)
	}
}

// TestAPartitionedNodeRefusesAnotherCount: a node of four partitions on a database made with
// one refuses to start, and a node of one on a database of four.
func TestAPartitionedNodeRefusesAnotherCount(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ made, configured int }{{1, 4}, {4, 1}, {4, 2}} {
		url := pgtest.TempDatabase(t)
		st, err := postgres.Open(ctx, url, postgres.Options{})
		require.NoError(t, err)
		_, err = st.Partitions(ctx, c.made)
		require.NoError(t, err)
		require.NoError(t, st.Close())
		opt := Options{DataDir: filepath.Join(t.TempDir(), "n"), StoreURL: url, Node: NodeOptions{ID: "n", Advertise: "http://127.0.0.1:1", Partitions: c.configured},
			Conversation: conversation.Config{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}}, Gateway: gateway.Config{Insecure: true}}
		n, err := openNode(ctx, opt, nil)
		if err == nil {
			n.Close()
		}
		require.ErrorIs(t, err, ErrPartitionsDiffer, "made %d, configured %d", c.made, c.configured)
	}
}

// TestOnePartitionIsTheNodeOfBefore: at one partition a node holds the lease "engine", asks for
// no partition lease, and writes at the store's root.
func TestOnePartitionIsTheNodeOfBefore(t *testing.T) {
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	n, _ := partitionedNode(t, url, "solo", 0, nil, nil)
	waitHeld(t, n, 0)
	require.Nil(t, n.engineOf(0).owns, "the engine runs every execution")
	s, _, err := n.Engine().Conversations().Start(ctx, anonymous, conversation.StartOptions{ID: "root"})
	require.NoError(t, err)

	st, err := postgres.Open(ctx, url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	l, granted, err := st.Holder(ctx, leaseName)
	require.NoError(t, err)
	require.True(t, granted)
	require.Equal(t, "solo", l.Holder)
	require.Equal(t, l.Token, token(n.Engine()))
	ls, err := st.Grants(ctx, "partition/")
	require.NoError(t, err)
	require.Empty(t, ls)
	_, found, err := st.Meta(ctx, "exec/"+s.ID)
	require.NoError(t, err)
	require.True(t, found, "the conversation is recorded at the root")
	ps, err := st.MetaPrefix(ctx, "partition/")
	require.NoError(t, err)
	require.Empty(t, ps)
}

// TestThreadsLiveInOnePartition: of a node's engines, only the one of the partition the threads
// key falls in runs the threads' service.
func TestThreadsLiveInOnePartition(t *testing.T) {
	const p = 4
	url := pgtest.TempDatabase(t)
	n, _ := partitionedNode(t, url, "n", p, nil, func(o *Options) {
		o.Threads = &ThreadsConfig{Roles: []threads.Role{{Name: "planner", Prompt: "P"}}, Members: []loomtype.Identity{{Tenant: "acme", Actor: "dana"}}}
	})
	waitHeld(t, n, 0, 1, 2, 3)
	home, err := partition.Of(partition.ThreadsKey, p)
	require.NoError(t, err)
	for i := range p {
		require.Equal(t, i == home, n.engineOf(i).Threads() != nil, "partition %d (threads in %d)", i, home)
	}
}
