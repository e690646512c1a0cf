// Package reference is the Loom reference engine: durable conversations on embedded SQLite,
// served over the HTTP surface of spec/http.md. It is a library first; `loomcheck serve` is a thin
// main over it.
//
// The package's examples are programs that run: Example_embed opens an engine, starts a
// conversation, sends a turn and follows the conversation until the reply is recorded;
// ExampleEngine_Handler serves the HTTP surface with the embedding program's own authentication.
// Engine.Serve serves it on a listener with the edge's deadlines and connection cap.
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

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Version of the reference engine.
const Version = "0.1.0"

// Options configure an Engine.
type Options struct {
	// DataDir holds the engine's durable state (created if missing). One engine per directory.
	// With StoreURL the state is in the database and DataDir keeps only the engine's node id.
	DataDir string
	// StoreURL names a server database to keep the durable state in, in place of the embedded
	// SQLite file in DataDir: a postgres:// or postgresql:// URL (reference/store/postgres; an
	// empty host takes the standard PG* environment variables). Several engines may share one
	// database: one at a time holds its lease and runs the executions (see Node).
	StoreURL string
	// Node makes the engine one node of several on the database of StoreURL (OpenNode).
	Node NodeOptions
	// Conversation configures the dialogue (Keys is required).
	Conversation ConversationConfig
	// Deps connect conversations to the world (a nil Provider means the built-in model).
	Deps ConversationDeps
	// Gateway configures the HTTP surface (an Authenticator, or Insecure, is required).
	Gateway GatewayConfig
	// Edge sets how Serve serves it: the request and header deadlines and the connection cap.
	Edge Edge
	// Divergence selects what recovery does when a replay does not match the log.
	Divergence kernel.DivergenceMode
	// SyncNormal lets commits return before they reach the disk (SQLite synchronous=NORMAL):
	// faster, and still safe through a process crash, but a power loss or an operating-system
	// crash may roll back the newest commits after they were acknowledged (a 202, an SSE id, a
	// turn's ord). The default waits for the disk on every commit, so that nothing acknowledged
	// can roll back.
	SyncNormal bool
	// AllowEmpty starts on a data directory that exists and holds no store, or whose store's
	// database is gone (see ErrDataGone). Without it such a directory is refused: it is what a
	// deleted store or a volume that did not mount looks like. A directory that does not exist is
	// a first start and needs no permission.
	AllowEmpty bool
	// CheckStoreAtOpen checks the whole store (SQLite) before Open returns, whatever its size.
	// By default a store over 1 MiB is checked in the background instead, each conversation's
	// log checked whole before it is first served (sqlite.Options.CheckInBackgroundOver).
	CheckStoreAtOpen bool
	// Logger receives operational messages and every internal error (default: slog.Default()).
	// Each error the engine hides behind an errorId (a failed turn's model or tool error, the
	// cause of a 500, damaged storage) is logged at level ERROR with that errorId, whether or not
	// Deps.OnError or Gateway.OnError is set, so that the id a caller saw always leads somewhere.
	Logger *slog.Logger
	// ResponseCache keeps the model responses of runs in the process, partitioned by each run's
	// owner and cacheScope (reference/internal/run.ResponseCache); every run must then name its cacheScope.
	ResponseCache bool
	// NotIdempotentTools names the tools declared idempotent: false (the configuration's
	// tools.definitions); the deprecated single-frame runner refuses them.
	NotIdempotentTools []string
	// HumanTools name the tools a person answers (kind "human"): a run's call of one waits for
	// the person's answer (reference/internal/run).
	HumanTools []string
	// RunMaxIterations is the most model calls a run may ask for (0: run.DefaultMaxIterationsCeiling).
	RunMaxIterations int
	// Stream configures the session streams (reference/internal/sessions).
	Stream StreamConfig
	// Threads, if set, gives the box its roles and its connections to peer boxes (spec/peer.md,
	// profile threads); its Provider and Model default to the conversations' ones.
	Threads *ThreadsConfig
}

