// Package world is the world around a system under test: the model server, tools, summarizer,
// identity and clearance services, the error hook and the peer box (profile threads) that the
// system calls, all served by one http.Handler, plus the Go API the conformance scenarios use to
// script those services and to inspect what they saw. spec/world.md is the contract a system must
// keep with each endpoint; spec/peer.md the one with the peer box.
//
// One World serves one scenario at a time; Reset clears it for the next. Every recording is
// bounded (Options), every wait takes a context, and everything is safe for concurrent use. A
// request to the world never panics it: a malformed one is answered 400 and noted in Rejections.
//
//	w := world.New(world.Options{})
//	url, err := w.Start("127.0.0.1:0")
//	if err != nil { return err }
//	defer w.Close()
//	cfg := w.Config(sutconfig.SUTConfig{Listen: "127.0.0.1:8080"})
//	w.Model().Enqueue(world.Reply{Text: "Hello!"})
//	_ = url
package world

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Paths the World serves.
const (
	PathModel      = "/v1/chat/completions"
	PathTools      = "/tools/"
	PathSummarize  = "/summarize"
	PathIdentity   = "/identity"
	PathClearance  = "/clearance"
	PathErrorHook  = "/errors"
	modelBasePath  = "/v1"
	toolsBasePath  = "/tools"
	defaultAddress = "127.0.0.1:0"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxRecords     = 10000
	DefaultMaxRecordBytes = 64 << 20
	DefaultMaxBodyBytes   = 4 << 20
	DefaultMaxScript      = 10000
)

// Options bound and place a World. Zero fields take the defaults above.
//
// MaxRecords bounds each recording (model requests, tool calls, ...) by entries and
// MaxRecordBytes by the size of the request bodies kept; arrivals past either bound are still
// counted (and awaited) but no longer kept. MaxBodyBytes bounds one request body (a larger one is
// answered 413). MaxScript bounds each scripted queue. URL is the base URL the World is reached at
// when it is served by someone else's server through Handler (Start sets it otherwise).
//
//	w := world.New(world.Options{MaxRecords: 1000})
type Options struct {
	MaxRecords     int
	MaxRecordBytes int64
	MaxBodyBytes   int64
	MaxScript      int
	URL            string
}

// Rejection is a request the World refused as malformed (or after Close): what a system sent that
// breaks spec/world.md.
//
//	assert.Empty(t, w.Rejections())
type Rejection struct {
	Arrived time.Time
	Method  string
	Path    string
	Status  int
	Reason  string
}

// World is the scripted environment of one scenario; see the package documentation. All its
// methods are safe for concurrent use.
//
//	w := world.New(world.Options{})
//	defer w.Close()
type World struct {
	opts    Options
	handler http.Handler

	mu       sync.Mutex
	closed   bool
	closing  chan struct{}
	gen      chan struct{} // closed and replaced by Reset; releases holds
	url      string
	srv      *http.Server
	served   chan struct{}
	handlers sync.WaitGroup

	rejMu      sync.Mutex
	rejections *journal[Rejection]

	model      *Model
	tools      *Tools
	summarizer *Summarizer
	identity   *Identity
	clearance  *Clearance
	errorHook  *ErrorHook
	memory     *Memory
	peer       *Peer
}

// New returns a World that is not yet listening; serve it with Start or through Handler.
//
//	w := world.New(world.Options{})
func New(opts Options) *World {
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = DefaultMaxRecords
	}
	if opts.MaxRecordBytes <= 0 {
		opts.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxScript <= 0 {
		opts.MaxScript = DefaultMaxScript
	}
	w := &World{
		opts:       opts,
		closing:    make(chan struct{}),
		gen:        make(chan struct{}),
		url:        strings.TrimRight(opts.URL, "/"),
		rejections: newJournal[Rejection](opts),
	}
	w.model = newModel(w)
	w.tools = newTools(w)
	w.summarizer = newSummarizer(w)
	w.identity = newIdentity(w)
	w.clearance = newClearance(w)
	w.errorHook = newErrorHook(w)
	w.memory = newMemory(w)
	w.peer = newPeer(w)

	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathModel, w.model.serve)
	mux.HandleFunc("POST "+PathTools+"{name}", w.tools.serve)
	mux.HandleFunc("POST "+PathSummarize, w.summarizer.serve)
	mux.HandleFunc("POST "+PathIdentity, w.identity.serve)
	mux.HandleFunc("POST "+PathClearance, w.clearance.serve)
	mux.HandleFunc("POST "+PathErrorHook, w.errorHook.serve)
	mux.HandleFunc("POST "+PathMemoryRecall, w.memory.serveRecall)
	mux.HandleFunc("POST "+PathMemoryWrite, w.memory.serveWrite)
	mux.HandleFunc("POST "+PathPeerBase+PathPeerTexts, w.peer.serve)
	w.handler = w.guard(mux)
	return w
}

// Model returns the scripted model server.
//
//	_ = w.Model().Enqueue(world.Reply{Text: "hi"})
func (w *World) Model() *Model { return w.model }

// Tools returns the tool server.
//
//	calls := w.Tools().Calls()
func (w *World) Tools() *Tools { return w.tools }

// Summarizer returns the summarizer.
//
//	reqs := w.Summarizer().Requests()
func (w *World) Summarizer() *Summarizer { return w.summarizer }

// Identity returns the identity introspection service.
//
//	_ = w.Identity().Add("tok", sutconfig.Principal{Actor: "alice"})
func (w *World) Identity() *Identity { return w.identity }

