// Package postgres is the store on a PostgreSQL server (15 or later), through pgx: the backend
// several engine nodes share. It implements store.Store and the optional store.Killer,
// store.WriteCrasher and store.Leases, with the semantics of the SQLite backend wherever the two
// overlap.
//
// # Where a store lives
//
// A store is a set of tables in one schema of one database. Which to use:
//
//   - A database of its own (the usual production shape, and what every conformance scenario gets
//     through CreateDatabase or pgtest.TempDatabase): nothing else shares its tables, advisory
//     locks or notification channels, and dropping it removes the store whole. The default
//     Schema, "public", is then right.
//   - A schema of a shared database (Options.Schema): when creating databases is not allowed, or
//     to keep several small stores on one database (tests that want a fresh store cheaply). Stores
//     in different schemas share nothing: their tables, their locks and their notification
//     channel are the schema's own.
//
// # What the database enforces
//
// The schema is the store's own: Open applies a versioned list of migrations, once, in one
// transaction, under an advisory lock (two nodes opening at once do not race), and refuses a
// database whose schema is newer than this binary knows with a *store.SchemaError. Events are
// append-only in the database itself: triggers refuse UPDATE, DELETE and TRUNCATE of the events
// table whoever connects (short of dropping the triggers), and lease tokens can only grow.
//
// Writes (Update) of every handle and node run at once and commit together (the server's WAL
// flush takes the commits that are ready in one write). The database keeps them apart: each
// write transaction locks what it touches, until its commit (a transaction-scoped advisory lock
// per stream and generation, per metadata key, per remembered-key scope), so a stream's sequence
// stays gapless whoever appends, and a value read inside a transaction is still the value when it
// commits; writes that touch nothing in common never wait for each other. A deadlock between two
// writes is broken by the server and the aborted write runs again (see Update). Each commit that
// appended wakes the
// subscribers of its streams: the handle's own at once, other handles and nodes through
// LISTEN/NOTIFY. A notification is only a wake-up; events are always read from the tables, and a
// lost listening connection is reconnected and wakes every subscriber once, so a missed
// notification costs one read, never an event.
//
// A caller's context governs an Update until its transaction has begun (the wait for a write slot
// and a connection); from then on the transaction is bounded by
// Options.WriteTimeout instead, on the client (every statement, lock waits included) and on the
// server (a transaction left idle is ended, releasing its locks), so a node that stalls cannot
// hold other nodes' writes.
//
// # Crashes, nodes and tests
//
// Kill is a crash of one node: it waits for the handle's writes in progress (which have then
// committed, or not), the handle refuses everything from then on, and its connections close in
// the background (Released says when). The
// database, and every other handle on it, go on; the dead node's leases lapse. Tests and the
// conformance kit give each scenario a database of its own: CreateDatabase and DropDatabase, or
// pgtest.TempDatabase in a test.
//
//	st, err := postgres.Open(ctx, "postgres://loom:secret@db.internal/loom", postgres.Options{})
//	if err != nil { return err }
//	defer st.Close()
package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Options tune the PostgreSQL store. The zero value is ready to use.
type Options struct {
	// Conns is how many connections the store's reads and writes use at once (default 16), each
	// on a connection of its own (connections are opened as they are needed and kept): at most
	// half of them (at least one) run writes at once, so that reads always find one soon. Lease
	// changes share the same pool, which holds two connections more than Conns, so that a
	// renewal never waits behind the reads and writes (they never hold more than Conns). The
	// store opens one more connection, outside the pool, to listen for other nodes' commits, at
	// the first Subscribe.
	Conns int
	// Schema is the PostgreSQL schema the store's tables live in (default "public"); Open
	// creates it if it is missing. Names of lowercase letters, digits and underscores only, at
	// most 63 bytes.
	Schema string
	// WriteTimeout bounds a write transaction once it has begun (default 10s): every statement
	// inside it, the commit and the waits for the locks of the streams and keys it touches
	// included, must answer within it, and the server ends a session that sits idle inside a
	// transaction for longer (idle_in_transaction_session_timeout), releasing its locks. A
	// database that stops answering therefore cannot hold a writer, nor the locks it took,
	// forever; the write fails and nothing of it is kept.
	WriteTimeout time.Duration
}

