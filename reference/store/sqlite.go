package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the one place the SQLite driver is imported
)

const schema = `
CREATE TABLE IF NOT EXISTS events (
	stream TEXT NOT NULL,
	gen    INTEGER NOT NULL,
	seq    INTEGER NOT NULL,
	kind   TEXT NOT NULL,
	data   BLOB,
	time   INTEGER NOT NULL,
	PRIMARY KEY (stream, gen, seq)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS events_append_only_u BEFORE UPDATE ON events
	BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER IF NOT EXISTS events_append_only_d BEFORE DELETE ON events
	BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TABLE IF NOT EXISTS meta (
	key TEXT PRIMARY KEY,
	val BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS remembered (
	scope TEXT NOT NULL,
	key   TEXT NOT NULL,
	n     INTEGER NOT NULL,
	PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS remembered_n ON remembered (scope, n);
`

// Options tune the SQLite store.
type Options struct {
	// Readers is the size of the reader pool (default 4).
	Readers int
	// SyncFull makes every commit wait for the disk (synchronous=FULL): a power loss then loses
	// nothing. The default (NORMAL, in WAL mode) already keeps every commit through a process
	// crash, which is what SIGKILL is.
	SyncFull bool
}

// SQLite is the reference Store: one SQLite file in WAL mode, one writer connection taking
// immediate transactions, and a pool of readers.
type SQLite struct {
	w, r *sql.DB

	wmu    sync.Mutex // serialises writes and orders Kill against them
	dead   atomic.Bool
	closed bool
	shut   atomic.Bool // closed or killed: reads refuse too

	subMu sync.Mutex
	subs  map[string]map[*sub]struct{}

	// The crash hook (CrashAfterWrite): writes counts the durable writes, crashAt (under wmu) is
	// the count after which the store dies, 0 when unarmed; crashed is closed when it fires.
	writes  atomic.Int64
	crashAt int64
	crashed chan struct{}
}

type sub struct{ ch chan struct{} }

// Open opens (creating if needed) the SQLite store at path.
//
// Errors: a file that cannot be opened or is not a store of this schema.
//
//	st, err := store.Open(ctx, filepath.Join(dir, "loom.db"), store.Options{})
//	if err != nil { return err }
//	defer st.Close()
func Open(ctx context.Context, path string, opt Options) (*SQLite, error) {
	if opt.Readers <= 0 {
		opt.Readers = 4
	}
	syncMode := "NORMAL"
	if opt.SyncFull {
		syncMode = "FULL"
	}
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if _, err := w.ExecContext(ctx, schema); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: schema %s: %w", path, err)
	}
	rq := url.Values{}
	rq.Add("_pragma", "busy_timeout(10000)")
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", "file:"+path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open readers %s: %w", path, err)
	}
	r.SetMaxOpenConns(opt.Readers)
	r.SetMaxIdleConns(opt.Readers)
	return &SQLite{w: w, r: r, subs: map[string]map[*sub]struct{}{}}, nil
}

// Update implements Store.
func (s *SQLite) Update(ctx context.Context, fn func(Tx) error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.dead.Load() || s.closed {
		return ErrClosed
	}
	// The write itself is not cancelled by ctx once begun: a commit half-abandoned by a
	// cancelled caller would only make the outcome harder to reason about.
	if err := ctx.Err(); err != nil {
		return err
	}
	sqltx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	t := &tx{tx: sqltx, now: time.Now().UnixMilli(), touched: map[string]struct{}{}}
	if err := fn(t); err != nil {
		sqltx.Rollback()
		return err
	}
	if err := sqltx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	if t.wrote {
		if n := s.writes.Add(1); s.crashAt > 0 && n == s.crashAt {
			s.die()
			return ErrCrashed
		}
	}
	s.notify(t.touched)
	return nil
}

// ErrCrashed is what the write that reached the crash point of CrashAfterWrite returns: it has
// committed, but the store died before telling anyone. It matches ErrClosed.
var ErrCrashed = fmt.Errorf("%w: crashed at the armed write", ErrClosed)

