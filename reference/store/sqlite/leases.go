package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
)

// SQLite offers ownership with fencing on one machine: the rule of store.Leases, kept in the
// leases table of the database (one row per name: its newest grant, never deleted, so that a
// name's tokens increase for as long as the store lives, across Release and reopens).
var (
	_ store.Store        = (*SQLite)(nil)
	_ store.Killer       = (*SQLite)(nil)
	_ store.WriteCrasher = (*SQLite)(nil)
	_ store.Leases       = (*SQLite)(nil)
)

// Acquire implements store.Leases. It grants name to holder for ttl from now (the store's
// clock, time.Now, to the millisecond; a ttl under a millisecond grants a lease that has lapsed
// already) when the name was never granted, its newest grant has lapsed or was released, or that
// grant is holder's own; the grant's token is one more than the name's newest. A grant to
// another holder that has not lapsed is refused: Acquire then returns that grant and a
// *store.HeldError naming it (errors.Is store.ErrLeaseHeld).
//
// A grant is a durable write (store.WriteCrasher counts it). Errors: store.ErrLeaseHeld,
// store.ErrClosed, *store.CorruptError for a damaged lease row. Safe for concurrent use: grants
// are serialised with every other write.
//
//	l, err := st.Acquire(ctx, "engine", "node-1", "10.0.0.7:8080", 5*time.Second)
//	if errors.Is(err, store.ErrLeaseHeld) { forwardTo(l.Note) }
func (s *SQLite) Acquire(ctx context.Context, name, holder, note string, ttl time.Duration) (store.Lease, error) {
	var got store.Lease
	err := s.update(ctx, func(t *tx) error {
		cur, ok, err := t.lease(name)
		if err != nil {
			return err
		}
		if ok && cur.Holder != holder && cur.Expires.UnixMilli() > t.now {
			got = cur
			return &store.HeldError{Lease: cur}
		}
		got = store.Lease{Name: name, Holder: holder, Note: note, Token: cur.Token + 1, Expires: time.UnixMilli(t.now + ttl.Milliseconds())}
		return t.putLease(got)
	})
	if err != nil && !errors.Is(err, store.ErrLeaseHeld) {
		return store.Lease{}, err
	}
	return got, err
}

// Renew implements store.Leases: while l is the newest grant of its name (lapsed or not), it
// lapses ttl from now instead; the grant keeps its token, so its fenced views keep writing.
//
// Errors: store.ErrFenced when a newer grant of l.Name exists (or l was never granted),
// store.ErrClosed, *store.CorruptError. Safe for concurrent use.
//
//	l, err = st.Renew(ctx, l, 5*time.Second)
//	if errors.Is(err, store.ErrFenced) { stopWorking() }
func (s *SQLite) Renew(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	var got store.Lease
	err := s.update(ctx, func(t *tx) error {
		cur, ok, err := t.lease(l.Name)
		if err != nil {
			return err
		}
		if !ok || cur.Token != l.Token {
			return fencedErr(l, cur, ok)
		}
		cur.Expires = time.UnixMilli(t.now + ttl.Milliseconds())
		got = cur
		return t.putLease(cur)
	})
	if err != nil {
		return store.Lease{}, err
	}
	return got, nil
}

// Release implements store.Leases: while l is the newest grant of its name and has not lapsed,
// it lapses now, and any holder may be granted the name at once (with a greater token). Releasing
// a superseded or lapsed grant changes nothing and is no error.
//
// Errors: store.ErrClosed, *store.CorruptError. Safe for concurrent use.
//
//	defer st.Release(context.Background(), l)
func (s *SQLite) Release(ctx context.Context, l store.Lease) error {
	return s.update(ctx, func(t *tx) error {
		cur, ok, err := t.lease(l.Name)
		if err != nil || !ok || cur.Token != l.Token || cur.Expires.UnixMilli() <= t.now {
			return err
		}
		cur.Expires = time.UnixMilli(t.now)
		return t.putLease(cur)
	})
}

