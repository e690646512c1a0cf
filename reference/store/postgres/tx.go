package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Update runs fn in one write transaction and commits it; if fn returns an error, or a statement
// fails, nothing fn did is kept and the error comes back.
//
// Writes of every handle and node run at once and commit together; the database keeps them
// apart. Each transaction locks what it reads or writes, the first time it touches it, until
// its commit (a transaction-scoped advisory lock per stream and generation, per metadata key and
// per remembered-key scope): a stream's head read inside fn cannot change before the commit, so
// sequences stay gapless, and a metadata value read inside fn is the one fn's write replaces.
// Transactions that touch nothing in common do not wait for each other; those that do run one
// after the other, the later one seeing the earlier one's commit. No lock is held beside these:
// nothing the store takes is shared by writes of unrelated streams and keys. A transaction holds
// one lock per thing it touches, in the server's lock table (sized by max_locks_per_transaction
// times max_connections); a write of thousands of things at once may find it full and fail,
// keeping nothing.
//
// ctx governs the wait for a write slot and a connection; once the transaction has begun (with
// fn's first statement, which carries it to the server) it is no longer the caller's to abandon:
// every statement runs under Options.WriteTimeout instead (a cancelled caller cannot leave a
// commit half made, and a stuck database cannot hold the writer forever). An fn that runs no
// statement begins nothing and commits nothing.
//
// A transaction the database aborts to break a deadlock (two transactions each waiting for what
// the other locked) is rolled back and fn runs again, in a new transaction, up to maxAttempts
// times in all: fn may run more than once, and only its last run counts. When every attempt was
// aborted the error matches ErrContended.
//
// After the commit, this handle's subscribers of every stream fn appended to are signalled before
// Update returns; other handles and nodes are told through a notification sent by the commit.
//
// Errors: fn's own error; store.ErrConflict (wrapped) from an Append whose expected head did not
// hold; store.ErrClosed after Close or Kill; store.ErrCrashed from the write the crash hook was
// armed for; ctx's error when it ended before the transaction began; ErrContended; a wrapped
// database error otherwise (a failed commit may or may not have committed, as with any database).
//
// Do not call the store's writing methods from inside fn: a transaction waits for the locks of
// the other, which waits for fn.
//
//	err := st.Update(ctx, func(tx store.Tx) error {
//		_, err := tx.Append("x/exec-1", 0, head, store.NewEvent{Kind: "decided", Data: b})
//		return err
//	})
func (s *Postgres) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.update(ctx, nil, fn)
}

// maxAttempts bounds the transactions one Update runs when the database aborts them (deadlock,
// serialization failure).
const maxAttempts = 8

// ErrContended is what an Update answers when the database aborted every one of its attempts to
// break a deadlock or a serialization failure (maxAttempts of them); nothing of it was kept. It
// is not a conflict of the store's contract: the same write may succeed when tried again.
var ErrContended = errors.New("store: postgres: the write was aborted by the database on every attempt (deadlock or serialization failure)")

func (s *Postgres) update(ctx context.Context, fence *store.Lease, fn func(store.Tx) error) error {
	return s.updateMode(ctx, fence, false, fn)
}

// updateMode is update, relaxed (synchronous_commit off) or not.
func (s *Postgres) updateMode(ctx context.Context, fence *store.Lease, relaxed bool, fn func(store.Tx) error) error {
	// A write holds its connection until it commits, and may wait meanwhile for a lock, or for a
	// read of its own: at most half the reads' and writes' connections write at once, so reads
	// always find a connection soon (a pool of writes each waiting for a read would wait
	// forever); lease changes have connections no write takes (leaseConns).
	s.slotWaits.Add(1)
	select {
	case s.wsem <- struct{}{}:
		s.slotWaits.Add(-1)
	case <-ctx.Done():
		s.slotWaits.Add(-1)
		return ctx.Err()
	}
	defer func() { <-s.wsem }()
	done, err := s.use(ctx)
	if err != nil {
		return err
	}
	defer done()
	s.upd.RLock()
	defer s.upd.RUnlock()
	var last error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if s.closed.Load() {
			return store.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		again, err := s.attempt(ctx, fence, relaxed, fn)
		if !again {
			return err
		}
		last = err
		if attempt < maxAttempts {
			backoff(attempt)
		}
	}
	return fmt.Errorf("%w: %d attempts, the last: %w", ErrContended, maxAttempts, last)
}

