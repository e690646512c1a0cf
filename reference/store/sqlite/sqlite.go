package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"

	"github.com/loomcheck/loomcheck/reference/store"

	sqlitedriver "modernc.org/sqlite" // the one place the SQLite driver is imported
)

const schema = `
CREATE TABLE IF NOT EXISTS events (
	stream TEXT NOT NULL,
	gen    INTEGER NOT NULL,
	seq    INTEGER NOT NULL,
	kind   TEXT NOT NULL,
	data   BLOB,
	time   INTEGER NOT NULL,
	sum    INTEGER,
	PRIMARY KEY (stream, gen, seq)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS events_append_only_u BEFORE UPDATE ON events
	BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_append_only_d BEFORE DELETE ON events
	BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TABLE IF NOT EXISTS meta (
	key TEXT PRIMARY KEY,
	val BLOB NOT NULL,
	sum INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remembered (
	scope TEXT NOT NULL,
	key   TEXT NOT NULL,
	n     INTEGER NOT NULL,
	sum   INTEGER,
	PRIMARY KEY (scope, key)
) WITHOUT ROWID;
-- Stores written by earlier versions also indexed remembered by (scope, n). The sweep reads a
-- scope's rows through the primary key instead, so a key added writes one B-tree, not two.
DROP INDEX IF EXISTS remembered_n;
CREATE TABLE IF NOT EXISTS leases (
	name    TEXT PRIMARY KEY,
	holder  TEXT NOT NULL,
	note    TEXT NOT NULL,
	token   INTEGER NOT NULL,
	expires INTEGER NOT NULL,
	sum     INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS identity (
	one INTEGER PRIMARY KEY CHECK (one = 1),
	id  TEXT NOT NULL,
	sum INTEGER NOT NULL
);
`

// schemaVersion is PRAGMA user_version of a store of this schema: 2 has a checksum on every row,
// 3 the leases table. A store of an older version (0, written before checksums; 2, before leases)
// is migrated at Open: see migrate.
const schemaVersion = 3

// appendOnlyUpdate is the trigger the migration lifts for the one update it makes.
const appendOnlyUpdate = `CREATE TRIGGER IF NOT EXISTS events_append_only_u BEFORE UPDATE ON events
	BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;`

// Options tune the SQLite store.
type Options struct {
	// Readers is the size of the reader pool (default 4).
	Readers int
	// SyncNormal trades durability on power loss for commit speed (synchronous=NORMAL in WAL
	// mode): every commit still survives a process crash (SIGKILL), but a power loss or an
	// operating-system crash may roll back the newest commits, which the engine has already
	// acknowledged. The default (synchronous=FULL) makes every commit wait for the disk, so that
	// nothing acknowledged is lost to a power loss.
	SyncNormal bool
	// AllowEmpty accepts a store whose identity file is there while its database is missing or
	// holds no store (the data was deleted, or a volume did not mount): Open then starts a new,
	// empty store in its place. Without it Open refuses with store.ErrMissing.
	AllowEmpty bool
	// Cached names the streams and metadata keys whose newest committed state the store keeps in
	// memory and answers reads from (view.go): a read of a cached stream's last few events, or of
	// a cached key, then touches no SQL. The store's handle is the only writer of its file, so
	// what it committed is what the file holds, unless the file is changed behind its back: a
	// read answered from memory does not notice that, as a read of the database does, so cache
	// only what no caller reads to check the stored past. nil caches nothing. Heads (a stream's
	// newest sequence) are always answered from memory when the writer knows them.
	Cached func(name string) bool
	// CheckInBackgroundOver moves the full check of a database larger than this many bytes (its
	// file and its write-ahead log) off Open: Open then checks only what is cheap and returns,
	// and the rest is checked in the background, every stream and remembered scope checked
	// whole before it is first served (check.go). 0 checks every database whole at Open.
	CheckInBackgroundOver int64
	// BootID names the machine's current boot, for the loss epoch of relaxed commits (relaxed.go):
	// one word, compared with the one recorded at the last open. Empty reads Linux's boot id; where
	// there is none, every open after an unclean close counts as a possible loss. Tests set it to
	// play a machine that started again.
	BootID string

	// restoring is set by Restore alone: the database was copied here without its head file,
	// which Open then writes from what the copy holds.
	restoring bool
}