// Holder implements store.Leases: the newest grant of name, lapsed or not; ok is false when the
// name was never granted.
//
// Errors: store.ErrClosed, *store.CorruptError. Safe for concurrent use; it reads every grant
// committed before it began.
//
//	l, ok, err := st.Holder(ctx, "engine")
//	if ok && l.Expires.After(time.Now()) { forwardTo(l.Note) }
func (s *SQLite) Holder(ctx context.Context, name string) (store.Lease, bool, error) {
	if err := s.alive(); err != nil {
		return store.Lease{}, false, err
	}
	l, ok, err := scanLease(s.rs.lease.QueryRowContext(ctx, name), s.path, name)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		err = s.readErr(err)
	}
	return l, ok, err
}

// Grants implements store.Leases: the newest grant of every name starting with prefix, lapsed
// and released ones included, by name in byte order, from one SELECT (so one snapshot of the
// database: a grant committed while it reads is wholly in the answer or wholly out).
//
// Errors: store.ErrClosed, *store.CorruptError for a lease row whose checksum does not match.
// Safe for concurrent use; it reads every grant committed before it began.
//
//	ls, err := st.Grants(ctx, "partition/")
//	for _, l := range ls { owners[l.Name] = l.Note }
func (s *SQLite) Grants(ctx context.Context, prefix string) ([]store.Lease, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	q, args := s.rs.grantsFrom, []any{prefix}
	if end, ok := prefixEnd(prefix); ok {
		q, args = s.rs.grantsRange, []any{prefix, end}
	}
	rows, err := q.QueryContext(ctx, args...)
	if err != nil {
		return nil, s.readErr(err)
	}
	defer rows.Close()
	out := []store.Lease{}
	for rows.Next() {
		var l store.Lease
		var exp int64
		var sum sql.NullInt64
		if err := rows.Scan(&l.Name, &l.Holder, &l.Note, &l.Token, &exp, &sum); err != nil {
			return nil, s.readErr(err)
		}
		if !checkSum(sum, leaseSum(l.Name, l.Holder, l.Note, l.Token, exp)) {
			return nil, &store.CorruptError{Path: s.path, Table: "leases", Key: l.Name, Reason: "checksum does not match"}
		}
		l.Expires = time.UnixMilli(exp)
		out = append(out, l)
	}
	return out, s.rowsErr(rows)
}

// Fence implements store.Leases: a view of the store whose every Update first checks, inside its
// own write transaction, that l.Token is still the newest grant of l.Name; if it is not (or l
// was never granted), fn does not run, nothing is written and Update answers store.ErrFenced.
// Writes are serialised, so no grant can come between the check and the commit. Reads and
// subscriptions pass through to the store.
//
// Close of the view closes the view only: every later call through it answers store.ErrClosed
// (Subscribe excepted: its channel never fires), and the store stays open. It does not wait for
// an Update through the view in progress. Closing the store closes every view of it.
//
//	fenced := st.Fence(l)
//	err := fenced.Update(ctx, func(tx store.Tx) error { _, err := tx.Append("x", 0, -1, ev); return err })
//	if errors.Is(err, store.ErrFenced) { stopWorking() }
func (s *SQLite) Fence(l store.Lease) store.Store { return &fenced{s: s, l: l} }

// fenced is the view Fence returns.
type fenced struct {
	s      *SQLite
	l      store.Lease
	closed atomic.Bool
}

