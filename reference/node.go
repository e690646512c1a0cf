package reference

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// Headers of the nodes' protocol (spec/nodes.md).
const (
	// NodeHeader names, on every response, the node that served it (the lease holder), so an
	// operator, or the kit's nodes driver, can tell which node runs the executions.
	NodeHeader = "Loom-Node"
	// forwardedHeader marks a request one node forwarded to another: the receiver serves it or
	// waits, and never forwards it again. Its value is the forwarding node's name and a proof made
	// with the signing keys the nodes share (see mark), so that no client can make one: a value
	// without a valid proof is removed and the request served as any other.
	forwardedHeader = "Loom-Forwarded-By"
)

// connectionHeaders are the headers of one connection, which a node sets anew for its own
// connection to the holder: every other header of a client's request reaches the holder as the
// client sent it, whether or not the client's Connection header names it.
var connectionHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, forwardedHeader: true,
}

// unavailableBody is the answer of a node that found no holder within its wait.
var unavailableBody = []byte(`{"error":"unavailable"}`)

// Node is one engine node of several on one shared database (spec/nodes.md). Every node serves
// the whole HTTP surface at its own address. At most one of them, the holder of the database's
// lease, runs the executions; the others are followers, which forward every request to the
// holder's advertised address, streams and WebSocket upgrades included, and answer as the holder
// answered. A follower tries to take the lease all the time: once the holder stops renewing it (it
// died, or cannot reach the database), one follower is granted it and serves from then on,
// recovering the open executions by replay as the engine does at Open (each when first needed,
// the others in the background). While no node holds a live lease, a request waits
// (bounded) for one and is then served; every write of a node whose lease was superseded is
// refused by the database, so two nodes never both run an execution.
//
// Node's methods are safe for concurrent use.
//
//	n, err := reference.OpenNode(ctx, reference.Options{DataDir: dir, StoreURL: "postgres://loom@db/loom",
//		Node: reference.NodeOptions{ID: "node-1", Advertise: "http://10.0.0.7:8080"}, /* ... */})
//	if err != nil { return err }
//	defer n.Close()
//	ln, _ := net.Listen("tcp", ":8080")
//	_ = n.Serve(ln)
type Node struct {
	opt    Options
	id     string
	ttl    time.Duration
	lock   *os.File
	keys   [][]byte // the signing keys, which mark this node's forwards (see mark)
	raw    store.Store
	leases store.Leases
	logger *slog.Logger
	edge   gateway.Edge
	proxy  *httputil.ReverseProxy
	tr     *http.Transport

	mu      sync.Mutex
	eng     *Engine
	changed chan struct{} // closed and replaced whenever eng changes
	holder  store.Lease   // the newest grant seen, and when it was read
	seenAt  time.Time
	servers []*http.Server
	closed  bool

	done chan struct{}
	wake chan struct{}
	wg   sync.WaitGroup
}

// OpenNode opens an engine node on opt.StoreURL (a PostgreSQL database several nodes share),
// with opt.Node naming it and its advertised address. It returns at once, as a follower; it
// becomes the holder, opening the engine on the database (which recovers the open executions, as
// Open does), as soon as the database's lease is free or lapsed (at once when it is the holder
// that restarted).
//
// Errors: loomtype.ErrConfig (wrapped) for a missing store URL or advertised address or a
// conversation configuration Open would refuse (conversation.ErrApproval among them), ErrLocked,
// ErrDataGone, ErrPartitionsDiffer for a database made with another partition count than
// opt.Node.Partitions, ErrPartitionRouting for more than one, store errors.
func OpenNode(ctx context.Context, opt Options) (*Node, error) {
	if !isServerURL(opt.StoreURL) {
		return nil, fmt.Errorf("%w: a node needs a postgres:// store URL that other nodes share", loomtype.ErrConfig)
	}
	if _, err := url.Parse(opt.Node.Advertise); err != nil || opt.Node.Advertise == "" {
		return nil, fmt.Errorf("%w: a node needs the http:// address other nodes reach it at", loomtype.ErrConfig)
	}
	// A configuration the engine refuses would be refused only once the node leads, and then at
	// every try: refused here, the node does not start, as Open does not.
	if _, err := conversation.New(opt.Conversation, opt.Deps, nil); err != nil {
		return nil, err
	}
	if err := onePartition(opt); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(opt)
	if err != nil {
		return nil, err
	}
	id, err := nodeID(opt)
	if err != nil {
		lock.Close()
		return nil, err
	}
	opt.Node.ID = id
	logErrors(&opt)
	raw, err := openStore(ctx, opt)
	if err != nil {
		lock.Close()
		return nil, err
	}
	ls, ok := raw.(store.Leases)
	if !ok {
		raw.Close()
		lock.Close()
		return nil, fmt.Errorf("%w: the store cannot be shared (it has no leases)", loomtype.ErrConfig)
	}
	if _, err := partitionCount(ctx, raw, opt); err != nil {
		raw.Close()
		lock.Close()
		return nil, err
	}
	dial := (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	tr := &http.Transport{Proxy: nil, DialContext: dial, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}
	fresh := &http.Transport{Proxy: nil, DialContext: dial, DisableKeepAlives: true}
	n := &Node{opt: opt, id: id, keys: opt.Conversation.Keys, ttl: leaseTTL(opt), lock: lock, raw: raw, leases: ls, logger: opt.Logger,
		edge: opt.Edge, tr: tr, changed: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	n.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the holder judges the Host the client sent
			// The proxy dropped the headers the client's Connection header names, and the
			// forwarding ones: the holder judges them as it would had the client come to it.
			for k, v := range pr.In.Header {
				if _, set := pr.Out.Header[k]; !set && !connectionHeaders[k] {
					pr.Out.Header[k] = slices.Clone(v)
				}
			}
			pr.Out.Header.Set(forwardedHeader, n.mark())
		},
		Transport:     forwardTransport{reuse: tr, fresh: fresh},
		FlushInterval: -1, // event streams: every write goes through at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			*r.Context().Value(failedKey{}).(*error) = err
		},
	}
	n.wg.Go(n.run)
	return n, nil
}