// Writes returns the number of durable writes (committed transactions that appended an event,
// stored metadata or remembered a new key) since Open. Transactions that changed nothing are not
// counted.
//
//	before := st.Writes()
func (s *SQLite) Writes() int64 { return s.writes.Load() }

// CrashAfterWrite arms the crash hook: right after the n-th durable write from now commits (n >= 1),
// the store dies as Kill leaves it: that write returns ErrCrashed to its caller, every later read and
// write ErrClosed, and the returned channel is closed. The hook is off until armed; arming again
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
	go func() { s.r.Close(); s.w.Close() }()
}

func (s *SQLite) notify(streams map[string]struct{}) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for st := range streams {
		for sb := range s.subs[st] {
			select {
			case sb.ch <- struct{}{}:
			default:
			}
		}
	}
}

// Subscribe implements Store.
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

func clampLimit(limit int) int {
	if limit <= 0 || limit > MaxRead {
		return MaxRead
	}
	return limit
}

func (s *SQLite) alive() error {
	if s.shut.Load() {
		return ErrClosed
	}
	return nil
}

// ReadForward implements Store.
func (s *SQLite) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]Event, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	return s.query(ctx, `SELECT seq, kind, data, time FROM events WHERE stream = ? AND gen = ? AND seq > ? ORDER BY seq ASC LIMIT ?`,
		stream, gen, after, clampLimit(limit))
}

// ReadBackward implements Store.
func (s *SQLite) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]Event, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	return s.query(ctx, `SELECT seq, kind, data, time FROM events WHERE stream = ? AND gen = ? AND seq < ? ORDER BY seq DESC LIMIT ?`,
		stream, gen, before, clampLimit(limit))
}

func (s *SQLite) query(ctx context.Context, q string, stream string, gen, bound int64, limit int) ([]Event, error) {
	rows, err := s.r.QueryContext(ctx, q, stream, gen, bound, limit)
	if err != nil {
		return nil, s.readErr(err)
	}
	defer rows.Close()
	out := make([]Event, 0, min(limit, 64))
	for rows.Next() {
		e := Event{Stream: stream, Gen: gen}
		if err := rows.Scan(&e.Seq, &e.Kind, &e.Data, &e.Time); err != nil {
			return nil, s.readErr(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(err)
	}
	return out, nil
}

func (s *SQLite) readErr(err error) error {
	if s.shut.Load() {
		return ErrClosed
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("store: read: %w", err)
}

// Head implements Store.
func (s *SQLite) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	if err := s.alive(); err != nil {
		return 0, err
	}
	var h int64
	err := s.r.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE stream = ? AND gen = ?`, stream, gen).Scan(&h)
	if err != nil {
		return 0, s.readErr(err)
	}
	return h, nil
}

// Meta implements Store.
func (s *SQLite) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.alive(); err != nil {
		return nil, false, err
	}
	var v []byte
	err := s.r.QueryRowContext(ctx, `SELECT val FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.readErr(err)
	}
	return v, true, nil
}

// MetaPrefix implements Store.
func (s *SQLite) MetaPrefix(ctx context.Context, prefix string) ([]KV, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	q, args := `SELECT key, val FROM meta WHERE key >= ? ORDER BY key`, []any{prefix}
	if end, ok := prefixEnd(prefix); ok {
		q, args = `SELECT key, val FROM meta WHERE key >= ? AND key < ? ORDER BY key`, []any{prefix, end}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.readErr(err)
	}
	defer rows.Close()
	var out []KV
	for rows.Next() {
		var kv KV
		if err := rows.Scan(&kv.Key, &kv.Val); err != nil {
			return nil, s.readErr(err)
		}
		out = append(out, kv)
	}
	return out, s.rowsErr(rows)
}

// prefixEnd is the smallest key greater than every key with prefix (byte order), if there is one.
func prefixEnd(prefix string) (string, bool) {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

func (s *SQLite) rowsErr(rows *sql.Rows) error {
	if err := rows.Err(); err != nil {
		return s.readErr(err)
	}
	return nil
}

// Close implements Store.
func (s *SQLite) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.shut.Store(true)
	if s.dead.Load() {
		return nil
	}
	err1 := s.r.Close()
	err2 := s.w.Close()
	return errors.Join(err1, err2)
}

// Kill implements Store. It waits for the write in progress (which then has committed, or not)
// and refuses every read and write after it. The connections are then closed in the background
// (SQLite may checkpoint as they close, which changes nothing that was committed): what Kill
// simulates is the instant of the crash, after which nothing reaches the store. A real SIGKILL,
// which leaves the write-ahead log for recovery, is what the process driver and the crash test do.
func (s *SQLite) Kill() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.dead.Swap(true) || s.closed {
		return
	}
	s.closed = true
	s.shut.Store(true)
	// Closing waits for readers in use; do it off the caller's path.
	go func() { s.r.Close(); s.w.Close() }()
}

