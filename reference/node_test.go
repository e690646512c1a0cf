package reference_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// nodeOptions are the options of an engine on the database url, with the built-in model and no
// authentication (every caller is the insecure principal).
func nodeOptions(t *testing.T, url, name string, lease time.Duration) reference.Options {
	return reference.Options{
		DataDir:      filepath.Join(t.TempDir(), name),
		StoreURL:     url,
		Node:         reference.NodeOptions{ID: name, Lease: lease},
		Conversation: conversation.Config{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}},
		Gateway:      gateway.Config{Insecure: true},
	}
}

// startNode opens a node on a loopback listener it serves, and closes it when the test ends.
func startNode(t *testing.T, opt reference.Options) (*reference.Node, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	opt.Node.Advertise = base
	n, err := reference.OpenNode(context.Background(), opt)
	require.NoError(t, err)
	go func() { _ = n.Serve(ln) }()
	t.Cleanup(func() { _ = n.Close() })
	return n, base
}

// call makes one request of the surface and returns the status, the node that served it and the
// body.
func call(t *testing.T, method, url, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 40 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get(reference.NodeHeader), string(b)
}

// transcript waits until the history at base holds n entries and returns them as "role text".
func transcript(t *testing.T, base, id string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, body := call(t, "GET", base+"/conversations/"+id+"/history", "")
		require.Equal(t, 200, code, body)
		var page struct {
			Entries []struct{ Role, Text string }
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		if len(page.Entries) >= n {
			out := make([]string, len(page.Entries))
			for i, e := range page.Entries {
				out[i] = e.Role + " " + e.Text
			}
			return out
		}
		require.True(t, time.Now().Before(deadline), "history never reached %d entries: %s", n, body)
		time.Sleep(20 * time.Millisecond)
	}
}

func waitLeading(t *testing.T, n *reference.Node) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !n.Leading() {
		require.True(t, time.Now().Before(deadline), "node %s never took the lease", n.ID())
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNodesOnOneDatabase: two nodes share a database; a request to the follower is served by the
// holder; once the holder dies, the follower takes the executions over and the conversation goes
// on there with nothing lost and nothing answered twice; the dead node, restarted, follows.
func TestNodesOnOneDatabase(t *testing.T) {
	url := pgtest.TempDatabase(t)
	const lease = 800 * time.Millisecond
	optA := nodeOptions(t, url, "node-a", lease)
	a, _ := startNode(t, optA)
	waitLeading(t, a)
	b, baseB := startNode(t, nodeOptions(t, url, "node-b", lease))
	require.False(t, b.Leading(), "a second node follows the holder")

	code, served, body := call(t, "POST", baseB+"/conversations", `{}`)
	require.Equal(t, 201, code, body)
	require.Equal(t, "node-a", served, "the follower forwards to the holder")
	var conv struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &conv))
	code, served, body = call(t, "POST", baseB+"/conversations/"+conv.ID+"/turns", `{"text":"hello","messageId":"m1"}`)
	require.Equal(t, 202, code, body)
	require.Equal(t, "node-a", served)
	require.Equal(t, []string{"user hello", "assistant You said: \"hello\""}, transcript(t, baseB, conv.ID, 2))

	a.Kill()
	killed := time.Now()
	code, served, body = call(t, "POST", baseB+"/conversations/"+conv.ID+"/turns", `{"text":"again","messageId":"m2"}`)
	require.Equal(t, 202, code, body)
	require.Equal(t, "node-b", served, "the follower took the executions over")
	t.Logf("takeover answered the first request %s after the kill (lease %s)", time.Since(killed).Round(time.Millisecond), lease)
	require.True(t, b.Leading())
	// The first message sent again is a repeat: it is not run a second time.
	code, _, body = call(t, "POST", baseB+"/conversations/"+conv.ID+"/turns", `{"text":"hello","messageId":"m1"}`)
	require.Equal(t, 202, code, body)
	require.Equal(t, []string{"user hello", "assistant You said: \"hello\"", "user again", "assistant You said: \"again\""}, transcript(t, baseB, conv.ID, 4))

	optA.AllowEmpty = true
	a2, baseA2 := startNode(t, optA)
	_, served, _ = call(t, "GET", baseA2+"/.well-known/loom", "")
	require.Equal(t, "node-b", served, "the restarted node follows the new holder")
	require.False(t, a2.Leading())
	require.Equal(t, []string{"user hello", "assistant You said: \"hello\"", "user again", "assistant You said: \"again\""}, transcript(t, baseA2, conv.ID, 4))
}

// TestOpenRefusesBesideTheHolder: an engine that is not a node refuses to run on a database whose
// lease another engine holds, naming it.
func TestOpenRefusesBesideTheHolder(t *testing.T) {
	url := pgtest.TempDatabase(t)
	ctx := context.Background()
	first, err := reference.Open(ctx, nodeOptions(t, url, "first", 5*time.Second))
	require.NoError(t, err)
	defer first.Close()
	second, err := reference.Open(ctx, nodeOptions(t, url, "second", 5*time.Second))
	if err == nil {
		second.Close()
	}
	require.ErrorIs(t, err, reference.ErrLeaseHeld)
	var held *store.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, "first", held.Lease.Holder)
}