type (
	targetKey struct{}
	failedKey struct{}
)

// run takes the lease whenever it is free, until the node closes.
func (n *Node) run() {
	tick := time.NewTicker(n.ttl / 4)
	defer tick.Stop()
	for {
		n.mu.Lock()
		active := n.eng != nil
		n.mu.Unlock()
		if !active {
			n.tryLead()
		}
		select {
		case <-n.done:
			return
		case <-tick.C:
		case <-n.wake:
		}
	}
}

// tryLead asks for the lease and, granted it, opens the engine on it (which recovers the open
// executions) and starts serving from it.
func (n *Node) tryLead() {
	ctx, cancel := context.WithTimeout(context.Background(), n.ttl)
	defer cancel()
	l, err := n.leases.Acquire(ctx, leaseName, n.id, n.opt.Node.Advertise, n.ttl)
	var held *store.HeldError
	switch {
	case errors.As(err, &held):
		n.mu.Lock()
		n.holder, n.seenAt = held.Lease, time.Now()
		n.mu.Unlock()
		return
	case err != nil:
		if !errors.Is(err, store.ErrClosed) {
			n.logger.Warn("node: asking for the lease failed", "error", err)
		}
		return
	}
	n.logger.Info("node: granted the lease; recovering the executions", "node", n.id, "token", l.Token)
	hold := newHold(n.leases, l, n.ttl, n.logger)
	e := &Engine{node: true, raw: n.raw, st: hold.fenced, hold: hold, dir: n.opt.DataDir, edge: n.edge, logger: n.logger}
	e.onLost = n.lost
	// Recovery may take a while; the hold is renewed meanwhile.
	hold.keep(e.lose)
	if err := e.assemble(context.Background(), n.opt); err != nil {
		hold.release()
		n.logger.Error("node: the executions could not be recovered; giving the lease back", "error", err)
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		e.Close()
		return
	}
	n.eng = e
	n.holder, n.seenAt = l, time.Now()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
	n.logger.Info("node: serving as the lease holder", "node", n.id)
}

// lost is called by the engine once it lost the lease: the node follows again.
func (n *Node) lost() {
	n.mu.Lock()
	n.eng = nil
	n.seenAt = time.Time{}
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// ID is the node's name.
func (n *Node) ID() string { return n.id }

// Leading reports whether this node holds the lease and runs the executions now.
func (n *Node) Leading() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.eng != nil
}

// Engine is the engine this node runs while it holds the lease, else nil.
func (n *Node) Engine() *Engine {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.eng
}

// Handler is the node's HTTP surface: served here while it holds the lease, forwarded to the
// holder otherwise.
func (n *Node) Handler() http.Handler { return n }

// followWait is how long a request waits for a holder to serve it.
func (n *Node) followWait() time.Duration { return 2*n.ttl + 10*time.Second }

