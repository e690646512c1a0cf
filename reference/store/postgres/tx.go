package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Update runs fn in one write transaction and commits it; if fn returns an error, or a statement
// fails, nothing fn did is kept and the error comes back.
//
// Writes are serialised across every handle and node on the store: the transaction begins by
// taking the store's write lock (a transaction-scoped advisory lock, released by the commit), so
// a stream's head read inside fn cannot change before the commit and sequences stay gapless.
// ctx governs the wait for this handle's previous write, for a connection and for the write lock;
// once the lock is held the transaction is no longer the caller's to abandon: every statement runs
// under Options.WriteTimeout instead (a cancelled caller cannot leave a commit half made, and a
// stuck database cannot hold the writer forever).
//
// After the commit, this handle's subscribers of every stream fn appended to are signalled before
// Update returns; other handles and nodes are told through a notification sent by the commit.
//
// Errors: fn's own error; store.ErrConflict (wrapped) from an Append whose expected head did not
// hold; store.ErrClosed after Close or Kill; store.ErrCrashed from the write the crash hook was
// armed for; ctx's error when it ended before the transaction began; a wrapped database error
// otherwise (a failed commit may or may not have committed, as with any database).
//
// Do not call the store's writing methods from inside fn: writes of a handle run one at a time.
//
//	err := st.Update(ctx, func(tx store.Tx) error {
//		_, err := tx.Append("x/exec-1", 0, head, store.NewEvent{Kind: "decided", Data: b})
//		return err
//	})
func (s *Postgres) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.update(ctx, nil, fn)
}

func (s *Postgres) update(ctx context.Context, fence *store.Lease, fn func(store.Tx) error) error {
	if err := s.takeWrite(ctx); err != nil {
		return err
	}
	defer s.giveWrite()
	if s.closed {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.writeErr("begin", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, s.q.begin); err != nil {
		s.rollback(conn)
		return s.writeErr("begin", err)
	}
	t := &tx{s: s, c: conn.Conn(), now: time.Now().UnixMilli(), touched: map[string]struct{}{}}
	done := false
	defer func() {
		if !done {
			s.rollback(conn)
		}
	}()
	if fence != nil {
		if err := t.checkFence(*fence); err != nil {
			return err
		}
	}
	if err := fn(t); err != nil {
		return err
	}
	ctx, cancel := s.stmtCtx()
	tag, err := conn.Exec(ctx, "COMMIT")
	cancel()
	done = true // committed, refused, or the connection is gone: nothing to roll back
	if err != nil {
		return s.writeErr("commit", err)
	}
	if tag.String() == "ROLLBACK" {
		// A statement of fn failed and fn went on: the server rolled everything back.
		return fmt.Errorf("store: commit: a statement of the transaction failed, nothing was kept: %w", pgx.ErrTxCommitRollback)
	}
	if t.wrote {
		if n := s.writes.Add(1); s.crashAt > 0 && n == s.crashAt {
			close(s.crashed)
			s.die()
			return store.ErrCrashed
		}
	}
	if len(t.touched) > 0 {
		keys := make([]string, 0, len(t.touched))
		for st := range t.touched {
			keys = append(keys, payloadOf(st))
		}
		s.wake(keys...)
	}
	return nil
}

// takeWrite waits for this handle's write in progress, or for ctx.
func (s *Postgres) takeWrite(ctx context.Context) error {
	select {
	case s.wsem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Postgres) giveWrite() { <-s.wsem }

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
	s       *Postgres
	c       *pgx.Conn
	now     int64
	touched map[string]struct{}
	wrote   bool // something durable changed
}

var _ store.Tx = (*tx)(nil)

func (t *tx) checkFence(l store.Lease) error {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	var token int64
	// FOR KEY SHARE, held to the commit: a grant of the name (an update of the row's token, a key
	// column) waits for this transaction, and this one waits for a grant in progress, so the two
	// are ordered and the check holds until the commit. A renewal or a release (an update of the
	// expiry alone) does not conflict with it: a node's renewals never wait for its writes.
	err := t.c.QueryRow(ctx, t.s.q.fence, bs(l.Name)).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: lease %q was never granted", store.ErrFenced, l.Name)
	}
	if err != nil {
		return t.s.writeErr("fence", err)
	}
	if token != l.Token {
		return fmt.Errorf("%w: lease %q token %d, the newest grant is token %d", store.ErrFenced, l.Name, l.Token, token)
	}
	return nil
}

// Head implements store.Tx: the stream's head as this transaction sees it (its own appends
// included).
func (t *tx) Head(stream string, gen int64) (int64, error) {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	var h int64
	if err := t.c.QueryRow(ctx, t.s.q.head, bs(stream), gen).Scan(&h); err != nil {
		return 0, t.s.writeErr("head "+stream, err)
	}
	return h, nil
}

// Append implements store.Tx. The events get the transaction's time (this node's clock, Unix
// milliseconds).
func (t *tx) Append(stream string, gen, expect int64, evs ...store.NewEvent) (int64, error) {
	kinds := make([][]byte, len(evs))
	datas := make([][]byte, len(evs))
	for i, e := range evs {
		kinds[i] = bs(e.Kind)
		datas[i] = e.Data
	}
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	var head, added, told int64
	err := t.c.QueryRow(ctx, t.s.q.appendEvents, bs(stream), gen, expect, kinds, datas, t.now,
		t.s.channel, payloadOf(stream)).Scan(&head, &added, &told)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			// Another writer took the numbers: only a writer that bypassed the write lock can.
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

// PutMeta implements store.Tx.
func (t *tx) PutMeta(key string, val []byte) error {
	if val == nil {
		val = []byte{}
	}
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	if _, err := t.c.Exec(ctx, t.s.q.putMeta, bs(key), val); err != nil {
		return t.s.writeErr("put meta", err)
	}
	t.wrote = true
	return nil
}

// DeleteMeta implements store.Tx.
func (t *tx) DeleteMeta(key string) error {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	tag, err := t.c.Exec(ctx, t.s.q.delMeta, bs(key))
	if err != nil {
		return t.s.writeErr("delete meta", err)
	}
	if tag.RowsAffected() > 0 {
		t.wrote = true
	}
	return nil
}

// Meta implements store.Tx.
func (t *tx) Meta(key string) ([]byte, bool, error) {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	var v []byte
	err := t.c.QueryRow(ctx, t.s.q.meta, bs(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, t.s.writeErr("meta", err)
	}
	return v, true, nil
}

// Remember implements store.Tx: the set keeps the newest keep keys of scope (keep <= 0: all); a
// key already there is not made newer.
func (t *tx) Remember(scope, key string, keep int) (bool, error) {
	ctx, cancel := t.s.stmtCtx()
	defer cancel()
	var n int64
	if err := t.c.QueryRow(ctx, t.s.q.remember, bs(scope), bs(key), int64(keep)).Scan(&n); err != nil {
		return false, t.s.writeErr("remember", err)
	}
	if n == 0 {
		return false, nil
	}
	t.wrote = true
	return true, nil
}