// TestAnEngineSupersededWritesNothing: once the lease is granted anew (here to the same holder,
// as a restarted engine would take it), the engine that held it can write nothing, even before
// it notices; it then stops.
func TestAnEngineSupersededWritesNothing(t *testing.T) {
	url := pgtest.TempDatabase(t)
	ctx := context.Background()
	opt := nodeOptions(t, url, "old", 400*time.Millisecond)
	eng, err := reference.Open(ctx, opt)
	require.NoError(t, err)
	defer eng.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- eng.Serve(ln) }()
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	kept, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{ID: "kept"})
	require.NoError(t, err)

	st, err := postgres.Open(ctx, url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Acquire(ctx, "engine", "old", "", time.Minute)
	require.NoError(t, err)
	_, _, err = eng.Conversations().Start(ctx, alice, conversation.StartOptions{ID: "lost"})
	// Refused by the fence, or, when the renewal noticed the new grant first and the engine
	// stopped, by the stopped kernel or the closed store: never written.
	require.True(t, errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrClosed) || errors.Is(err, kernel.ErrStopped),
		"a superseded engine's write: %v", err)
	select {
	case err := <-served:
		require.ErrorIs(t, err, reference.ErrEngineClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("the superseded engine went on serving")
	}
	// An engine of the same holder takes the lease back at once, and finds only what was
	// written before the new grant.
	again, err := reference.Open(ctx, nodeOptions(t, url, "old", time.Minute))
	require.NoError(t, err)
	defer again.Close()
	got, err := again.Conversations().Status(ctx, alice, kept.ID)
	require.NoError(t, err)
	require.Equal(t, kept.ID, got.ID)
	_, err = again.Conversations().Status(ctx, alice, conversation.ChosenID(alice, "lost"))
	require.ErrorIs(t, err, loomtype.ErrNotFound, "the write refused by the fence left nothing")
}

// TestNodeConfiguration: the configuration document's storage.url and node map onto the options,
// and a bad combination is refused as a configuration error.
func TestNodeConfiguration(t *testing.T) {
	base := sutconfig.SUTConfig{Listen: "127.0.0.1:9000", DataDir: t.TempDir(), Signing: sutconfig.SigningConfig{Key: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="},
		Identity: sutconfig.IdentityConfig{Insecure: true}}
	c := base
	c.Storage.URL = "postgres://db/loom"
	c.Node = sutconfig.NodeConfig{ID: "n1", LeaseMs: 1500}
	opt, err := reference.FromConfig(c)
	require.NoError(t, err)
	require.Equal(t, "postgres://db/loom", opt.StoreURL)
	require.Equal(t, reference.NodeOptions{ID: "n1", Advertise: "http://127.0.0.1:9000", Lease: 1500 * time.Millisecond}, opt.Node)

	c = base
	c.Storage.URL = "mysql://db/loom"
	_, err = reference.FromConfig(c)
	require.ErrorIs(t, err, loomtype.ErrConfig)

	c = base
	c.Node = sutconfig.NodeConfig{ID: "n1"}
	_, err = reference.FromConfig(c)
	require.ErrorIs(t, err, loomtype.ErrConfig, "a node without a shared database")
}

// TestOpenNodeRefusesWhatOpenRefuses: a configuration the engine refuses keeps a node from
// starting at all, before it reaches the database (here none answers), rather than leaving it to
// follow while every try to lead is refused.
func TestOpenNodeRefusesWhatOpenRefuses(t *testing.T) {
	opt := nodeOptions(t, "postgres://loom@127.0.0.1:1/none", "n1", time.Second)
	opt.Node.Advertise = "http://127.0.0.1:1"
	opt.Conversation.NeedsApproval = []string{"drop-table"}
	n, err := reference.OpenNode(context.Background(), opt)
	if err == nil {
		n.Close()
	}
	require.ErrorIs(t, err, conversation.ErrApproval)
}

// TestAFollowerAnswersAsTheHolder: what a client puts in its headers does not change the answer
// with the node that takes the request. An Origin named in the Connection header is still judged
// (the forbidden origin refused, as the holder refuses it directly), and a Loom-Forwarded-By a
// client sends, naming either node or none, is ignored: the follower forwards the request at once
// instead of waiting for a lease it will never hold.
func TestAFollowerAnswersAsTheHolder(t *testing.T) {
	url := pgtest.TempDatabase(t)
	const lease = 800 * time.Millisecond
	optA := nodeOptions(t, url, "node-a", lease)
	optA.Gateway.AllowedOrigins = []string{"https://app.example"}
	a, baseA := startNode(t, optA)
	waitLeading(t, a)
	optB := nodeOptions(t, url, "node-b", lease)
	optB.Gateway.AllowedOrigins = optA.Gateway.AllowedOrigins
	b, baseB := startNode(t, optB)
	require.False(t, b.Leading())

	send := func(base, method, path, body string, header map[string]string) (int, string, string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		require.NoError(t, err, "%s %s %v", method, path, header)
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header.Get(reference.NodeHeader), string(got)
	}
	for _, hop := range []string{"Origin", "origin, keep-alive", "Keep-Alive, Origin"} {
		h := map[string]string{"Origin": "https://evil.example", "Connection": hop}
		codeA, _, bodyA := send(baseA, "POST", "/conversations", `{}`, h)
		codeB, served, bodyB := send(baseB, "POST", "/conversations", `{}`, h)
		require.Equal(t, 403, codeA, "the holder refuses the origin: %s", bodyA)
		require.Equal(t, [2]any{codeA, bodyA}, [2]any{codeB, bodyB}, "Connection: %s", hop)
		require.Equal(t, "node-a", served)
	}
	for _, forged := range []string{"node-b", "node-a", "someone", ""} {
		h := map[string]string{"Loom-Forwarded-By": forged}
		if forged == "" {
			h["Loom-Forwarded-By"] = "node-b 0000"
		}
		code, served, body := send(baseB, "POST", "/conversations", `{}`, h)
		require.Equal(t, 201, code, body)
		require.Equal(t, "node-a", served, "Loom-Forwarded-By: %s", h["Loom-Forwarded-By"])
		code, served, body = send(baseA, "POST", "/conversations", `{}`, h)
		require.Equal(t, 201, code, body)
		require.Equal(t, "node-a", served)
	}
}
