package reference

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
)

// forwardDomain separates the key that marks forwards from every other use of the signing keys.
const forwardDomain = "loom node forwarding v1"

// markFor is the proof that the node named id forwarded a request: HMAC-SHA256, under a key
// derived from key for this use alone, of the name.
func markFor(key []byte, id string) []byte {
	d := hmac.New(sha256.New, key)
	d.Write([]byte(forwardDomain))
	m := hmac.New(sha256.New, d.Sum(nil))
	m.Write([]byte(id))
	return m.Sum(nil)
}

// mark is the value of forwardedHeader on this node's forwards: its name, a space and the proof
// (hex) under the newest signing key.
func (n *Node) mark() string {
	if len(n.keys) == 0 {
		return n.id
	}
	return n.id + " " + hex.EncodeToString(markFor(n.keys[0], n.id))
}

// fromNode reports whether v is the mark of a node holding one of this node's signing keys.
func (n *Node) fromNode(v string) bool {
	i := strings.LastIndexByte(v, ' ')
	if i <= 0 {
		return false
	}
	proof, err := hex.DecodeString(v[i+1:])
	if err != nil {
		return false
	}
	for _, k := range n.keys {
		if hmac.Equal(proof, markFor(k, v[:i])) {
			return true
		}
	}
	return false
}

// forwardTransport sends a request that the transport may send again by itself (a GET without a
// body: one on a kept-alive connection the holder had closed is retried) over kept-alive
// connections, and every other request over a connection of its own. A request whose connection
// could not be made certainly never reached the holder and may be tried again; on a kept-alive
// connection the holder closed while idle, a POST would fail after it was written, and so could not
// be told from one the holder saw before it died.
type forwardTransport struct{ reuse, fresh http.RoundTripper }

func (t forwardTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if replayable(r) {
		return t.reuse.RoundTrip(r)
	}
	return t.fresh.RoundTrip(r)
}

// replayable: r has no body and its method changes nothing (GET, HEAD, OPTIONS), so it may be
// sent to the holder again.
func replayable(r *http.Request) bool {
	if r.Body != nil && r.Body != http.NoBody {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

// forwardBody is a request body passed on to the holder: it counts what was read, and a Close
// (which a failed forward makes) leaves it open for the next try; the server closes the body.
// It is read by the forwarding transport's goroutine while the handler looks at it.
type forwardBody struct {
	r   io.ReadCloser
	n   atomic.Int64
	eof atomic.Bool

	mu      sync.Mutex
	idle    sync.Cond // signalled when a read ends
	reading bool
	stopped bool
}

func newForwardBody(r io.ReadCloser) *forwardBody {
	b := &forwardBody{r: r}
	b.idle.L = &b.mu
	return b
}

func (b *forwardBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return 0, io.ErrUnexpectedEOF
	}
	b.reading = true
	b.mu.Unlock()
	k, err := b.r.Read(p)
	b.mu.Lock()
	b.reading = false
	b.idle.Broadcast()
	b.mu.Unlock()
	b.n.Add(int64(k))
	if err == io.EOF {
		b.eof.Store(true)
	}
	return k, err
}

func (b *forwardBody) Close() error { return nil }

// stop ends the reading of the body: no read starts after it, and it waits for the one in flight
// (which the caller ended by setting the connection's read deadline).
func (b *forwardBody) stop() {
	b.mu.Lock()
	b.stopped = true
	for b.reading {
		b.idle.Wait()
	}
	b.mu.Unlock()
}

// refreshHolder reads the newest grant of partition i's lease.
func (n *Node) refreshHolder(ctx context.Context, i int) store.Lease {
	l, ok, err := n.leases.Holder(ctx, n.parts[i].lease)
	if err != nil || !ok {
		return store.Lease{}
	}
	n.mu.Lock()
	n.parts[i].holder, n.parts[i].seenAt = l, time.Now()
	n.mu.Unlock()
	return l
}

// forward sends r, routed to dest, to the holder at base. done is false when nothing was written to w and the
// request may be tried again: the holder could not be reached before it saw the request (its
// connection was refused), or the request changes nothing (replayable, not an upgrade) and no
// answer came. A holder that dies after it saw any other request ends w's connection, as the
// holder's own crash would have.
func (n *Node) forward(w http.ResponseWriter, r *http.Request, base string, dest destination) (done bool, err error) {
	target, perr := url.Parse(base)
	if perr != nil {
		return false, perr
	}
	var failed error
	ctx := context.WithValue(context.WithValue(r.Context(), targetKey{}, target), failedKey{}, &failed)
	ctx = context.WithValue(ctx, destKey{}, dest)
	n.proxy.ServeHTTP(&proxyWriter{w: w, h: w.Header().Clone()}, r.WithContext(ctx))
	if failed == nil {
		return true, nil
	}
	if errors.Is(failed, errMisdirected) {
		return false, failed // answered before the body was read: asked again of the holder
	}
	if r.Context().Err() != nil {
		return true, failed // the client went away
	}
	var op *net.OpError
	if errors.As(failed, &op) && op.Op == "dial" {
		return false, failed
	}
	if replayable(r) && r.Header.Get("Upgrade") == "" {
		// The proxy calls its error handler only when no answer came, before anything was
		// written to w; a request without a body that changes nothing (a GET) may be sent again,
		// whether or not the dead holder saw it. (A holder killed with kept-alive connections
		// open fails the GET that met one of them with an EOF or a reset, not a refused dial.)
		return false, failed
	}
	// The holder saw the request and died (or answered nothing): as its crash would, the
	// connection ends without an answer.
	panic(http.ErrAbortHandler)
}

// proxyWriter is what the proxy answers the client through. It keeps the holder's interim
// answers (1xx: the 100 Continue that answers this node's own Expect) from the client, and gives
// the proxy a header map of its own until the final answer, so that nothing the proxy does while
// the body is still being sent to the holder touches the client's writer.
type proxyWriter struct {
	w     http.ResponseWriter
	h     http.Header
	wrote bool
}

func (p *proxyWriter) Header() http.Header {
	if p.wrote {
		return p.w.Header()
	}
	return p.h
}

func (p *proxyWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	p.commit()
	p.w.WriteHeader(code)
}

func (p *proxyWriter) Write(b []byte) (int, error) {
	p.commit()
	return p.w.Write(b)
}

// commit makes the proxy's headers the client's, once.
func (p *proxyWriter) commit() {
	if p.wrote {
		return
	}
	p.wrote = true
	h := p.w.Header()
	clear(h)
	maps.Copy(h, p.h)
}

// Unwrap lets the proxy flush and hijack the client's connection (http.ResponseController).
func (p *proxyWriter) Unwrap() http.ResponseWriter { return p.w }
