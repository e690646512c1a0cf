package reference

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
	// partitionHeader, on a forward, names the partition the sender routed the request by
	// (absent: any partition the receiver holds). It is read only beside a valid forwardedHeader
	// and removed from every request.
	partitionHeader = "Loom-Partition"
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

// expectContinue is how long a forward waits for the receiver to ask for the body before it
// sends it all the same.
const expectContinue = 5 * time.Second

// errMisdirected: the node a request was forwarded to does not hold its partition (any more).
var errMisdirected = errors.New("node: the partition is not held there")

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
// With NodeOptions.Partitions P above 1 the executions are shared out in P partitions, each
// with a lease of its own ("partition/<i>") and a namespace of its own in the store: the node
// runs one engine for each partition whose lease it holds, on that partition's namespace, its
// writes fenced by that partition's token alone. The nodes share the partitions out: each holds
// a membership lease ("node/<name>") and takes the partitions partition.Assign gives it among the
// live members, giving up those it gives another. A request goes to the engine of its partition
// (node_route.go: by the execution its path names, its ticket, or a creation's chosen id; a
// creation without one to a partition of the node it reached, which mints the id there), here or
// at the partition's holder. At one partition (the default) the lease is "engine" and the
// namespace the store's root, as before partitions existed.
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

	// want says which partitions the node asks for (nil: every one).
	want func(i int) bool

	// turn spreads the requests for any partition over the partitions this node holds (serving),
	// away the ones over every partition's holder (spread): two counters, so that each advances
	// by one a request and every partition gets its turn.
	turn, away atomic.Uint64
	// moveDefer is how long a partition due to move waits for a quiet moment at most
	// (handOverDefer; a duration).
	moveDefer atomic.Int64

	mu      sync.Mutex
	parts   []nodePart    // by partition; the lease and namespace of each never change
	changed chan struct{} // closed and replaced whenever a part's engine changes
	servers []*http.Server
	closed  bool
	member  store.Lease // this node's membership, when it shares partitions out (balancing)

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
// opt.Node.Partitions, store errors.
func OpenNode(ctx context.Context, opt Options) (*Node, error) {
	if _, err := configuredPartitions(opt); err != nil {
		return nil, err
	}
	return openNode(ctx, opt, nil)
}

// openNode is OpenNode for any partition count, the node asking for the partitions want admits
// (nil: every one).
func openNode(ctx context.Context, opt Options, want func(int) bool) (*Node, error) {
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
	p, err := partitionCount(ctx, raw, opt)
	if err != nil {
		raw.Close()
		lock.Close()
		return nil, err
	}
	dial := (&net.Dialer{Timeout: 2 * time.Second}).DialContext
	tr := &http.Transport{Proxy: nil, DialContext: dial, MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}
	fresh := &http.Transport{Proxy: nil, DialContext: dial, DisableKeepAlives: true, ExpectContinueTimeout: expectContinue}
	n := &Node{opt: opt, id: id, keys: opt.Conversation.Keys, ttl: leaseTTL(opt), lock: lock, raw: raw, leases: ls, logger: opt.Logger,
		edge: opt.Edge, tr: tr, want: want, parts: newParts(p), changed: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	n.proxy = n.newProxy(tr, fresh)
	n.moveDefer.Store(int64(handOverDefer))
	n.wg.Go(n.run)
	return n, nil
}

// newProxy is the proxy that forwards requests to a partition's holder: GETs without a body over
// the kept-alive connections of reuse, every other request over a connection of its own (fresh).
func (n *Node) newProxy(reuse, fresh *http.Transport) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
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
			pr.Out.Header.Del(partitionHeader)
			if dest, _ := pr.In.Context().Value(destKey{}).(destination); !dest.anyPart {
				pr.Out.Header.Set(partitionHeader, strconv.Itoa(dest.part))
			}
			if pr.In.Body != nil && pr.In.Body != http.NoBody {
				// The body goes once the receiver reads it: a node that no longer holds the
				// partition answers 421 first, and the body is still whole for the holder.
				pr.Out.Header.Set("Expect", "100-continue")
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusMisdirectedRequest {
				return errMisdirected
			}
			return nil
		},
		Transport:     forwardTransport{reuse: reuse, fresh: fresh},
		FlushInterval: -1, // event streams: every write goes through at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			*r.Context().Value(failedKey{}).(*error) = err
		},
	}
}

type (
	targetKey struct{}
	failedKey struct{}
	destKey   struct{}
)

// ID is the node's name.
func (n *Node) ID() string { return n.id }

// Handler is the node's HTTP surface: served here while it holds the lease, forwarded to the
// holder otherwise.
func (n *Node) Handler() http.Handler { return n }