const (
	defaultConns        = 16
	defaultSchema       = "public"
	defaultWriteTimeout = 10 * time.Second
)

// Postgres is a store on a PostgreSQL server. Several handles, in one process or many, may be
// open on the same database and schema at once; that is what it is for.
type Postgres struct {
	// pool serves reads, writes and lease changes: it holds up to Conns+leaseConns connections,
	// of which reads and writes take at most Conns at once (a token of usem each), so that a
	// lease change always finds one (an idle connection, or room for a new one) at once. Lease
	// changes thus never wait behind the handle's reads and writes, and need no connection of
	// their own while the pool has an idle one (a follower node's only connection, say).
	pool    *pgxpool.Pool
	usem    chan struct{}   // a token per read or write holding a connection: at most Conns
	listenC *pgx.ConnConfig // the listening connection's configuration
	opt     Options
	where   string // names the store in errors
	q       queries
	channel string // the notification channel of the store's schema
	// migrateKey is the advisory lock key of the store's schema that migrations take.
	migrateKey int64

	// upd is held shared by each Update in progress; Close and Kill take it to wait for them.
	// closed is set (by Close, Kill or the crash hook) before anything else of the shutdown.
	upd  sync.RWMutex
	wsem chan struct{} // a token per write in progress: at most half the pool's connections
	// slotWaits counts the writes waiting for a token of wsem (holding no connection meanwhile).
	slotWaits atomic.Int32
	closed    atomic.Bool
	// leaseOps is held shared by each lease change in flight; Close and Kill take it to wait for
	// them (after setting shut, which refuses new ones).
	leaseOps sync.RWMutex
	dead     atomic.Bool
	shut     atomic.Bool // closed or killed: reads refuse too
	writes   atomic.Int64
	// cmu is held shared by each commit in progress, and alone by each commit while a crash is
	// armed (armed), so that the armed write is the last to commit. crashAt and crashed are
	// read and written under it alone.
	cmu     sync.RWMutex
	armed   atomic.Bool
	crashAt int64
	crashed chan struct{}

	// released is closed once the pool and the listening connection are closed.
	released chan struct{}
	stopOnce sync.Once

	// The listener, started at the first Subscribe (listening, under listenMu, also set once the
	// store let go of its connections): stopListen ends it, listenDone is closed when it has,
	// listenPID is the backend process id of its connection (0 while it connects).
	listenMu   sync.Mutex
	listening  bool
	stopListen context.CancelFunc
	listenDone chan struct{}
	listenPID  atomic.Uint32

	// pids are the backend process ids of the pool's connections: a notification one of them
	// sent was a commit of this handle, whose subscribers were woken already.
	pidMu sync.Mutex
	pids  map[uint32]struct{}

	subMu sync.Mutex
	subs  map[string]map[*sub]struct{} // by notification payload (see payloadOf)

	// epoch is the loss epoch of relaxed commits (relaxed.go); migrated says the loss table is
	// there, so that each new connection checks the server's start against it.
	epoch    atomic.Int64
	migrated atomic.Bool
}

type sub struct{ ch chan struct{} }

var (
	_ store.Store        = (*Postgres)(nil)
	_ store.Killer       = (*Postgres)(nil)
	_ store.WriteCrasher = (*Postgres)(nil)
	_ store.Leases       = (*Postgres)(nil)
)