// Engine is an open reference engine. Its methods are safe for concurrent use.
type Engine struct {
	lock *os.File
	// raw is the store as opened; st is what the engine writes through: raw itself, or, on a
	// shared database, the view fenced by the lease hold holds.
	raw  store.Store
	st   store.Store
	hold *leaseHold
	// owns, if set, is the executions the engine runs: those of its partition (kernel.Options.Owns).
	owns func(id string) bool
	k    *kernel.Kernel
	cv   *conversation.Conversations
	runs *run.Runs
	gw   *gateway.Gateway
	ss   *sessions.Service
	th   *threads.Service
	dir  string
	edge gateway.Edge

	// gk is the kernel of the store's global namespace, where the per-principal bounds are kept
	// (openQuotas); root is the store they are kept in (nil: st) and holder the name they are
	// taken as (empty: leaseName). An engine of one partition gets the store's root, fenced by
	// its partition's lease, and that lease's name.
	gk     *kernel.Kernel
	root   store.Store
	holder string

	logger *slog.Logger
	// node: the engine is run by a Node, which owns the store, the data directory's lock and
	// the lease; onLost tells the node the lease was lost.
	node     bool
	onLost   func()
	stopOnce sync.Once

	mu      sync.Mutex
	servers []*http.Server
	closed  bool
	// partsStopped: stopParts ran; an assemble still under way must not install its parts.
	partsStopped bool
}

// ErrLocked: another engine has the data directory open.
var ErrLocked = errors.New("reference: data directory is in use by another engine")

// ErrDataGone: the data directory exists and holds no store, or the identity file of its store is
// there and the database is not (or holds another store or none). The engine refuses to serve
// an empty past in place of the one it had; Options.AllowEmpty accepts it. It is store.ErrMissing.
var ErrDataGone = store.ErrMissing

// ErrCorrupt: the engine found its stored data damaged (store.CorruptError says where). It is
// loomtype.ErrCorrupt.
var ErrCorrupt = loomtype.ErrCorrupt

// dbFile is the store's database in the data directory.
const dbFile = "loom.db"

// Open opens the engine on opt.DataDir and recovers every open conversation by replay, lazily:
// Open returns without waiting for any replay, and a request for one conversation waits for the
// replay of that one only (an open execution is replayed when something first needs it, the
// others in the background, a few at a time: see kernel.Open). A data directory that does not
// exist is created (a first start); one that exists and holds nothing is refused unless
// opt.AllowEmpty. The store checks all it holds before anything is served, and after an unclean
// shutdown its write-ahead log too (sqlite.Open): a small store before Open returns, a large one
// in the background, each conversation's log checked whole before it is first served and the
// store refused as damaged once the check finds damage anywhere.
//
// With opt.StoreURL the state lives in that PostgreSQL database instead, and the engine runs
// only while it holds the database's lease (spec/nodes.md): it takes it at Open (at once when
// it held it before its restart: the holder is the data directory's node id), writes through a
// view that refuses every write once another engine was granted it, renews it, and stops as a
// crash would if it loses it. Open refuses to run beside another engine that holds it
// (ErrLeaseHeld); OpenNode follows that engine instead.
//
// Errors: ErrLocked, loomtype.ErrConfig (wrapped) for a bad configuration, ErrDataGone (wrapped),
// *store.CorruptError (matching ErrCorrupt) for damaged storage, ErrLeaseHeld (*store.HeldError),
// *store.SchemaError for a database written by a newer engine, ErrPartitionsDiffer for a
// database made with another partition count than opt.Node.Partitions, ErrPartitionRouting for
// more than one, other store errors.
func Open(ctx context.Context, opt Options) (*Engine, error) {
	if err := onePartition(opt); err != nil {
		return nil, err
	}
	lock, err := lockDataDir(opt)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Engine, error) {
		lock.Close()
		return nil, err
	}
	logErrors(&opt)
	raw, err := openStore(ctx, opt)
	if err != nil {
		return fail(err)
	}
	if _, err := partitionCount(ctx, raw, opt); err != nil {
		raw.Close()
		return fail(err)
	}
	e := &Engine{lock: lock, raw: raw, st: raw, dir: opt.DataDir, edge: opt.Edge, logger: opt.Logger}
	if opt.StoreURL != "" {
		// A server database others may share: the engine writes only while it holds the lease,
		// and through a view that refuses its writes once someone else was granted it.
		hold, err := holdLease(ctx, raw, opt)
		if err != nil {
			raw.Close()
			return fail(err)
		}
		e.hold, e.st = hold, hold.fenced
	}
	if err := e.assemble(ctx, opt); err != nil {
		if e.hold != nil {
			e.hold.release()
		}
		raw.Close()
		return fail(err)
	}
	if e.hold != nil {
		e.hold.keep(e.lose)
	}
	return e, nil
}