// SQLite is the reference Store: one SQLite file in WAL mode, one writer connection taking
// immediate transactions, and a pool of readers. Besides store.Store it offers store.Killer,
// store.WriteCrasher and store.Leases (ownership with fencing among the users of one open store;
// one process opens a file at a time). It passes the suite of reference/store/storetest.
//
// Every statement of the reads and writes is prepared once per connection. Concurrent Updates
// share a commit (see Update); the writer knows the heads of the streams it has written or read
// (a bounded number of them), so that an Append with an expected head reads no head. Reads of
// those heads, and of the streams and keys Options.Cached names, are answered from a bounded view
// of what the writer committed (view.go).
//
// All methods are safe for concurrent use.
//
//	st, err := sqlite.Open(ctx, path, sqlite.Options{})
//	if err != nil { return err }
//	defer st.Close()
//	var _ store.Leases = st
type SQLite struct {
	w, r *sql.DB
	// wc is the writer's one connection, held from Open to Close; ws its prepared statements,
	// rs the readers'.
	wc   *sql.Conn
	ws   writeStmts
	rs   readStmts
	path string
	// released is closed once the connections are closed (by Close, or in the background after
	// Kill): the files are then at rest.
	released chan struct{}

	// The queue of Updates (batch.go), under qmu: queue[qhead:] wait, the first of them leads
	// the next batch; leading is true while a batch runs or the lead is being handed on.
	qmu     sync.Mutex
	queue   []*request
	qhead   int
	leading bool

	wmu sync.Mutex // held by the batch in progress; orders Close, Kill and the crash hook against it
	// b is the transaction in progress and heads the committed heads the writer knows, under
	// wmu. lost is set by the writer connection's rollback hook: the transaction in progress
	// was rolled back (by the store, or by SQLite on its own).
	b     batch
	heads headCache
	// view is what the readers are answered from without SQL when it knows the answer (view.go).
	view   *view
	lost   atomic.Bool
	dead   atomic.Bool
	closed bool
	shut   atomic.Bool // closed or killed: reads refuse too

	subMu sync.Mutex
	subs  map[string]map[*sub]struct{}

	// The crash hook (CrashAfterWrite): writes counts the durable writes, crashAt (under wmu) is
	// the count after which the store dies, 0 when unarmed; crashed is closed when it fires.
	writes atomic.Int64
	// commits counts the transactions committed since Open (a batch is one).
	commits atomic.Int64

	// events is how many events the store holds; head is the file that records it after every
	// commit (see openHead), under wmu.
	events  int64
	newest  newestEvent
	head    *os.File
	newestF *os.File
	headBuf []byte // the records writeHead writes, formatted in place
	// newestDisk is what the newest file holds, when known (headfile.go).
	newestDisk newestOnDisk
	crashAt    int64
	crashed    chan struct{}

	// chk is the check in the background (check.go).
	chk checks

	// Relaxed commits (relaxed.go), under wmu: normal is Options.SyncNormal, relaxedConn that the
	// writer's connection is set to commit without a sync, unsynced that a relaxed commit awaits
	// one, headBehind that the head file leaves out events of relaxed commits. epoch is the loss
	// epoch, fixed at Open.
	normal, relaxedConn, unsynced, headBehind bool
	epoch                                     int64

	// apart is the connection that checkpoints apart from the writer, opened by the first sync
	// apart (apart.go), under apartMu.
	apartMu sync.Mutex
	apart   *sql.DB
}

type sub struct{ ch chan struct{} }