// Open connects to the database at url (a postgres:// URL or a keyword/value connection string;
// the empty string means the standard PostgreSQL environment variables PGHOST, PGPORT, PGUSER,
// PGPASSWORD, PGDATABASE and the rest, which fill in whatever url leaves out in any case), brings
// the store's schema up to date and starts listening for other nodes' commits. ctx bounds the
// connecting and the migration.
//
// Errors: *store.SchemaError (matching store.ErrSchemaNewer) when the database was migrated by a
// newer engine; an error naming the cause when the schema name is not valid, url does not parse,
// the server cannot be reached, or the role may not create the schema or its tables.
//
// Open may run on several nodes at once against one database: the migrations run once.
//
//	st, err := postgres.Open(ctx, "", postgres.Options{Schema: "engine_a"}) // PG* environment
//	if err != nil { return err }
//	defer st.Close()
func Open(ctx context.Context, url string, opt Options) (*Postgres, error) {
	if opt.Conns <= 0 {
		opt.Conns = defaultConns
	}
	if opt.Schema == "" {
		opt.Schema = defaultSchema
	}
	if opt.WriteTimeout <= 0 {
		opt.WriteTimeout = defaultWriteTimeout
	}
	if err := validName("schema", opt.Schema); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: postgres connection string: %w", err)
	}
	cfg.MaxConns = int32(opt.Conns + leaseConns)
	cc := cfg.ConnConfig
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "loom store " + opt.Schema
	}
	cc.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(opt.WriteTimeout.Milliseconds(), 10)
	if cc.ConnectTimeout <= 0 {
		cc.ConnectTimeout = 30 * time.Second
	}
	s := &Postgres{
		opt:        opt,
		where:      fmt.Sprintf("postgres %s:%d/%s schema %s", cc.Host, cc.Port, cc.Database, opt.Schema),
		q:          newQueries(opt.Schema),
		channel:    channelOf(opt.Schema),
		migrateKey: lockKey("migrate", opt.Schema),
		wsem:       make(chan struct{}, max(1, opt.Conns/2)),
		usem:       make(chan struct{}, opt.Conns),
		released:   make(chan struct{}),
		listenDone: make(chan struct{}),
		pids:       map[uint32]struct{}{},
		subs:       map[string]map[*sub]struct{}{},
	}
	s.listenC = cc.Copy()
	s.listenC.RuntimeParams["application_name"] = "loom store listener " + opt.Schema
	delete(s.listenC.RuntimeParams, "idle_in_transaction_session_timeout")
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if s.migrated.Load() {
			// A connection after the server started again sees the loss epoch raised before it
			// serves anything.
			if err := s.checkEpoch(ctx, c); err != nil {
				return err
			}
		}
		s.pidMu.Lock()
		s.pids[c.PgConn().PID()] = struct{}{}
		s.pidMu.Unlock()
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) {
		s.pidMu.Lock()
		delete(s.pids, c.PgConn().PID())
		s.pidMu.Unlock()
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", s.where, err)
	}
	if err := s.migrate(ctx, migrations); err != nil {
		s.pool.Close()
		return nil, err
	}
	s.migrated.Store(true)
	if err := s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return s.checkEpoch(ctx, c.Conn()) }); err != nil {
		s.pool.Close()
		return nil, err
	}
	return s, nil
}

// validName accepts the names the store puts in SQL as identifiers: [a-z0-9_], 1 to 63 bytes.
func validName(what, name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("store: postgres %s name %q: 1 to 63 bytes", what, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("store: postgres %s name %q: lowercase letters, digits and underscores only", what, name)
		}
	}
	return nil
}

// lockKey is the advisory lock key of a purpose in a schema: advisory locks are per database, so
// stores in two schemas of one database do not share them.
func lockKey(purpose, schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("loomcheck store " + purpose + "\x00" + schema))
	return int64(h.Sum64())
}

// channelOf is the notification channel of a schema (an identifier: at most 63 bytes).
func channelOf(schema string) string {
	if c := "loom_store_" + schema; len(c) <= 63 {
		return c
	}
	sum := sha256.Sum256([]byte(schema))
	return "loom_store_" + hex.EncodeToString(sum[:16])
}

// maxPlainPayload is the longest stream name sent as it is in a notification: PostgreSQL takes
// payloads shorter than 8000 bytes.
const maxPlainPayload = 1024

// payloadOf is the notification payload that names stream: the name itself when it is plain
// ASCII without NUL and not too long (every server encoding holds it unchanged), otherwise
// "#sha256:" and the hex digest of the name. Subscribers are kept under the same key, so a
// hashed payload wakes exactly the subscribers of the streams with that digest.
func payloadOf(stream string) string {
	plain := len(stream) <= maxPlainPayload
	for i := 0; plain && i < len(stream); i++ {
		plain = stream[i] != 0 && stream[i] < 0x80
	}
	if plain {
		return stream
	}
	sum := sha256.Sum256(bs(stream))
	return "#sha256:" + hex.EncodeToString(sum[:])
}

// Released is closed once the store has let go of its connections: after Close, or after Kill
// once the connections it closes in the background are closed.
//
//	st.Kill()
//	<-st.Released()
func (s *Postgres) Released() <-chan struct{} { return s.released }