// lockDataDir checks opt.DataDir (required; created if missing; an existing empty one only with
// AllowEmpty) and takes its lock, so that one engine at a time runs on it.
func lockDataDir(opt Options) (*os.File, error) {
	if opt.DataDir == "" {
		return nil, fmt.Errorf("%w: a data directory is required", loomtype.ErrConfig)
	}
	if ents, err := os.ReadDir(opt.DataDir); err == nil && len(ents) == 0 && !opt.AllowEmpty {
		return nil, fmt.Errorf("%w: the data directory %s exists and is empty (start on a directory that does not exist yet, or allow an empty one)", ErrDataGone, opt.DataDir)
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
	return lock, nil
}

// errLostWhileOpening: the engine's lease was superseded before it finished opening.
var errLostWhileOpening = fmt.Errorf("reference: %w before the engine finished opening", store.ErrFenced)

// logErrors makes opt's error hooks log every error they receive, with its errorId, to
// opt.Logger (slog.Default() when nil) before they pass it on to the hook configured, if any.
func logErrors(opt *Options) {
	lg := opt.Logger
	if lg == nil {
		lg = slog.Default()
	}
	opt.Logger = lg
	turnHook := opt.Deps.OnError
	opt.Deps.OnError = func(r hostio.ErrorReport) {
		lg.Error("turn failed", "errorId", r.ErrorID, "conversation", r.ConversationID, "turn", r.Turn, "error", r.Error)
		if turnHook != nil {
			turnHook(r)
		}
	}
	gwHook := opt.Gateway.OnError
	opt.Gateway.OnError = func(id string, err error) {
		lg.Error("internal error", "errorId", id, "error", err)
		if gwHook != nil {
			gwHook(id, err)
		}
	}
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
func (e *Engine) Conversations() *Conversations { return e.cv }

// Runs is the agent run client, for programs that embed the engine.
//
//	v, _, err := eng.Runs().Start(ctx, alice, reference.RunOptions{Prompt: "check pump 3"})
func (e *Engine) Runs() *Runs { return e.runs }

// Sessions is the engine's session stream service (spec/stream.md), for programs that embed the
// engine and log frames of their own in a session, such as a status the engine is told of. It is
// the service the stream routes serve from, so a frame appended here reaches every reader.
//
//	frames, err := eng.Sessions().Append(ctx, who, id, reference.FrameSpec{Kind: "status", Data: map[string]bool{"stopping": true}})
func (e *Engine) Sessions() *Sessions { return e.ss }

// Threads is the engine's agent conversations between boxes (spec/peer.md), nil when the engine
// has no roles.
//
//	v, err := eng.Threads().Get(ctx, dana, id)
func (e *Engine) Threads() *Threads { return e.th }

// Kernel is the engine's kernel.
func (e *Engine) Kernel() *kernel.Kernel { return e.k }

// closeGrace is how long Close lets requests in flight finish.
const closeGrace = 2 * time.Second

// Close ends open streams, stops serving (requests in flight get a moment to finish), stops
// every execution (they resume on the next Open), gives up the lease on a shared database, and
// closes the store.
func (e *Engine) Close() error {
	e.stopParts(closeGrace)
	if e.hold != nil {
		e.hold.release()
	}
	if e.node {
		return nil
	}
	err := e.raw.Close()
	e.lock.Close()
	return err
}

// endStreams ends the engine's open streams, whose clients resume where they reconnect, and
// serves on otherwise.
func (e *Engine) endStreams() {
	e.mu.Lock()
	gw := e.gw
	e.mu.Unlock()
	if gw != nil {
		gw.Shutdown()
	}
}

// liveWork is how many deciders and steps (a model call, a tool call) the engine runs live now,
// and tickets it made that wait: work that stopping it would cut off, for the next engine on the
// store to run again, and tickets the next engine would not know.
func (e *Engine) liveWork() int64 {
	e.mu.Lock()
	k, ss := e.k, e.ss
	e.mu.Unlock()
	var n int64
	if k != nil {
		n += k.LiveWork()
	}
	if ss != nil {
		n += int64(ss.TicketsWaiting())
	}
	return n
}

// liveQuiet returns a channel closed once one kind of the engine's live work (liveWork) is
// over: its kernel's deciders and steps first, then the tickets waiting; nil when none is left.
// Work may begin again meanwhile: the caller asks again after each wake-up.
func (e *Engine) liveQuiet() <-chan struct{} {
	e.mu.Lock()
	k, ss := e.k, e.ss
	e.mu.Unlock()
	if k != nil && k.LiveWork() > 0 {
		return k.LiveIdle()
	}
	if ss != nil && ss.TicketsWaiting() > 0 {
		return ss.TicketsIdle()
	}
	return nil
}

// stopParts stops serving (gracefully for up to grace) and stops every part of the engine, once.
// The parts an engine still opening has not made yet are never made (assemble sees it).
func (e *Engine) stopParts(grace time.Duration) {
	e.stopOnce.Do(func() {
		if e.hold != nil {
			e.hold.stop()
		}
		e.mu.Lock()
		e.partsStopped = true
		gw, ss, th, k, gk := e.gw, e.ss, e.th, e.k, e.gk
		e.mu.Unlock()
		if gw != nil {
			gw.Shutdown()
		}
		e.stopServing(grace)
		if ss != nil {
			ss.Close()
		}
		if th != nil {
			th.Close()
		}
		if k != nil {
			k.Close()
		}
		if gk != nil {
			gk.Close()
		}
	})
}

// lose is what the engine does when it finds that another node was granted its lease: it can
// write nothing more (the store refuses it), so it stops at once, as a crash would. A standalone
// engine's store is killed too, so that Serve returns and every call answers that the store is
// closed; a node's engine leaves the shared store to its node, which serves on as a follower.
func (e *Engine) lose() {
	e.logger.Error("the lease on the shared database was lost: another node runs the executions now; stopping")
	if !e.node {
		if k, ok := e.raw.(store.Killer); ok {
			k.Kill()
		}
	}
	e.stopParts(0)
	if e.onLost != nil {
		e.onLost()
	}
}

// Kill stops the engine as a crash would: nothing is written after this instant and nothing is
// shut down cleanly. The data directory can be opened again at once.
//
// Kill returns once the store has let go of its files, so that what is on disk is at rest, as a
// dead process's files are. The SQLite store keeps one idle connection, which writes nothing,
// until the next Open of the same data directory in this process has its own (see
// sqlite.SQLite.Kill): the write-ahead log is left as a crash leaves it, not folded into the
// database. On a shared database the lease is not given up: another node takes the executions
// over once it lapses, as it would after a crash.
func (e *Engine) Kill() {
	k, killable := e.raw.(store.Killer)
	if killable && !e.node {
		k.Kill()
	}
	e.stopParts(0)
	if e.node {
		return
	}
	if killable {
		<-k.Released()
	} else {
		_ = e.raw.Close()
	}
	e.lock.Close()
}

// Backup writes a consistent copy of everything the engine stores, as of one instant, to the file
// dest (which must not exist), while the engine goes on serving and writing; Restore installs it.
//
// Errors: store.ErrClosed; dest exists; the copy cannot be written.
//
//	if err := eng.Backup(ctx, "/backups/loom.db"); err != nil { return err }
func (e *Engine) Backup(ctx context.Context, dest string) error {
	if sq, ok := e.raw.(*sqlite.SQLite); ok {
		return sq.Backup(ctx, dest)
	}
	return fmt.Errorf("%w: the engine's store is a server database: back it up with the database's own tools (pg_dump)", errors.ErrUnsupported)
}

// BackupDir is Backup of the engine whose data directory is dataDir, from outside its process
// (`loomcheck backup`): the engine may be running, or not; nothing in dataDir is changed.
//
// Errors: no store in dataDir; dest exists; the copy cannot be written.
//
//	err := reference.BackupDir(ctx, "/var/lib/loom", "/backups/loom.db")
func BackupDir(ctx context.Context, dataDir, dest string) error {
	return sqlite.BackupFile(ctx, filepath.Join(dataDir, dbFile), dest)
}

// Restore makes dataDir (which must not exist, or be empty) the data directory of the backup
// file made by Backup, checking every record of it first. An engine opened on dataDir then
// serves exactly the history the backup holds and still refuses the message ids it had
// acknowledged.
//
// Errors: a dataDir that holds anything (os.ErrExist, wrapped); *store.CorruptError for a
// damaged backup; file errors.
//
//	if err := reference.Restore(ctx, "/backups/loom.db", "/var/lib/loom"); err != nil { return err }
func Restore(ctx context.Context, backup, dataDir string) error {
	if ents, err := os.ReadDir(dataDir); err == nil && len(ents) > 0 {
		return fmt.Errorf("reference: restore into %s: %w (it is not empty)", dataDir, os.ErrExist)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	return sqlite.Restore(ctx, backup, filepath.Join(dataDir, dbFile))
}

// Crash is Kill: it lets an Engine serve as a harness.Instance.
func (e *Engine) Crash() { e.Kill() }

// DurableWrites is the number of durable writes the engine's store committed since Open (see
// sqlite.SQLite.Writes). With CrashAfterWrite it makes the Engine a harness.WriteCrasher.
//
//	n := eng.DurableWrites()
func (e *Engine) DurableWrites() int64 {
	if wc, ok := e.raw.(store.WriteCrasher); ok {
		return wc.Writes()
	}
	return 0
}

// CrashAfterWrite arms a crash right after the n-th durable write from now: that write commits,
// and nothing after it reaches the store (the writer gets an error, so the engine commits nothing
// more). The returned channel is closed when the crash point is reached; the engine is then to be
// abandoned with Crash, as a killed process would be. Off unless called.
//
//	crashed := eng.CrashAfterWrite(5)
//	<-crashed
//	eng.Crash()
func (e *Engine) CrashAfterWrite(n int64) <-chan struct{} {
	if wc, ok := e.raw.(store.WriteCrasher); ok {
		return wc.CrashAfterWrite(n)
	}
	return nil // a store without the hook never reaches the point
}

// OpenConfig opens an engine from the kit's configuration document; it is the reference's
// harness factory.
//
//	rep, err := harness.Execute(ctx, harness.Options{Factory: func(ctx context.Context, c sutconfig.SUTConfig) (harness.Instance, error) {
//		return reference.OpenConfig(ctx, c)
//	}})
func OpenConfig(ctx context.Context, cfg sutconfig.SUTConfig) (*Engine, error) {
	opt, err := FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return Open(ctx, opt)
}

// OpenNodeConfig opens an engine node (OpenNode) from the kit's configuration document, whose
// node and storage.url name the node and the database the nodes share.
//
//	n, err := reference.OpenNodeConfig(ctx, cfg)
func OpenNodeConfig(ctx context.Context, cfg sutconfig.SUTConfig) (*Node, error) {
	opt, err := FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	return OpenNode(ctx, opt)
}