// Open opens (creating if needed) the SQLite store at path. Beside the database it keeps an
// identity file (path + ".identity": a store was created here, and which) and, between a Close
// and the next Open, a clean-shutdown file (path + ".clean").
//
// Open checks everything the store holds before serving anything: SQLite's integrity check,
// every row's checksum (keys included, so that a record cannot move out of sight), every stream's
// sequence and the head file's count of acknowledged events (a store whose head file is gone is
// refused as damaged: its backup, restored with Restore, brings it back); a read of a few hundred
// milliseconds per hundred thousand events. With opt.CheckInBackgroundOver, a larger database is
// read whole in the background instead, and each stream and remembered scope whole, and each
// metadata key with its neighbours, before it is first served (check.go, checkmeta.go); the newest file (path + ".newest") then stands for the count. When the
// clean-shutdown file is absent (the last run
// crashed, or the files were tampered with) it first checks the write-ahead log for frames SQLite
// would silently drop.
// A store of an older schema is migrated, in one transaction: one written before checksums
// existed (schema version 0) has every row summed as it stands; one written before leases
// (version 2) gets the empty leases table.
//
// Errors: *store.CorruptError (matching store.ErrCorrupt) for damage found; store.ErrMissing when the identity file
// says a store was created here and the database is missing or holds another store or none
// (unless opt.AllowEmpty); *store.SchemaError (matching store.ErrSchemaNewer) for a store written
// by a newer version, whose schema this one does not know (nothing in it is changed); other
// errors for a file that cannot be opened or is not a store.
//
//	st, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
//	if err != nil { return err }
//	defer st.Close()
func Open(ctx context.Context, path string, opt Options) (*SQLite, error) {
	if opt.Readers <= 0 {
		opt.Readers = 4
	}
	idFile, hasIDFile, err := readIdentity(path)
	if err != nil {
		return nil, fmt.Errorf("store: identity of %s: %w", path, err)
	}
	dbThere, err := exists(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if hasIDFile && !dbThere && !opt.AllowEmpty {
		return nil, fmt.Errorf("%w: %s was created as a store (%s) and its database is not there", store.ErrMissing, path, identityPath(path))
	}
	clean, err := takeClean(path)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	epoch, err := readEpoch(path, opt, dbThere, clean)
	if err != nil {
		return nil, err
	}
	if dbThere && !clean {
		if err := checkWAL(path, epoch.raised); err != nil {
			return nil, err
		}
	}
	w, err := sql.Open("sqlite", writerDSN(path, opt))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	s := &SQLite{w: w, path: path, subs: map[string]map[*sub]struct{}{}, released: make(chan struct{}), view: newView(opt.Cached),
		b: batch{back: make(chan struct{})}, normal: opt.SyncNormal}
	// The connection a store killed in this process kept (kept.go) is let go of there.
	version, err := s.prepareSchema(ctx, takeKept(path))
	if err != nil {
		w.Close()
		return nil, err
	}
	counted, err := s.checkAtOpen(ctx, dbThere, opt)
	if err != nil {
		w.Close()
		return nil, err
	}
	fresh, err := s.ensureIdentity(ctx, idFile, hasIDFile, opt.AllowEmpty)
	if err != nil {
		w.Close()
		return nil, err
	}
	// A store this version wrote has had its head file since before its identity was recorded:
	// without it nothing tells a whole log from one cut short. A store written before head files
	// (an older schema), one new to this path and one being restored start theirs here.
	if err := s.openHead(ctx, version == schemaVersion && !fresh && !opt.restoring, counted); err != nil {
		w.Close()
		return nil, err
	}
	s.epoch = epoch.n
	if err := epoch.write(path); err != nil {
		s.head.Close()
		s.newestF.Close()
		w.Close()
		return nil, err
	}
	if err := s.openWriter(ctx); err != nil {
		s.head.Close()
		w.Close()
		return nil, err
	}
	if err := s.openReaders(opt.Readers); err != nil {
		return nil, err
	}
	if s.chk.on {
		s.startCheck()
	}
	return s, nil
}

// writerDSN is the data source name of the writer's connection to the database at path.
func writerDSN(path string, opt Options) string {
	syncMode := "FULL"
	if opt.SyncNormal {
		syncMode = "NORMAL"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// prepareSchema refuses a store of a newer schema, then creates the tables a store lacks and
// migrates an older one; it returns the schema version the store had. The caller closes the
// writer on an error. prev is the connection a killed store kept for this file (nil: none): it
// is closed once the writer's connection is open, so that it is not the last, or kept again
// when that connection fails.
func (s *SQLite) prepareSchema(ctx context.Context, prev *kept) (int64, error) {
	// A store of a newer schema is refused before the schema below could add to it.
	version, err := s.checkVersion(ctx)
	if err != nil {
		prev.putBack()
		return 0, err
	}
	prev.close()
	if _, err := s.w.ExecContext(ctx, schema); err != nil {
		if isCorruption(err) {
			return 0, &store.CorruptError{Path: s.path, Table: "database", Reason: err.Error()}
		}
		return 0, fmt.Errorf("store: schema %s: %w", s.path, err)
	}
	if err := s.migrate(ctx); err != nil {
		return 0, err
	}
	return version, nil
}

// openReaders makes the pool of readers (at most readers connections, each opened when a read
// first needs it) and their statements, each prepared on a connection the first time it runs
// there (stmts.go); on an error it has closed the writer.
func (s *SQLite) openReaders(readers int) error {
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", "file:"+s.path+"?"+rq.Encode())
	if err != nil {
		s.closeWriter()
		return fmt.Errorf("store: open readers %s: %w", s.path, err)
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	s.r = r
	s.rs.prepare(r)
	return nil
}

// openWriter takes the writer's one connection for the store's life, hooks its rollbacks (see
// batch.go) and makes its statements, each prepared the first time it runs (stmts.go).
func (s *SQLite) openWriter(ctx context.Context) error {
	wc, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: open writer %s: %w", s.path, err)
	}
	err = wc.Raw(func(dc any) error {
		h, ok := dc.(interface {
			RegisterRollbackHook(sqlitedriver.RollbackHookFn)
		})
		if !ok {
			return fmt.Errorf("the driver's connection (%T) has no rollback hook", dc)
		}
		h.RegisterRollbackHook(func() { s.lost.Store(true) })
		return nil
	})
	if err != nil {
		wc.Close()
		return fmt.Errorf("store: open writer %s: %w", s.path, err)
	}
	s.ws.prepare(wc)
	s.wc = wc
	return nil
}

// closeWriter closes the writer's statements, its connection and the head file, syncing the
// head file first unless the store was killed.
func (s *SQLite) closeWriter() error {
	err := errors.Join(s.ws.close(), s.wc.Close(), s.w.Close())
	for _, f := range []*os.File{s.newestF, s.head} {
		if f == nil {
			continue
		}
		if !s.dead.Load() {
			err = errors.Join(err, f.Sync())
		}
		err = errors.Join(err, f.Close())
	}
	return err
}

// release closes the readers and the head file of a killed store and keeps its writer's
// connection, idle, for the next Open of the file (kept.go). The head file is not synced: a
// process that crashes syncs nothing either, and what it wrote stays in the operating system's
// cache for the next Open to read.
func (s *SQLite) release() {
	s.stopCheck() // its reader connection is let go of too
	s.rs.close()
	s.r.Close()
	s.keepWriter()
	close(s.released)
}

// Released is closed once the store has let go of its files: after Close, or after Kill once
// the readers it closes in the background are closed. A killed store's files are at rest then:
// the one connection it keeps for the next Open of the same file (see Kill) is idle and writes
// nothing.
//
//	st.Kill()
//	<-st.Released()
func (s *SQLite) Released() <-chan struct{} { return s.released }

// ErrCrashed is store.ErrCrashed.
var ErrCrashed = store.ErrCrashed

// Writes returns the number of durable writes (committed transactions that appended an event,
// stored metadata, remembered a new key, or granted, renewed or released a lease) since Open.
// Transactions that changed nothing, refused ones included, are not counted.
//
//	before := st.Writes()
func (s *SQLite) Writes() int64 { return s.writes.Load() }

// CrashAfterWrite arms the crash hook: right after the n-th durable write from now commits (n >= 1),
// the store dies as Kill leaves it: that write returns store.ErrCrashed to its caller, every later read and
// write store.ErrClosed, and the returned channel is closed. The hook is off until armed; arming again
// replaces the previous point. The channel of a store that is closed or killed first never closes.
//
//	crashed := st.CrashAfterWrite(3)
//	<-crashed // the third write committed; nothing after it did
func (s *SQLite) CrashAfterWrite(n int64) <-chan struct{} {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if n < 1 {
		n = 1
	}
	s.crashAt = s.writes.Load() + n
	s.crashed = make(chan struct{})
	return s.crashed
}

// die is Kill with wmu held, closing the crash channel.
func (s *SQLite) die() {
	if s.dead.Swap(true) || s.closed {
		return
	}
	// The channel closes first: whoever sees a read refused after this instant can already tell
	// it was the crash.
	if s.crashed != nil {
		close(s.crashed)
	}
	s.closed = true
	s.shut.Store(true)
	_ = s.closeApart()
	go s.release()
}

// notifyLocked wakes the subscribers of streams; subMu is held.
func (s *SQLite) notifyLocked(streams []string) {
	for _, st := range streams {
		for sb := range s.subs[st] {
			select {
			case sb.ch <- struct{}{}:
			default:
			}
		}
	}
}

// Subscribe implements store.Store.
func (s *SQLite) Subscribe(stream string) (<-chan struct{}, func()) {
	sb := &sub{ch: make(chan struct{}, 1)}
	s.subMu.Lock()
	m := s.subs[stream]
	if m == nil {
		m = map[*sub]struct{}{}
		s.subs[stream] = m
	}
	m[sb] = struct{}{}
	s.subMu.Unlock()
	var once sync.Once
	return sb.ch, func() {
		once.Do(func() {
			s.subMu.Lock()
			delete(s.subs[stream], sb)
			if len(s.subs[stream]) == 0 {
				delete(s.subs, stream)
			}
			s.subMu.Unlock()
		})
	}
}

// Close implements store.Store: it waits for the write in progress (the Updates sharing one
// transaction), then closes the connections and records the clean shutdown. Updates still
// queued, and every call after it, answer store.ErrClosed. Closing again is harmless.
//
//	defer st.Close()
func (s *SQLite) Close() error {
	s.stopCheck()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.shut.Store(true)
	errApart := s.closeApart()
	if s.dead.Load() {
		return nil
	}
	err1 := errors.Join(errApart, s.rs.close(), s.r.Close(), s.syncRelaxed())
	err2 := s.closeWriter()
	defer close(s.released)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	// Only a store closed without error is recorded as closed cleanly: the next Open skips the
	// full check.
	if err := writeFileSync(cleanPath(s.path), []byte(cleanContent)); err != nil {
		return fmt.Errorf("store: record the clean shutdown of %s: %w", s.path, err)
	}
	return nil
}

// Kill implements store.Store. It waits for the write in progress (the Updates sharing one
// transaction, which then have committed together, or not) and refuses every read and write
// after it: Updates still queued answer store.ErrClosed. The readers are then closed in the
// background; the writer's connection is kept, idle, until the next Open of the same file in this
// process has opened its own (kept.go), so that the write-ahead log is left as a crash leaves it,
// not folded into the database as closing the last connection would. What Kill simulates is the
// instant of the crash, after which nothing reaches the store. A real SIGKILL is what the process
// driver and the crash test do.
//
//	st.Kill()
//	<-st.Released() // the files are at rest: open them again as a restarted process would
func (s *SQLite) Kill() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.dead.Swap(true) || s.closed {
		return
	}
	s.closed = true
	s.shut.Store(true)
	_ = s.closeApart() // a checkpoint in progress ends before the instant of the crash
	// Closing waits for readers in use; do it off the caller's path.
	go s.release()
}