// followWait is how long a request waits for a holder to serve it.
func (n *Node) followWait() time.Duration { return 2*n.ttl + 10*time.Second }

// ServeHTTP implements http.Handler.
func (n *Node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(NodeHeader)
	// Only another node's mark makes a request forwarded; one a client set is removed, so that
	// the request is forwarded and served as any other.
	marks := r.Header.Values(forwardedHeader)
	forwarded := len(marks) == 1 && n.fromNode(marks[0])
	r.Header.Del(forwardedHeader)
	part := r.Header.Get(partitionHeader)
	r.Header.Del(partitionHeader)
	if forwarded && r.URL.Path == branchPath && r.Method == http.MethodPost {
		n.serveBranch(w, r)
		return
	}
	if forwarded {
		// The sender routed it; the body is not read before the partition is found held.
		n.serveForwarded(w, r, n.forwardedTo(part))
		return
	}
	dest, buffered := n.destinationOf(r, len(n.parts), n.maxBody())
	// The body is passed on as it arrives (the holder may answer before it, as it would
	// directly); a forward refused before the holder was reached read none of it, so it can be
	// tried again, on the next holder or here once this node leads. A body the route read whole
	// (a creation's) is sent again from its start.
	var body *forwardBody
	if buffered == nil && r.Body != nil && r.Body != http.NoBody {
		body = newForwardBody(r.Body)
		r.Body = body
	}
	target := dest.part
	if dest.anyPart {
		target = n.spread()
	}
	deadline := time.NewTimer(n.followWait())
	defer deadline.Stop()
	for {
		eng, leave, changed, _ := n.serving(dest)
		if eng != nil {
			defer leave()
			w.Header().Set(NodeHeader, n.id)
			eng.Handler().ServeHTTP(w, r)
			return
		}
		if holder := n.holderOf(r.Context(), target); holder.Note != "" {
			if buffered != nil {
				r.Body = io.NopCloser(bytes.NewReader(buffered))
			}
			done, err := n.forward(w, r, holder.Note, dest)
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
			n.logger.Debug("node: the holder did not serve the request; asking again", "holder", holder.Holder, "error", err)
			n.forget(target)
		}
		if !n.await(w, r, changed, deadline.C) {
			return
		}
	}
}

// serveForwarded serves a request another node forwarded here: by the engine of its partition,
// once that engine is open if this node is opening it; a node that does not hold the partition
// (it moved since the sender looked) answers 421 without reading the body, and the sender asks
// the partition's holder again. A forwarded request is never forwarded again.
func (n *Node) serveForwarded(w http.ResponseWriter, r *http.Request, dest destination) {
	deadline := time.NewTimer(n.followWait())
	defer deadline.Stop()
	for {
		eng, leave, changed, opening := n.serving(dest)
		if eng != nil {
			defer leave()
			w.Header().Set(NodeHeader, n.id)
			eng.Handler().ServeHTTP(w, r)
			return
		}
		if !opening {
			w.Header().Set(NodeHeader, n.id)
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusMisdirectedRequest)
			return
		}
		if !n.await(w, r, changed, deadline.C) {
			return
		}
	}
}

// await waits for a change of the node's engines, a moment, the end of the request or the
// deadline, at which it answers 503; false when the request is over.
func (n *Node) await(w http.ResponseWriter, r *http.Request, changed <-chan struct{}, deadline <-chan time.Time) bool {
	select {
	case <-changed:
	case <-time.After(50 * time.Millisecond):
	case <-r.Context().Done():
		return false
	case <-deadline:
		w.Header().Set(NodeHeader, n.id)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(unavailableBody)
		return false
	}
	return true
}

// maxBody is the largest body the gateway reads, which bounds what the router reads of a
// creation's.
func (n *Node) maxBody() int64 {
	if m := n.opt.Gateway.MaxBodyBytes; m > 0 {
		return m
	}
	return gateway.DefaultMaxBodyBytes
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
// returns the engines it ran.
func (n *Node) shut(grace time.Duration) []*Engine {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	engs := n.takeEngines()
	servers := n.servers
	n.servers = nil
	n.mu.Unlock()
	close(n.done)
	n.wg.Wait()
	for _, eng := range engs {
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
	return engs
}

// Close stops serving (requests in flight get a moment), stops the executions this node runs and
// gives its leases up, so that another node takes them over at once; then closes the store.
func (n *Node) Close() error {
	for _, eng := range n.shut(closeGrace) {
		_ = eng.Close()
	}
	n.leaveMembership()
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
	for _, eng := range n.shut(0) {
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