func (f *fenced) alive() error {
	if f.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

func (f *fenced) Update(ctx context.Context, fn func(store.Tx) error) error {
	return f.submit(ctx, false, fn)
}

// UpdateRelaxed is the store's UpdateRelaxed, fenced as Update is (store.Relaxed).
func (f *fenced) UpdateRelaxed(ctx context.Context, fn func(store.Tx) error) error {
	return f.submit(ctx, true, fn)
}

// LossEpoch is the store's (store.Relaxed).
func (f *fenced) LossEpoch() int64 { return f.s.LossEpoch() }

// SyncRelaxed is the store's (store.RelaxedSync); a sync writes nothing, so nothing is fenced.
func (f *fenced) SyncRelaxed(ctx context.Context) error {
	if err := f.alive(); err != nil {
		return err
	}
	return f.s.SyncRelaxed(ctx)
}

func (f *fenced) submit(ctx context.Context, relaxed bool, fn func(store.Tx) error) error {
	if err := f.alive(); err != nil {
		return err
	}
	return f.s.submit(ctx, relaxed, func(t *tx) error {
		cur, ok, err := t.lease(f.l.Name)
		if err != nil {
			return err
		}
		if !ok || cur.Token != f.l.Token {
			return fencedErr(f.l, cur, ok)
		}
		return fn(t)
	})
}

func (f *fenced) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.s.ReadForward(ctx, stream, gen, after, limit)
}

func (f *fenced) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.s.ReadBackward(ctx, stream, gen, before, limit)
}

func (f *fenced) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	if err := f.alive(); err != nil {
		return 0, err
	}
	return f.s.Head(ctx, stream, gen)
}

func (f *fenced) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if err := f.alive(); err != nil {
		return nil, false, err
	}
	return f.s.Meta(ctx, key)
}

func (f *fenced) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.s.MetaPrefix(ctx, prefix)
}

func (f *fenced) Subscribe(stream string) (<-chan struct{}, func()) {
	if f.closed.Load() {
		return make(chan struct{}), func() {}
	}
	return f.s.Subscribe(stream)
}

func (f *fenced) Close() error {
	f.closed.Store(true)
	return nil
}

// fencedErr is store.ErrFenced for a write under l when the newest grant of its name is cur (ok
// false: the name was never granted).
func fencedErr(l, cur store.Lease, ok bool) error {
	if !ok {
		return fmt.Errorf("%w: lease %s was never granted (token %d)", store.ErrFenced, l.Name, l.Token)
	}
	return fmt.Errorf("%w: lease %s token %d, the newest grant is token %d to %s", store.ErrFenced, l.Name, l.Token, cur.Token, cur.Holder)
}

// scanLease reads the grant of name from row (leaseQuery), checking its checksum: a
// *store.CorruptError for a row that does not check, the database's own error otherwise.
func scanLease(row rowScanner, path, name string) (store.Lease, bool, error) {
	l := store.Lease{Name: name}
	var exp int64
	var sum sql.NullInt64
	err := row.Scan(&l.Holder, &l.Note, &l.Token, &exp, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Lease{}, false, nil
	}
	if err != nil {
		return store.Lease{}, false, err
	}
	if !checkSum(sum, leaseSum(name, l.Holder, l.Note, l.Token, exp)) {
		return store.Lease{}, false, &store.CorruptError{Path: path, Table: "leases", Key: name, Reason: "checksum does not match"}
	}
	l.Expires = time.UnixMilli(exp)
	return l, true, nil
}

// lease reads the newest grant of name inside the transaction.
func (t *tx) lease(name string) (store.Lease, bool, error) {
	if err := t.usable(); err != nil {
		return store.Lease{}, false, err
	}
	l, ok, err := scanLease(t.s.ws.lease.QueryRow(name), t.s.path, name)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		err = fmt.Errorf("store: lease %s: %w", name, err)
	}
	return l, ok, err
}

// putLease records l as the newest grant of its name.
func (t *tx) putLease(l store.Lease) error {
	exp := l.Expires.UnixMilli()
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.s.exec(t.s.ws.putLease, l.Name, l.Holder, l.Note, l.Token, exp, leaseSum(l.Name, l.Holder, l.Note, l.Token, exp)); err != nil {
		return fmt.Errorf("store: lease %s: %w", l.Name, err)
	}
	t.wrote = true
	return nil
}
