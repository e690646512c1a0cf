package gateway_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/gateway"
)

// serveEdge serves h behind e on a loopback listener until the test ends.
func serveEdge(t *testing.T, e gateway.Edge, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.Server(h)
	go func() { _ = srv.Serve(e.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// ask sends a keep-alive GET on conn and returns the status, or 0 when the connection closed
// first; it fails the test when neither happens within two seconds.
func ask(t *testing.T, conn net.Conn, br *bufio.Reader) int {
	t.Helper()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("neither answered nor closed within 2s")
		}
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestEdgeDefaults(t *testing.T) {
	srv := gateway.Edge{}.Server(http.NotFoundHandler())
	if srv.ReadTimeout != gateway.DefaultRequestTimeout || srv.ReadHeaderTimeout != gateway.DefaultHeadersTimeout ||
		srv.IdleTimeout != gateway.DefaultIdleTimeout || srv.WriteTimeout != 0 {
		t.Fatalf("defaults: request %s, headers %s, idle %s, write %s; want %s, %s, %s, none", srv.ReadTimeout,
			srv.ReadHeaderTimeout, srv.IdleTimeout, srv.WriteTimeout, gateway.DefaultRequestTimeout,
			gateway.DefaultHeadersTimeout, gateway.DefaultIdleTimeout)
	}
	if gateway.DefaultRequestTimeout != 30*time.Second || gateway.DefaultHeadersTimeout != 10*time.Second ||
		gateway.DefaultMaxConnections != 512 {
		t.Fatalf("the documented defaults (spec/http.md) are 30s, 10s and 512")
	}
	// The header deadline is never longer than the request deadline.
	srv = gateway.Edge{RequestTimeout: time.Second, HeadersTimeout: 5 * time.Second}.Server(http.NotFoundHandler())
	if srv.ReadHeaderTimeout != time.Second {
		t.Fatalf("headers timeout over the request timeout: got %s, want 1s", srv.ReadHeaderTimeout)
	}
}

// TestEdgeDefaultCap holds the default number of connections: every one is answered, the next is
// closed unanswered, and closing one lets a new client in (and only one).
func TestEdgeDefaultCap(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 514 connections")
	}
	addr := serveEdge(t, gateway.Edge{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	type held struct {
		c  net.Conn
		br *bufio.Reader
	}
	var conns []held
	t.Cleanup(func() {
		for _, h := range conns {
			h.c.Close()
		}
	})
	dial := func() held {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return held{c, bufio.NewReader(c)}
	}
	for i := range gateway.DefaultMaxConnections {
		h := dial()
		conns = append(conns, h)
		if got := ask(t, h.c, h.br); got != http.StatusOK {
			t.Fatalf("connection %d of %d: got %d, want 200", i+1, gateway.DefaultMaxConnections, got)
		}
	}
	over := dial()
	if got := ask(t, over.c, over.br); got != 0 {
		t.Fatalf("connection %d: answered %d, want closed unanswered", gateway.DefaultMaxConnections+1, got)
	}
	over.c.Close()
	conns[0].c.Close()
	conns = conns[1:]
	var again held
	for deadline := time.Now().Add(2 * time.Second); ; {
		again = dial()
		if got := ask(t, again.c, again.br); got == http.StatusOK {
			break
		}
		again.c.Close()
		if time.Now().After(deadline) {
			t.Fatal("a freed slot did not serve a new connection within 2s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conns = append(conns, again)
	over = dial()
	defer over.c.Close()
	if got := ask(t, over.c, over.br); got != 0 {
		t.Fatalf("after one slot was reused: answered %d, want closed unanswered", got)
	}
}

// TestEdgeStalledBody: a body cut by the request deadline is answered 408 and the connection
// closed, whatever the handler writes after; an answer given before the body was read goes out
// at once and closes the connection.
func TestEdgeStalledBody(t *testing.T) {
	handlerSaw := make(chan error, 1)
	addr := serveEdge(t, gateway.Edge{RequestTimeout: time.Second}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, err := io.ReadAll(r.Body)
		handlerSaw <- err
		http.Error(w, "the handler's own answer", http.StatusBadRequest)
	}))
	for _, c := range []struct {
		path string
		code int
		body string
		wait time.Duration // the least time the answer may take
	}{
		{"/read", http.StatusRequestTimeout, `{"error":"request timeout"}`, time.Second},
		{"/refuse", http.StatusUnauthorized, "no\n", 0},
	} {
		began := time.Now() // before the dial: the server's deadline may start as soon as it accepts
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345", c.path)
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: no answer: %v", c.path, err)
		}
		took := time.Since(began)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.code || string(b) != c.body || !resp.Close {
			t.Fatalf("%s: got %d %q (close %v), want %d %q and the connection closed", c.path, resp.StatusCode, b, resp.Close, c.code, c.body)
		}
		if took < c.wait || (c.wait == 0 && took > 500*time.Millisecond) {
			t.Fatalf("%s: answered after %s", c.path, took)
		}
		if _, err := br.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
			t.Fatalf("%s: the connection is not closed after the answer: %v", c.path, err)
		}
		conn.Close()
	}
	if err := <-handlerSaw; err == nil {
		t.Fatal("the handler read a stalled body without an error")
	}
}

// TestEdgeKeepsAliveOnceTheBodyIsRead: a handler that read the whole body (to its end, or to
// its declared length) answers on a connection that stays open; one that did not read it closes
// the connection with its answer.
func TestEdgeKeepsAliveOnceTheBodyIsRead(t *testing.T) {
	addr := serveEdge(t, gateway.Edge{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/exact":
			buf := make([]byte, r.ContentLength)
			_, _ = io.ReadFull(r.Body, buf)
		case "/all":
			_, _ = io.ReadAll(r.Body)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	for path, wantClose := range map[string]bool{"/exact": false, "/all": false, "/unread": true} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd", path)
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
		if resp.Close != wantClose {
			t.Errorf("%s: connection close %v, want %v", path, resp.Close, wantClose)
		}
		conn.Close()
	}
}
