package reference

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/gateway"
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
		done, err := n.forward(w, httptest.NewRequest(method, "/.well-known/loom", nil), base)
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
			_, _ = n.forward(httptest.NewRecorder(), r, base)
		}, "%s %s: the connection ends", r.Method, r.URL.Path)
	}

	// A holder that cannot be reached at all: every request is tried again.
	gone := "http://" + refusingAddr(t)
	done, err := n.forward(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/conversations", nil), gone)
	require.False(t, done)
	require.Error(t, err)
}
