package reference

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// dyingHolder is a holder that reads each request whole and dies before it answers: the
// connection closes with nothing written.
func dyingHolder(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				req.Body.Close()
			}
			c.Close()
		}
	}()
	return "http://" + ln.Addr().String()
}

// refusingAddr is a loopback address that refuses every connection until the test ends: a socket
// bound there that never listens holds the port, so no other program can start listening on it
// (as it could on the port of a listener closed to find a dead address).
func refusingAddr(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	syscall.CloseOnExec(fd)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	return "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
}

// TestAForwardTheHolderDiedOn: a request the holder saw and died on before it answered is sent
// again when it changes nothing (a GET or HEAD without a body: forward reports it not done, and
// nothing was written); any other (a POST, an upgrade) ends the client's connection as the
// holder's crash would, since the holder may have acted on it.
func TestAForwardTheHolderDiedOn(t *testing.T) {
	n, err := OpenNode(context.Background(), Options{
		DataDir:      filepath.Join(t.TempDir(), "node"),
		StoreURL:     pgtest.TempDatabase(t),
		Node:         NodeOptions{ID: "node-x", Lease: time.Second, Advertise: "http://127.0.0.1:1"},
		Conversation: conversation.Config{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}},
		Gateway:      gateway.Config{Insecure: true},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	base := dyingHolder(t)

	for _, method := range []string{http.MethodGet, http.MethodHead} {
		w := httptest.NewRecorder()
		done, err := n.forward(w, httptest.NewRequest(method, "/.well-known/loom", nil), base, destination{})
		require.False(t, done, "%s: a request that changes nothing is tried again", method)
		require.Error(t, err)
		require.False(t, w.Flushed)
		require.Empty(t, w.Body.String(), method)
		require.Empty(t, w.Header(), method)
	}

	upgrade := httptest.NewRequest(http.MethodGet, "/sessions/c1/stream", nil)
	upgrade.Header.Set("Connection", "Upgrade")
	upgrade.Header.Set("Upgrade", "websocket")
	post := httptest.NewRequest(http.MethodPost, "/conversations", nil)
	for _, r := range []*http.Request{post, upgrade} {
		require.PanicsWithValue(t, http.ErrAbortHandler, func() {
			_, _ = n.forward(httptest.NewRecorder(), r, base, destination{})
		}, "%s %s: the connection ends", r.Method, r.URL.Path)
	}

	// A holder that cannot be reached at all: every request is tried again.
	gone := "http://" + refusingAddr(t)
	done, err := n.forward(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/conversations", nil), gone, destination{})
	require.False(t, done)
	require.Error(t, err)
}

// TestAForwardCarriesTheClientsHeaders: the holder gets every header the client sent, those the
// client's Connection header names included (they are judged by the holder as if the client had
// come to it directly), and the forwarding node's own mark in place of any Loom-Forwarded-By the
// client sent.
func TestAForwardCarriesTheClientsHeaders(t *testing.T) {
	n, err := OpenNode(context.Background(), Options{
		DataDir:      filepath.Join(t.TempDir(), "node"),
		StoreURL:     pgtest.TempDatabase(t),
		Node:         NodeOptions{ID: "node-x", Lease: time.Second, Advertise: "http://127.0.0.1:1"},
		Conversation: conversation.Config{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}},
		Gateway:      gateway.Config{Insecure: true},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	got := make(chan http.Header, 1)
	holder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(holder.Close)

	sent := map[string]string{
		"Origin": "https://evil.example", "Authorization": "Bearer tok-a", "Idempotency-Key": "k-1",
		"Loom-Device": "d-1", "Last-Event-ID": "7", "Content-Type": "application/json",
		"X-Forwarded-For": "10.0.0.9", "Forwarded": "for=10.0.0.9",
	}
	r := httptest.NewRequest(http.MethodGet, "/conversations/c1", nil)
	var named []string
	for k, v := range sent {
		r.Header.Set(k, v)
		named = append(named, k)
	}
	r.Header.Set("Connection", strings.Join(named, ", "))
	r.Header.Set(forwardedHeader, "node-x forged")
	done, err := n.forward(httptest.NewRecorder(), r, holder.URL, destination{})
	require.True(t, done)
	require.NoError(t, err)
	h := <-got
	for k, v := range sent {
		require.Equal(t, []string{v}, h.Values(k), k)
	}
	require.Len(t, h.Values(forwardedHeader), 1)
	require.True(t, n.fromNode(h.Get(forwardedHeader)), "the node's own mark")
	require.False(t, n.fromNode("node-x forged"))
}

// TestOnlyANodeCanMarkAForward: the mark of a forward is made with the signing keys the nodes
// share; a name alone, a mark made with another key or for another name is no mark.
func TestOnlyANodeCanMarkAForward(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	other := []byte("fedcba9876543210fedcba9876543210")
	a := &Node{id: "node-a", keys: [][]byte{key}}
	b := &Node{id: "node-b", keys: [][]byte{other, key}}
	require.True(t, a.fromNode(a.mark()))
	require.True(t, b.fromNode(a.mark()), "a previous key still verifies")
	require.False(t, a.fromNode(b.mark()), "made with a key the node does not have")
	forgedName := strings.Replace(a.mark(), "node-a", "node-b", 1)
	for _, v := range []string{"", "node-a", "node-b", forgedName, a.mark() + "0", " " + a.mark(), "node-a " + strings.Repeat("0", 64)} {
		require.False(t, a.fromNode(v), "%q", v)
	}
}