// Clearance returns the clearance service.
//
//	_ = w.Clearance().Allow("alice", "finance")
func (w *World) Clearance() *Clearance { return w.clearance }

// ErrorHook returns the error hook.
//
//	err := w.ErrorHook().WaitErrors(ctx, 1)
func (w *World) ErrorHook() *ErrorHook { return w.errorHook }

// Memory returns the agent memory service.
func (w *World) Memory() *Memory { return w.memory }

// Peer returns the peer box of profile threads.
//
//	n := w.Peer().Count()
func (w *World) Peer() *Peer { return w.peer }

// Handler returns the http.Handler serving every endpoint of the World.
//
//	srv := httptest.NewServer(w.Handler())
func (w *World) Handler() http.Handler { return w.handler }

// Start listens on addr (a loopback port chosen by the system when addr is empty) and serves the
// World until Close. It returns the base URL ("http://host:port"). It fails with ErrStarted when
// the World already listens, ErrClosed after Close, or the listener's error.
//
//	url, err := w.Start("127.0.0.1:0")
func (w *World) Start(addr string) (string, error) {
	if addr == "" {
		addr = defaultAddress
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return "", ErrClosed
	}
	if w.srv != nil {
		return "", ErrStarted
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	w.srv = &http.Server{Handler: w.handler, ReadHeaderTimeout: 10 * time.Second}
	w.served = make(chan struct{})
	w.url = "http://" + ln.Addr().String()
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(w.srv, w.served)
	return w.url, nil
}

// URL returns the base URL of the World: the one Start chose, else Options.URL, else "".
//
//	resp, err := http.Post(w.URL()+"/identity", "application/json", body)
func (w *World) URL() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.url
}

// Close stops the World: it ends every wait at a hold (the held requests end without an answer),
// stops the listener of Start, closes its connections and waits for every request being handled
// to return. Later requests are answered 503. Close is idempotent and always returns nil.
//
//	defer w.Close()
func (w *World) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.handlers.Wait()
		return nil
	}
	w.closed = true
	close(w.closing)
	srv, served := w.srv, w.served
	w.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		<-served
	}
	w.handlers.Wait()
	return nil
}

// Reset prepares the World for the next scenario: it releases every hold created so far (answers
// waiting at one continue as if released), and clears every script, recording, identity,
// clearance rule and rejection. Requests still in flight finish against the cleared state and are
// not recorded again. The listener and URL stay. The peer remembers the threads it received texts
// on: a text on one of them after the reset is a leftover of an earlier scenario, acknowledged
// and not recorded.
//
//	w.Reset()
func (w *World) Reset() {
	w.mu.Lock()
	close(w.gen)
	w.gen = make(chan struct{})
	w.mu.Unlock()

	w.rejMu.Lock()
	w.rejections = newJournal[Rejection](w.opts)
	w.rejMu.Unlock()

	w.model.reset()
	w.tools.reset()
	w.summarizer.reset()
	w.identity.reset()
	w.clearance.reset()
	w.errorHook.reset()
	w.memory.reset()
	w.peer.reset()
}

// NewHold returns a Hold that is not yet released. Reset releases it; Close ends waits at it.
//
//	h := w.NewHold()
func (w *World) NewHold() *Hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	return &Hold{released: make(chan struct{}), reached: make(chan struct{}), gen: w.gen, closing: w.closing}
}

// Config returns base with every world endpoint filled in from URL(): Model.BaseURL (URL+"/v1"),
// Tools.BaseURL (URL+"/tools"), Summarizer.URL, Identity.URL, Clearance.URL and ErrorHook.URL.
// Everything else, including static principals and tool definitions, is kept from base.
//
//	cfg := w.Config(sutconfig.SUTConfig{Listen: addr, DataDir: dir})
func (w *World) Config(base sutconfig.SUTConfig) sutconfig.SUTConfig {
	u := w.URL()
	base.Model.BaseURL = u + modelBasePath
	base.Tools.BaseURL = u + toolsBasePath
	base.Summarizer.URL = u + PathSummarize
	base.Identity.URL = u + PathIdentity
	base.Clearance.URL = u + PathClearance
	base.ErrorHook.URL = u + PathErrorHook
	base.Memory.URL = u
	if len(base.Threads.Roles) == 0 && len(base.Threads.Connections) == 0 && len(base.Threads.Members) == 0 {
		base.Threads = w.peer.ThreadsConfig()
	}
	return base
}

// Rejections returns a copy of the requests the World refused since the last Reset, oldest first.
//
//	for _, r := range w.Rejections() { t.Logf("%s %s: %s", r.Method, r.Path, r.Reason) }
func (w *World) Rejections() []Rejection {
	w.rejMu.Lock()
	defer w.rejMu.Unlock()
	return w.rejections.snapshot()
}

// guard counts the requests in flight (so Close can wait for them), refuses requests after Close
// and turns an unexpected panic into a 500.
func (w *World) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("X-Content-Type-Options", "nosniff")
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			w.reject(rw, r, http.StatusServiceUnavailable, "world closed")
			return
		}
		w.handlers.Add(1)
		w.mu.Unlock()
		defer w.handlers.Done()
		defer func() {
			if v := recover(); v != nil {
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v) // a deliberate cut of the connection
				}
				w.reject(rw, r, http.StatusInternalServerError, "internal")
			}
		}()
		next.ServeHTTP(rw, r)
	})
}