// release stops the listener and closes the pool (waiting for connections in use), then closes
// released.
func (s *Postgres) release() {
	s.stopOnce.Do(func() {
		s.listenMu.Lock()
		started := s.listening
		s.listening = true // no listener starts from now on
		s.listenMu.Unlock()
		if started {
			s.stopListen()
			<-s.listenDone
		}
		s.pool.Close()
		close(s.released)
	})
}

// Close waits for the writes and the lease changes in progress, then closes the store's
// connections. Every call after it answers store.ErrClosed (Subscribe excepted: its channel then
// never fires). Closing twice, or closing a killed store, is harmless.
//
//	defer st.Close()
func (s *Postgres) Close() error {
	s.upd.Lock()
	defer s.upd.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	s.shut.Store(true)
	s.waitLeaseChanges()
	s.release()
	return nil
}

// waitLeaseChanges waits for the lease changes in flight; shut refuses new ones.
func (s *Postgres) waitLeaseChanges() {
	s.leaseOps.Lock()
	//lint:ignore SA2001 taking the lock once every change in flight released it is the wait
	s.leaseOps.Unlock()
}

// Kill stops the store as a crash of this node would: it waits for the writes and the lease
// changes in progress (which then have committed, or not), and from then on every read and write
// of this handle answers store.ErrClosed. The connections are closed in the background (reads
// already running finish first); Released is closed once they are. Their server sessions end with
// them, and with the sessions any lock still held. Leases held are not
// released: they lapse, as a dead node's would. Other handles on the database are unaffected.
//
//	st.Kill()
//	<-st.Released()
func (s *Postgres) Kill() {
	s.upd.Lock()
	defer s.upd.Unlock()
	if s.closed.Swap(true) {
		return
	}
	s.dead.Store(true)
	s.shut.Store(true)
	s.waitLeaseChanges()
	go s.release()
}

// die is Kill from inside an Update (the armed write's, holding cmu alone): every Update not yet
// committed answers store.ErrClosed from then on, and the connections are closed once the
// Updates in progress have ended.
func (s *Postgres) die() {
	if s.closed.Swap(true) {
		return
	}
	s.dead.Store(true)
	s.shut.Store(true)
	s.waitLeaseChanges()
	go func() {
		s.upd.Lock()
		defer s.upd.Unlock()
		s.release()
	}()
}

// Writes returns the number of durable writes (committed transactions that appended an event,
// stored metadata or remembered a new key) since Open. Transactions that changed nothing, and
// lease changes, are not counted.
//
//	before := st.Writes()
func (s *Postgres) Writes() int64 { return s.writes.Load() }

// CrashAfterWrite arms the crash hook: right after the n-th durable write from now commits
// (n >= 1), the store dies as Kill leaves it: that write returns store.ErrCrashed to its caller,
// every later read and write store.ErrClosed, and the returned channel is closed. Arming again
// replaces the previous point. The channel of a store that is closed or killed first never
// closes.
//
//	crashed := st.CrashAfterWrite(3)
//	<-crashed // the third write committed; nothing after it did
func (s *Postgres) CrashAfterWrite(n int64) <-chan struct{} {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if n < 1 {
		n = 1
	}
	s.crashAt = s.writes.Load() + n
	s.crashed = make(chan struct{})
	s.armed.Store(true)
	return s.crashed
}

func clampLimit(limit int) int {
	if limit <= 0 || limit > store.MaxRead {
		return store.MaxRead
	}
	return limit
}

func (s *Postgres) alive() error {
	if s.shut.Load() {
		return store.ErrClosed
	}
	return nil
}

// readErr maps an error of a read: store.ErrClosed once the store is closed or killed, the
// caller's context errors as they are (wrapped), anything else wrapped with what failed.
func (s *Postgres) readErr(what string, err error) error {
	if s.shut.Load() {
		return store.ErrClosed
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

// bs is s as bytes, never nil (a nil []byte is SQL NULL).
func bs(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// quoteIdent quotes a validated name for SQL.
func quoteIdent(name string) string { return pgx.Identifier{name}.Sanitize() }

// sqlFor substitutes the quoted schema for {s} in q.
func sqlFor(schema, q string) string { return strings.ReplaceAll(q, "{s}", quoteIdent(schema)) }