// backoff waits a little before the next attempt, more after each, at random (two transactions
// that deadlocked do not meet again at once).
func backoff(attempt int) {
	time.Sleep(time.Duration(rand.Int64N(int64(attempt) * int64(2*time.Millisecond))))
}

// attempt is one transaction of an Update; again reports that the database aborted it and fn
// must run again.
func (s *Postgres) attempt(ctx context.Context, fence *store.Lease, relaxed bool, fn func(store.Tx) error) (again bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, s.writeErr("begin", err)
	}
	defer conn.Release()
	// The transaction starts with its first statement, in the same round trip (see tx.start).
	start := []string{s.q.begin}
	if relaxed {
		start = append(start, relaxedSQL)
	}
	t := &tx{s: s, c: conn.Conn(), now: time.Now().UnixMilli(), start: start, touched: map[string]struct{}{}, locks: map[int64]struct{}{}}
	done := false
	defer func() {
		if !done {
			s.rollback(conn)
		}
	}()
	if fence != nil {
		if err := t.checkFence(*fence); err != nil {
			return t.aborted, err
		}
	}
	if err := fn(t); err != nil || t.aborted {
		if err == nil {
			err = fmt.Errorf("store: a statement of the transaction was aborted by the database, and fn went on")
		}
		return t.aborted, err
	}
	done = true // committed, refused, or the connection is gone: nothing to roll back
	return s.commit(conn, t)
}

// commit commits t's transaction and counts its write. While a crash is armed, commits run one at
// a time, so that the armed write is the last to commit; otherwise they run at once.
func (s *Postgres) commit(conn *pgxpool.Conn, t *tx) (again bool, err error) {
	s.cmu.RLock()
	armed := s.armed.Load()
	if armed {
		s.cmu.RUnlock()
		s.cmu.Lock()
		defer s.cmu.Unlock()
	} else {
		defer s.cmu.RUnlock()
	}
	if s.closed.Load() {
		s.rollback(conn)
		return false, store.ErrClosed
	}
	if t.start != nil {
		return false, nil // fn ran no statement: the transaction never started, nothing to commit
	}
	tag, err := s.commitAndNotify(conn, t)
	if err != nil {
		if retryable(err) {
			return true, s.writeErr("commit", err)
		}
		return false, s.writeErr("commit", err)
	}
	if tag.String() == "ROLLBACK" {
		// A statement of fn failed and fn went on: the server rolled everything back.
		return false, fmt.Errorf("store: commit: a statement of the transaction failed, nothing was kept: %w", pgx.ErrTxCommitRollback)
	}
	if t.wrote {
		if n := s.writes.Add(1); armed && n == s.crashAt {
			close(s.crashed)
			s.die()
			return false, store.ErrCrashed
		}
	}
	if len(t.touched) > 0 {
		keys := make([]string, 0, len(t.touched))
		for st := range t.touched {
			keys = append(keys, payloadOf(st))
		}
		s.wake(keys...)
	}
	return false, nil
}

// commitAndNotify commits t and, when it appended, notifies its streams right after, in the same
// round trip: the notification goes out once the commit is visible, and is not part of the
// transaction (a notifying transaction would hold a lock of the whole database through its
// commit, so commits could not share a WAL flush). A notification that fails after a commit is
// not the write's failure: a wake-up is only a hint, and a lost one costs a reader one read.
func (s *Postgres) commitAndNotify(conn *pgxpool.Conn, t *tx) (pgconn.CommandTag, error) {
	ctx, cancel := s.stmtCtx()
	defer cancel()
	if len(t.touched) == 0 {
		return conn.Exec(ctx, "COMMIT")
	}
	payloads := make([]string, 0, len(t.touched))
	for st := range t.touched {
		payloads = append(payloads, payloadOf(st))
	}
	b := &pgx.Batch{}
	b.Queue("COMMIT")
	b.Queue(s.q.notify, s.channel, payloads)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	tag, err := br.Exec()
	if err != nil || tag.String() == "ROLLBACK" {
		return tag, err
	}
	_, _ = br.Exec()
	return tag, nil
}

// retryable reports a database error that aborts a transaction which may succeed when run again:
// a deadlock broken by the server, or a serialization failure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// stmtCtx bounds one statement of a write transaction.
func (s *Postgres) stmtCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.opt.WriteTimeout)
}