type tx struct {
	tx      *sql.Tx
	now     int64
	touched map[string]struct{}
	wrote   bool // something durable changed
}

func (t *tx) Head(stream string, gen int64) (int64, error) {
	var h int64
	err := t.tx.QueryRow(`SELECT COALESCE(MAX(seq), 0) FROM events WHERE stream = ? AND gen = ?`, stream, gen).Scan(&h)
	if err != nil {
		return 0, fmt.Errorf("store: head: %w", err)
	}
	return h, nil
}

func (t *tx) Append(stream string, gen, expect int64, evs ...NewEvent) (int64, error) {
	h, err := t.Head(stream, gen)
	if err != nil {
		return 0, err
	}
	if expect >= 0 && h != expect {
		return 0, fmt.Errorf("%w: %s/%d head %d, expected %d", ErrConflict, stream, gen, h, expect)
	}
	for _, e := range evs {
		h++
		if _, err := t.tx.Exec(`INSERT INTO events (stream, gen, seq, kind, data, time) VALUES (?, ?, ?, ?, ?, ?)`,
			stream, gen, h, e.Kind, e.Data, t.now); err != nil {
			return 0, fmt.Errorf("store: append %s/%d: %w", stream, gen, err)
		}
	}
	if len(evs) > 0 {
		t.touched[stream] = struct{}{}
		t.wrote = true
	}
	return h, nil
}

func (t *tx) PutMeta(key string, val []byte) error {
	if _, err := t.tx.Exec(`INSERT INTO meta (key, val) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET val = excluded.val`, key, val); err != nil {
		return fmt.Errorf("store: put meta %s: %w", key, err)
	}
	t.wrote = true
	return nil
}

func (t *tx) Meta(key string) ([]byte, bool, error) {
	var v []byte
	err := t.tx.QueryRow(`SELECT val FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: meta %s: %w", key, err)
	}
	return v, true, nil
}

func (t *tx) Remember(scope, key string, keep int) (bool, error) {
	var n int64
	err := t.tx.QueryRow(`SELECT n FROM remembered WHERE scope = ? AND key = ?`, scope, key).Scan(&n)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("store: remember: %w", err)
	}
	var top int64
	if err := t.tx.QueryRow(`SELECT COALESCE(MAX(n), 0) FROM remembered WHERE scope = ?`, scope).Scan(&top); err != nil {
		return false, fmt.Errorf("store: remember: %w", err)
	}
	if _, err := t.tx.Exec(`INSERT INTO remembered (scope, key, n) VALUES (?, ?, ?)`, scope, key, top+1); err != nil {
		return false, fmt.Errorf("store: remember: %w", err)
	}
	t.wrote = true
	if keep > 0 && top+1 > int64(keep) {
		if _, err := t.tx.Exec(`DELETE FROM remembered WHERE scope = ? AND n <= ?`, scope, top+1-int64(keep)); err != nil {
			return false, fmt.Errorf("store: forget: %w", err)
		}
	}
	return true, nil
}