// ServeHTTP implements http.Handler.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(NodeHeader)
	// The body is passed on as it arrives (the holder may answer before it, as it would
	// directly); a forward refused before the holder was reached read none of it, so it can be
	// tried again, on the next holder or here once this node leads.
	var body *forwardBody
	if r.Body != nil && r.Body != http.NoBody {
		body = newForwardBody(r.Body)
		r.Body = body
	}
	// Only another node's mark makes a request forwarded; one a client set is removed, so that
	// the request is forwarded and served as any other.
	marks := r.Header.Values(forwardedHeader)
	forwarded := len(marks) == 1 && n.fromNode(marks[0])
	r.Header.Del(forwardedHeader)
	deadline := time.NewTimer(n.followWait())
	defer deadline.Stop()
	for {
		n.mu.Lock()
		eng, changed, holder, seenAt := n.eng, n.changed, n.holder, n.seenAt
		n.mu.Unlock()
		if eng != nil {
			w.Header().Set(NodeHeader, n.id)
			eng.Handler().ServeHTTP(w, r)
			return
		}
		if !forwarded {
			if time.Since(seenAt) > n.ttl/8 {
				holder = n.refreshHolder(r.Context())
			}
			if holder.Holder != "" && holder.Holder != n.id && holder.Note != "" && time.Until(holder.Expires) > 0 {
				done, err := n.forward(w, r, holder.Note)
				if done {
					if body != nil && !body.eof.Load() {
						// The holder answered before the whole body came (a refusal) and the
						// forward may still be waiting for the rest: the read is ended here,
						// and the connection with it, as the holder ends its own. (A read still
						// in flight when this handler returns would leave the server waiting
						// for the rest with no deadline.)
						_ = http.NewResponseController(w).SetReadDeadline(time.Now())
						body.stop()
					}
					return
				}
				if body != nil && body.n.Load() > 0 {
					// Part of the body is gone; as a crash would, the connection ends.
					panic(http.ErrAbortHandler)
				}
				n.logger.Debug("node: the holder did not answer; waiting for the next", "holder", holder.Holder, "error", err)
				n.mu.Lock()
				n.seenAt = time.Time{}
				n.mu.Unlock()
			}
		}
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-r.Context().Done():
			return
		case <-deadline.C:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(unavailableBody)
			return
		}
	}
}

// Serve serves the node's surface on ln with the edge of Options.Edge (see Engine.Serve), until
// the node is closed or crashed (ErrEngineClosed) or ln fails.
func (n *Node) Serve(ln net.Listener) error {
	srv := n.edge.Server(n)
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		ln.Close()
		return ErrEngineClosed
	}
	n.servers = append(n.servers, srv)
	n.mu.Unlock()
	err := srv.Serve(n.edge.Listener(ln))
	if errors.Is(err, http.ErrServerClosed) {
		return ErrEngineClosed
	}
	return err
}

// shut marks the node closed, ends its loop and its servers (gracefully for up to grace), and
// returns the engine it ran, if any.
func (n *Node) shut(grace time.Duration) *Engine {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	eng := n.eng
	n.eng = nil
	servers := n.servers
	n.servers = nil
	n.mu.Unlock()
	close(n.done)
	n.wg.Wait()
	if eng != nil {
		eng.mu.Lock()
		gw := eng.gw
		eng.mu.Unlock()
		gw.Shutdown() // open streams end now, so the servers' shutdown need not wait for them
	}
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			if grace > 0 {
				ctx, cancel := context.WithTimeout(context.Background(), grace)
				defer cancel()
				if srv.Shutdown(ctx) == nil {
					return
				}
			}
			_ = srv.Close()
		})
	}
	wg.Wait()
	n.tr.CloseIdleConnections()
	return eng
}

// Close stops serving (requests in flight get a moment), stops the executions this node runs and
// gives the lease up, so that another node takes them over at once; then closes the store.
func (n *Node) Close() error {
	eng := n.shut(closeGrace)
	if eng != nil {
		_ = eng.Close()
	}
	err := n.raw.Close()
	n.lock.Close()
	return err
}

// Kill stops the node as a crash would: nothing it does reaches the database after this
// instant, and its lease is not given up, so another node takes its executions over once the
// lease lapses.
func (n *Node) Kill() {
	k, killable := n.raw.(store.Killer)
	if killable {
		k.Kill()
	}
	eng := n.shut(0)
	if eng != nil {
		eng.stopParts(0)
	}
	if killable {
		<-k.Released()
	} else {
		_ = n.raw.Close()
	}
	n.lock.Close()
}

// Crash is Kill: it lets a Node serve as a harness.Instance.
func (n *Node) Crash() { n.Kill() }