// rollback ends the transaction on conn, if it is still open. A connection that cannot roll back
// is left in a transaction, and the pool then closes it rather than reuse it.
func (s *Postgres) rollback(conn *pgxpool.Conn) {
	if conn.Conn().IsClosed() || conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := s.stmtCtx()
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		conn.Conn().Close(ctx)
	}
}

// writeErr maps an error of a write transaction's own statements.
func (s *Postgres) writeErr(what string, err error) error {
	if s.shut.Load() {
		return store.ErrClosed
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

type tx struct {
	s   *Postgres
	c   *pgx.Conn
	now int64
	// start are the statements that start the transaction (BEGIN, and the relaxed setting), nil
	// once they went to the server: they go ahead of the transaction's first statement, in its
	// round trip, so that a write costs no round trip of its own to begin.
	start   []string
	touched map[string]struct{}
	wrote   bool // something durable changed
	// locks are the advisory locks this transaction holds, by key.
	locks map[int64]struct{}
	// aborted: a statement failed because the database aborted the transaction to break a
	// deadlock (or a serialization failure); the Update runs fn again.
	aborted bool
}

var _ store.Tx = (*tx)(nil)

// The things a transaction locks: a stream's generation, a metadata key, a remembered-key scope.
const (
	lockStream   = "stream"
	lockMeta     = "meta"
	lockRemember = "remember"
)

// resourceKey is the advisory lock key of one thing of the store's schema. Keys of different
// things may collide (64 bits of a hash): the two then wait for each other when written at once,
// which costs time, never correctness.
func resourceKey(schema, what, name string, gen int64) int64 {
	h := fnv.New64a()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(schema)))
	h.Write(n[:])
	h.Write([]byte(schema))
	h.Write([]byte(what))
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write([]byte(name))
	binary.BigEndian.PutUint64(n[:], uint64(gen))
	h.Write(n[:])
	return int64(h.Sum64())
}

// lockFor is the statement that takes the lock of (what, name, gen) before a statement that
// reads or writes it, "" when the transaction holds it already.
func (t *tx) lockFor(what, name string, gen int64) (q string, key int64) {
	key = resourceKey(t.s.opt.Schema, what, name, gen)
	if _, ok := t.locks[key]; ok {
		return "", 0
	}
	return lockSQL, key
}

// lockSQL takes an advisory lock until the transaction ends.
const lockSQL = `SELECT pg_advisory_xact_lock($1)`

// took records that the transaction holds the lock of key.
func (t *tx) took(key int64) {
	t.locks[key] = struct{}{}
}

// failed notes err of one of the transaction's statements and returns it.
func (t *tx) failed(err error) error {
	if retryable(err) {
		t.aborted = true
	}
	return err
}

// queryRow runs q, after taking the lock of (what, name, gen) when the transaction does not hold
// it yet, and scans its one row into dest. The lock and the query go in one round trip (with the
// transaction's start, for its first statement); the query reads what the lock's previous holder
// committed (under READ COMMITTED each statement sees the commits made before it began).
func (t *tx) queryRow(what, name string, gen int64, dest []any, q string, args ...any) error {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	lq, key := t.lockFor(what, name, gen)
	if lq == "" && t.start == nil {
		return t.failed(t.c.QueryRow(ctx, q, args...).Scan(dest...))
	}
	return t.batch(ctx, lq, key, q, args, func(br pgx.BatchResults) error { return br.QueryRow().Scan(dest...) })
}

// exec is queryRow for a statement without rows; it returns the rows the statement touched.
func (t *tx) exec(what, name string, gen int64, q string, args ...any) (int64, error) {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	lq, key := t.lockFor(what, name, gen)
	if lq == "" && t.start == nil {
		tag, err := t.c.Exec(ctx, q, args...)
		return tag.RowsAffected(), t.failed(err)
	}
	var n int64
	err := t.batch(ctx, lq, key, q, args, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// batch sends, in one round trip, the transaction's start when it has not gone yet, the lock lq
// of key unless lq is "", and q, whose results read takes.
func (t *tx) batch(ctx context.Context, lq string, key int64, q string, args []any, read func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	for _, st := range t.start {
		b.Queue(st)
	}
	if lq != "" {
		b.Queue(lq, key)
	}
	b.Queue(q, args...)
	br := t.c.SendBatch(ctx, b)
	for range t.start {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return t.failed(err)
		}
	}
	t.start = nil
	if lq != "" {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return t.failed(err)
		}
		t.took(key)
	}
	err := read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return t.failed(err)
}

