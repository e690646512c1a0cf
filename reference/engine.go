// Package reference is the Loom reference engine: durable conversations on embedded SQLite,
// served over the HTTP surface of spec/http.md. It is a library first; `loomcheck serve` is a thin
// main over it.
//
//	eng, err := reference.Open(ctx, reference.Options{DataDir: dir, Key: key})
//	if err != nil { return err }
//	defer eng.Close()
//	ln, _ := net.Listen("tcp", "127.0.0.1:8080")
//	eng.Serve(ln) // the HTTP surface with the edge's deadlines and connection cap
package reference

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/gateway"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/spec"
)

// Version of the reference engine.
const Version = "0.1.0"

// Options configure an Engine.
type Options struct {
	// DataDir holds the engine's durable state (created if missing). One engine per directory.
	DataDir string
	// Conversation configures the dialogue (Keys is required).
	Conversation conversation.Config
	// Deps connect conversations to the world (a nil Provider means the built-in model).
	Deps conversation.Deps
	// Gateway configures the HTTP surface (an Authenticator, or Insecure, is required).
	Gateway gateway.Config
	// Edge sets how Serve serves it: the request and header deadlines and the connection cap.
	Edge gateway.Edge
	// Divergence selects what recovery does when a replay does not match the log.
	Divergence kernel.DivergenceMode
	// SyncFull makes every commit wait for the disk (survives power loss, not only SIGKILL).
	SyncFull bool
	Logger   *slog.Logger
}

// Engine is an open reference engine. Its methods are safe for concurrent use.
type Engine struct {
	lock *os.File
	st   *store.SQLite
	k    *kernel.Kernel
	cv   *conversation.Conversations
	gw   *gateway.Gateway
	dir  string
	edge gateway.Edge

	mu      sync.Mutex
	servers []*http.Server
	closed  bool
}

// ErrLocked: another engine has the data directory open.
var ErrLocked = errors.New("reference: data directory is in use by another engine")

// Open opens the engine on opt.DataDir and recovers every open conversation by replay.
//
// Errors: ErrLocked, loomtype.ErrConfig (wrapped) for a bad configuration, store errors.
func Open(ctx context.Context, opt Options) (*Engine, error) {
	if opt.DataDir == "" {
		return nil, fmt.Errorf("%w: a data directory is required", loomtype.ErrConfig)
	}
	if err := os.MkdirAll(opt.DataDir, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(opt.DataDir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, ErrLocked
	}
	fail := func(err error) (*Engine, error) {
		lock.Close()
		return nil, err
	}
	hub := conversation.NewHub(opt.Gateway.MaxSubscribers)
	cv, err := conversation.New(opt.Conversation, opt.Deps, hub)
	if err != nil {
		return fail(err)
	}
	st, err := store.Open(ctx, filepath.Join(opt.DataDir, "loom.db"), store.Options{SyncFull: opt.SyncFull})
	if err != nil {
		return fail(err)
	}
	// Bound before recovery: a recovered flow may need the kernel at its first live step.
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: cv.Flows(), Divergence: opt.Divergence, Logger: opt.Logger,
		BeforeRecovery: cv.Bind})
	if err != nil {
		st.Close()
		return fail(err)
	}
	gw, err := gateway.New(cv, opt.Gateway)
	if err != nil {
		k.Close()
		st.Close()
		return fail(err)
	}
	return &Engine{lock: lock, st: st, k: k, cv: cv, gw: gw, dir: opt.DataDir, edge: opt.Edge}, nil
}

// Handler is the HTTP surface, without the edge's connection handling (Serve adds it).
func (e *Engine) Handler() http.Handler { return e.gw }

// ErrEngineClosed is what Serve returns once the engine is closed or killed.
var ErrEngineClosed = errors.New("reference: engine closed")

// Serve serves the HTTP surface on ln with the edge of Options.Edge (spec/http.md,
// Connections): a request must arrive within its deadlines, and at most MaxConnections
// connections are open at once. It blocks until the engine is closed or killed (ErrEngineClosed)
// or ln fails (that error). Close lets requests in flight finish for a moment (streams get a
// reconnect event); Kill drops every connection at once. Serve may be called for several
// listeners, concurrently; it closes ln.
//
//	ln, err := net.Listen("tcp", "127.0.0.1:8080")
//	go func() { _ = eng.Serve(ln) }()
//	defer eng.Close()
func (e *Engine) Serve(ln net.Listener) error {
	srv := e.edge.Server(e.gw)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		ln.Close()
		return ErrEngineClosed
	}
	e.servers = append(e.servers, srv)
	e.mu.Unlock()
	err := srv.Serve(e.edge.Listener(ln))
	if errors.Is(err, http.ErrServerClosed) {
		return ErrEngineClosed
	}
	return err
}

// stopServing ends every Serve: gracefully for up to grace (0: at once), then by closing every
// connection.
func (e *Engine) stopServing(grace time.Duration) {
	e.mu.Lock()
	e.closed = true
	servers := e.servers
	e.servers = nil
	e.mu.Unlock()
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
}

// Conversations is the conversation client, for programs that embed the engine.
func (e *Engine) Conversations() *conversation.Conversations { return e.cv }

// Kernel is the engine's kernel.
func (e *Engine) Kernel() *kernel.Kernel { return e.k }

// closeGrace is how long Close lets requests in flight finish.
const closeGrace = 2 * time.Second

// Close ends open streams, stops serving (requests in flight get a moment to finish), stops
// every execution (they resume on the next Open) and closes the store.
func (e *Engine) Close() error {
	e.gw.Shutdown()
	e.stopServing(closeGrace)
	e.k.Close()
	err := e.st.Close()
	e.lock.Close()
	return err
}

// Kill stops the engine as a crash would: nothing is written after this instant and nothing is
// shut down cleanly. The data directory can be opened again at once.
func (e *Engine) Kill() {
	e.st.Kill()
	e.stopServing(0)
	e.gw.Shutdown()
	e.k.Close()
	e.lock.Close()
}

// Crash is Kill: it lets an Engine serve as a harness.Instance.
func (e *Engine) Crash() { e.Kill() }

// DurableWrites is the number of durable writes the engine's store committed since Open (see
// store.SQLite.Writes). With CrashAfterWrite it makes the Engine a harness.WriteCrasher.
//
//	n := eng.DurableWrites()
func (e *Engine) DurableWrites() int64 { return e.st.Writes() }

// CrashAfterWrite arms a crash right after the n-th durable write from now: that write commits,
// and nothing after it reaches the store (the writer gets an error, so the engine commits nothing
// more). The returned channel is closed when the crash point is reached; the engine is then to be
// abandoned with Crash, as a killed process would be. Off unless called.
//
//	crashed := eng.CrashAfterWrite(5)
//	<-crashed
//	eng.Crash()
func (e *Engine) CrashAfterWrite(n int64) <-chan struct{} { return e.st.CrashAfterWrite(n) }

// OpenConfig opens an engine from the kit's configuration document; it is the reference's
// harness factory.
//
//	rep, err := harness.Execute(ctx, harness.Options{Factory: func(ctx context.Context, c spec.SUTConfig) (harness.Instance, error) {
//		return reference.OpenConfig(ctx, c)
//	}})
func OpenConfig(ctx context.Context, cfg spec.SUTConfig) (*Engine, error) {
	opt, err := FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return Open(ctx, opt)
}
