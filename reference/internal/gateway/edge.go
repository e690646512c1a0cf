package gateway

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Defaults of Edge.
const (
	DefaultRequestTimeout = 30 * time.Second
	DefaultHeadersTimeout = 10 * time.Second
	DefaultMaxConnections = 512
	DefaultIdleTimeout    = 2 * time.Minute
)

// Edge sets how the HTTP surface is served (spec/http.md, Connections). Zero values mean the
// documented defaults.
//
//	srv := gateway.Edge{RequestTimeout: 5 * time.Second}.Server(gw)
//	_ = srv.Serve(gateway.Edge{MaxConnections: 64}.Listener(ln))
type Edge struct {
	// RequestTimeout bounds how long a request may take to arrive in full, headers and body,
	// from its first byte. A body still incomplete then is answered 408 {"error":"request
	// timeout"} and its connection closed. Once a request has been read in full (at once for
	// one without a body, such as an event stream) its response may take as long as it needs.
	RequestTimeout time.Duration
	// HeadersTimeout bounds how long the headers may take (never more than RequestTimeout);
	// then the connection is closed, unanswered.
	HeadersTimeout time.Duration
	// MaxConnections caps the connections open at once, event streams and idle keep-alive
	// connections included; a connection over the cap is closed as soon as it is accepted,
	// unanswered.
	MaxConnections int
	// IdleTimeout closes a keep-alive connection that has had no request for this long.
	IdleTimeout time.Duration
}

// withDefaults fills the zero fields.
func (e Edge) withDefaults() Edge {
	if e.RequestTimeout <= 0 {
		e.RequestTimeout = DefaultRequestTimeout
	}
	if e.HeadersTimeout <= 0 {
		e.HeadersTimeout = DefaultHeadersTimeout
	}
	e.HeadersTimeout = min(e.HeadersTimeout, e.RequestTimeout)
	if e.MaxConnections <= 0 {
		e.MaxConnections = DefaultMaxConnections
	}
	if e.IdleTimeout <= 0 {
		e.IdleTimeout = DefaultIdleTimeout
	}
	return e
}

// Server returns an http.Server for h with the edge's deadlines; serve it on Listener(ln) so that
// the connection cap applies too. It sets no write deadline: an event stream answers for as long
// as it lives.
//
//	e := gateway.Edge{}
//	srv := e.Server(gw)
//	go srv.Serve(e.Listener(ln))
//	defer srv.Close()
func (e Edge) Server(h http.Handler) *http.Server {
	e = e.withDefaults()
	return &http.Server{
		Handler:           edgeHandler{h},
		ReadHeaderTimeout: e.HeadersTimeout,
		ReadTimeout:       e.RequestTimeout,
		IdleTimeout:       e.IdleTimeout,
	}
}

// Listener wraps ln so that at most MaxConnections accepted connections are open at once: one
// over the cap is closed as soon as it is accepted, and a slot comes back when its connection is
// closed. Accept is safe for concurrent use.
//
//	ln = gateway.Edge{MaxConnections: 100}.Listener(ln)
func (e Edge) Listener(ln net.Listener) net.Listener {
	e = e.withDefaults()
	return &capListener{Listener: ln, max: e.MaxConnections}
}

// capListener is a listener whose open connections are capped.
type capListener struct {
	net.Listener
	max int

	mu   sync.Mutex
	open int
}

// Accept returns the next connection within the cap, closing at once every one over it.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		ok := l.open < l.max
		if ok {
			l.open++
		}
		l.mu.Unlock()
		if ok {
			return &cappedConn{Conn: c, l: l}, nil
		}
		_ = c.Close()
	}
}

// Open is the number of accepted connections not yet closed.
func (l *capListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// cappedConn gives its slot back, once, when it is closed.
type cappedConn struct {
	net.Conn
	l    *capListener
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.open--
		c.l.mu.Unlock()
	})
	return err
}

// edgeHandler applies the request deadline's rules around h (net/http itself lifts the read
// deadline once a request is read in full, at once when it has no body, so a long response such
// as an event stream is never cut by it):
//   - a body read that hits the deadline is answered 408 and the connection closed; what h
//     writes afterwards is dropped;
//   - an answer given before the body was read in full closes the connection, so it goes out at
//     once instead of waiting for a body that may never come.
type edgeHandler struct{ h http.Handler }

var requestTimeoutBody = []byte(`{"error":"request timeout"}`)

func (e edgeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		e.h.ServeHTTP(w, r)
		return
	}
	ew := &edgeWriter{ResponseWriter: w}
	eb := &edgeBody{ReadCloser: r.Body, w: ew, left: r.ContentLength}
	r.Body = eb
	e.h.ServeHTTP(ew, r)
}

// edgeWriter is the ResponseWriter of a request with a body.
type edgeWriter struct {
	http.ResponseWriter
	// read: the body was read to its end; timedOut: the 408 went out and the rest is dropped.
	read, timedOut, wrote bool
}

func (w *edgeWriter) WriteHeader(code int) {
	if w.timedOut {
		return
	}
	if !w.wrote && !w.read {
		w.Header().Set("Connection", "close")
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *edgeWriter) Write(b []byte) (int, error) {
	if w.timedOut {
		return 0, http.ErrHandlerTimeout
	}
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *edgeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets a handler flush through the wrapper.
func (w *edgeWriter) Flush() {
	if w.timedOut {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// edgeBody watches the request body for its end and for the request deadline.
type edgeBody struct {
	io.ReadCloser
	w *edgeWriter
	// left is what remains of a body of known length (-1: unknown, chunked).
	left int64
}

func (b *edgeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	switch {
	case err == io.EOF || b.left == 0:
		b.w.read = true
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !b.w.timedOut:
		if !b.w.wrote {
			h := b.w.Header()
			for k := range h {
				if k != "X-Content-Type-Options" && k != "Access-Control-Allow-Origin" && k != "Vary" &&
					k != "Access-Control-Allow-Credentials" && k != "Access-Control-Expose-Headers" {
					h.Del(k)
				}
			}
			h.Set("Content-Type", "application/json")
			h.Set("Connection", "close")
			b.w.ResponseWriter.WriteHeader(http.StatusRequestTimeout)
			_, _ = b.w.ResponseWriter.Write(requestTimeoutBody)
			b.w.wrote = true
		}
		b.w.timedOut = true
	}
	return n, err
}