func (t *tx) checkFence(l store.Lease) error {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	var token int64
	// FOR KEY SHARE, held to the commit: a grant of the name (an update of the row's token, a key
	// column) waits for this transaction, and this one waits for a grant in progress, so the two
	// are ordered and the check holds until the commit. A renewal or a release (an update of the
	// expiry alone) does not conflict with it: a node's renewals never wait for its writes.
	err := t.batch(ctx, "", 0, t.s.q.fence, []any{bs(l.Name)}, func(br pgx.BatchResults) error { return br.QueryRow().Scan(&token) })
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: lease %q was never granted", store.ErrFenced, l.Name)
	}
	if err != nil {
		return t.s.writeErr("fence", t.failed(err))
	}
	if token != l.Token {
		return fmt.Errorf("%w: lease %q token %d, the newest grant is token %d", store.ErrFenced, l.Name, l.Token, token)
	}
	return nil
}

// Head implements store.Tx: the stream's head as this transaction sees it (its own appends
// included). The stream is locked from then on: no other transaction appends to it before this
// one ends.
func (t *tx) Head(stream string, gen int64) (int64, error) {
	var h int64
	if err := t.queryRow(lockStream, stream, gen, []any{&h}, t.s.q.head, bs(stream), gen); err != nil {
		return 0, t.s.writeErr("head "+stream, err)
	}
	return h, nil
}

// Append implements store.Tx. The events get the transaction's time (this node's clock, Unix
// milliseconds). The stream is locked until the transaction ends, so the events numbered after
// its head keep their numbers: no other transaction appends to it meanwhile.
func (t *tx) Append(stream string, gen, expect int64, evs ...store.NewEvent) (int64, error) {
	kinds := make([][]byte, len(evs))
	datas := make([][]byte, len(evs))
	for i, e := range evs {
		kinds[i] = bs(e.Kind)
		datas[i] = e.Data
	}
	var head, added int64
	err := t.queryRow(lockStream, stream, gen, []any{&head, &added}, t.s.q.appendEvents,
		bs(stream), gen, expect, kinds, datas, t.now)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			// Another writer took the numbers: only a writer that bypassed the stream's lock can.
			return 0, fmt.Errorf("%w: %s/%d was appended to concurrently: %v", store.ErrConflict, stream, gen, err)
		}
		return 0, t.s.writeErr("append "+stream, err)
	}
	if expect >= 0 && head != expect {
		return 0, fmt.Errorf("%w: %s/%d head %d, expected %d", store.ErrConflict, stream, gen, head, expect)
	}
	if added != int64(len(evs)) {
		return 0, fmt.Errorf("store: append %s/%d: %d of %d events stored", stream, gen, added, len(evs))
	}
	if len(evs) > 0 {
		t.touched[stream] = struct{}{}
		t.wrote = true
	}
	return head + added, nil
}

// PutMeta implements store.Tx; the key is locked until the transaction ends.
func (t *tx) PutMeta(key string, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	if _, err := t.exec(lockMeta, key, 0, t.s.q.putMeta, bs(key), val); err != nil {
		return t.s.writeErr("put meta", err)
	}
	t.wrote = true
	return nil
}

// DeleteMeta implements store.Tx; the key is locked until the transaction ends.
func (t *tx) DeleteMeta(key string) error {
	n, err := t.exec(lockMeta, key, 0, t.s.q.delMeta, bs(key))
	if err != nil {
		return t.s.writeErr("delete meta", err)
	}
	if n > 0 {
		t.wrote = true
	}
	return nil
}

// Meta implements store.Tx. The key is locked from then on (whether or not it has a value), so
// the value read is the one a PutMeta of this transaction replaces.
func (t *tx) Meta(key string) ([]byte, bool, error) {
	var v []byte
	err := t.queryRow(lockMeta, key, 0, []any{&v}, t.s.q.meta, bs(key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, t.s.writeErr("meta", err)
	}
	return v, true, nil
}

// Remember implements store.Tx: the set keeps the newest keep keys of scope (keep <= 0: all); a
// key already there is not made newer. The scope is locked until the transaction ends (its keys
// are numbered one after another).
func (t *tx) Remember(scope, key string, keep int) (bool, error) {
	var n int64
	if err := t.queryRow(lockRemember, scope, 0, []any{&n}, t.s.q.remember, bs(scope), bs(key), int64(keep)); err != nil {
		return false, t.s.writeErr("remember", err)
	}
	if n == 0 {
		return false, nil
	}
	t.wrote = true
	return true, nil
}
