package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Leases live in the leases table, one row per name, never deleted: a grant bumps the row's token,
// so tokens strictly increase per name for as long as the store exists (a trigger refuses any
// change that would lower one, or remove a row). The lease clock is the database's
// (clock_timestamp(), the time the statement runs, so a grant that waited for a row lock is
// measured from when it was made), the one clock every node shares.

// Lease changes, and Holder, do not wait for the handle's reads and writes (a renewal must not
// queue behind them): they take the pool's connections without a token of usem, and the pool
// always has leaseConns connections the reads and writes cannot hold. Close and Kill wait for the changes
// in flight, so that none reaches the database after them.

// leaseConns is how many connections of the pool only lease changes and Holder may take when the
// reads and writes hold all of theirs.
const leaseConns = 2

// use takes one of the Conns connections the reads and writes share (a token of usem), waiting
// within ctx; done gives it back.
func (s *Postgres) use(ctx context.Context) (done func(), err error) {
	select {
	case s.usem <- struct{}{}:
		return func() { <-s.usem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// beginLeaseChange admits a lease change unless the store is closed or killed.
func (s *Postgres) beginLeaseChange() error {
	s.leaseOps.RLock()
	if s.shut.Load() {
		s.leaseOps.RUnlock()
		return store.ErrClosed
	}
	return nil
}

func (s *Postgres) endLeaseChange() { s.leaseOps.RUnlock() }

// Acquire takes name for holder for ttl, publishing note (store.Leases): it grants a name that
// was never granted, has lapsed, or is held by holder itself (a holder that restarted takes its
// name back at once, with a new token, fencing its earlier incarnation). Every grant's token is
// greater than every earlier grant's of the name.
//
// Errors: store.ErrLeaseHeld, when another holder has the name and it has not lapsed: the error
// is a *store.HeldError naming the grant in force, and that grant is also the Lease returned;
// store.ErrClosed after Close or Kill; ctx's error.
//
//	l, err := st.Acquire(ctx, "engine", "node-1", "10.0.0.7:8080", 5*time.Second)
//	if errors.Is(err, store.ErrLeaseHeld) { /* another node owns it; forward to l.Note */ }
func (s *Postgres) Acquire(ctx context.Context, name, holder, note string, ttl time.Duration) (store.Lease, error) {
	if err := s.beginLeaseChange(); err != nil {
		return store.Lease{}, err
	}
	defer s.endLeaseChange()
	for {
		l, retry, err := s.acquire(ctx, name, holder, note, ttl)
		if !retry {
			return l, err
		}
	}
}

// acquire is one attempt; retry is true when another node created the name's row meanwhile.
func (s *Postgres) acquire(ctx context.Context, name, holder, note string, ttl time.Duration) (l store.Lease, retry bool, err error) {
	l = store.Lease{Name: name, Holder: holder, Note: note}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var cur store.Lease
		var h, n []byte
		var lapsed bool
		err := tx.QueryRow(ctx, s.q.leaseGet, bs(name)).Scan(&h, &n, &cur.Token, &cur.Expires, &lapsed)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = tx.QueryRow(ctx, s.q.leaseInsert, bs(name), bs(holder), bs(note), ttl.Microseconds()).Scan(&l.Token, &l.Expires)
			if errors.Is(err, pgx.ErrNoRows) {
				retry = true
				return nil
			}
			return err
		case err != nil:
			return err
		}
		cur.Name, cur.Holder, cur.Note = name, string(h), string(n)
		if cur.Holder != holder && !lapsed {
			return &store.HeldError{Lease: cur}
		}
		return tx.QueryRow(ctx, s.q.leaseGrant, bs(name), bs(holder), bs(note), ttl.Microseconds()).Scan(&l.Token, &l.Expires)
	})
	var held *store.HeldError
	switch {
	case errors.As(err, &held):
		return held.Lease, false, err
	case err != nil:
		return store.Lease{}, false, s.writeErr("acquire "+name, err)
	}
	return l, retry, nil
}

// Renew extends l by ttl from now, by the database's clock (store.Leases), if l is still the
// newest grant of its name, lapsed or not.
//
// Errors: store.ErrFenced when a newer grant of l.Name exists; store.ErrClosed; ctx's error.
//
//	l, err = st.Renew(ctx, l, 5*time.Second)
func (s *Postgres) Renew(ctx context.Context, l store.Lease, ttl time.Duration) (store.Lease, error) {
	if err := s.beginLeaseChange(); err != nil {
		return store.Lease{}, err
	}
	defer s.endLeaseChange()
	var h, n []byte
	err := s.pool.QueryRow(ctx, s.q.leaseRenew, bs(l.Name), l.Token, ttl.Microseconds()).Scan(&h, &n, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, fmt.Errorf("%w: lease %q token %d is not the newest grant", store.ErrFenced, l.Name, l.Token)
	}
	if err != nil {
		return store.Lease{}, s.writeErr("renew "+l.Name, err)
	}
	l.Holder, l.Note = string(h), string(n)
	return l, nil
}

// Release gives l up: it lapses at once, so any holder may take the name, if l is still the
// newest grant; otherwise it does nothing (store.Leases). Errors: store.ErrClosed; ctx's error.
//
//	defer st.Release(context.Background(), l)
func (s *Postgres) Release(ctx context.Context, l store.Lease) error {
	if err := s.beginLeaseChange(); err != nil {
		return err
	}
	defer s.endLeaseChange()
	if _, err := s.pool.Exec(ctx, s.q.leaseRelease, bs(l.Name), l.Token); err != nil {
		return s.writeErr("release "+l.Name, err)
	}
	return nil
}

// Holder returns the newest grant of name, lapsed or not; ok is false when the name was never
// granted (store.Leases). Errors: store.ErrClosed; ctx's error.
//
//	l, ok, err := st.Holder(ctx, "engine")
func (s *Postgres) Holder(ctx context.Context, name string) (store.Lease, bool, error) {
	if err := s.alive(); err != nil {
		return store.Lease{}, false, err
	}
	// A look at the holder, as a lease change, takes no token: it never waits behind the reads
	// and writes (a follower asks before it forwards each request).
	l := store.Lease{Name: name}
	var h, n []byte
	err := s.pool.QueryRow(ctx, s.q.leaseHolder, bs(name)).Scan(&h, &n, &l.Token, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Lease{}, false, nil
	}
	if err != nil {
		return store.Lease{}, false, s.readErr("holder "+name, err)
	}
	l.Holder, l.Note = string(h), string(n)
	return l, true, nil
}

// Grants returns the newest grant of every name starting with prefix, lapsed and released ones
// included, by name in byte order (store.Leases), from one statement, so one snapshot: a grant
// committed while it reads is wholly in the answer or wholly out. Like Holder it takes none of
// the reads' and writes' connections: a router asks it while they are busy.
//
// Errors: store.ErrClosed; ctx's error.
//
//	ls, err := st.Grants(ctx, "partition/")
//	for _, l := range ls { owners[l.Name] = l.Note }
func (s *Postgres) Grants(ctx context.Context, prefix string) ([]store.Lease, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	q, args := s.q.grantsFrom, []any{bs(prefix)}
	if end, ok := prefixEnd(prefix); ok {
		q, args = s.q.grantsRange, []any{bs(prefix), bs(end)}
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.readErr("grants "+prefix, err)
	}
	defer rows.Close()
	out := []store.Lease{}
	var name, h, n []byte
	for rows.Next() {
		var l store.Lease
		if err := rows.Scan(&name, &h, &n, &l.Token, &l.Expires); err != nil {
			return nil, s.readErr("grants "+prefix, err)
		}
		l.Name, l.Holder, l.Note = string(name), string(h), string(n)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("grants "+prefix, err)
	}
	return out, nil
}

// Fence returns a view of the store whose every Update first checks, in its own transaction and
// holding a share lock on the lease's row until the commit (FOR KEY SHARE: it holds grants, which
// change the row's token, and not renewals), that l.Token is still the newest grant of l.Name; if
// not, fn does not run, nothing is written, and Update answers store.ErrFenced. A grant that
// commits while a fenced write is in flight waits for that write, so every write a view lets
// through precedes the grant that fences it. Reads and subscriptions pass through to
// the store. Closing the view ends the view only (its calls then answer store.ErrClosed); the
// store stays open, and closing the store closes its views.
//
//	fenced := st.Fence(l)
//	err := fenced.Update(ctx, fn) // store.ErrFenced once another node took the lease
func (s *Postgres) Fence(l store.Lease) store.Store { return &Fenced{s: s, lease: l} }

// Fenced is a view of a store fenced by a lease (see Postgres.Fence).
type Fenced struct {
	s      *Postgres
	lease  store.Lease
	closed atomic.Bool
}

var _ store.Store = (*Fenced)(nil)

func (f *Fenced) alive() error {
	if f.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// Lease is the grant the view is fenced by.
//
//	l := fenced.Lease()
func (f *Fenced) Lease() store.Lease { return f.lease }

// Update is Postgres.Update, refused with store.ErrFenced (fn not run, nothing written) when the
// view's lease is no longer the newest grant of its name.
//
//	err := fenced.Update(ctx, func(tx store.Tx) error { _, err := tx.Append(s, 0, h, ev); return err })
func (f *Fenced) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := f.alive(); err != nil {
		return err
	}
	return f.s.update(ctx, &f.lease, fn)
}

// ReadForward is Postgres.ReadForward.
//
//	evs, err := fenced.ReadForward(ctx, "x/exec-1", 0, seen, 256)
func (f *Fenced) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.s.ReadForward(ctx, stream, gen, after, limit)
}

// ReadBackward is Postgres.ReadBackward.
//
//	evs, err := fenced.ReadBackward(ctx, "x/exec-1", 0, math.MaxInt64, 50)
func (f *Fenced) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.s.ReadBackward(ctx, stream, gen, before, limit)
}

// Head is Postgres.Head.
//
//	h, err := fenced.Head(ctx, "x/exec-1", 0)
func (f *Fenced) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	if err := f.alive(); err != nil {
		return 0, err
	}
	return f.s.Head(ctx, stream, gen)
}

// Meta is Postgres.Meta.
//
//	v, ok, err := fenced.Meta(ctx, "exec/exec-1")
func (f *Fenced) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if err := f.alive(); err != nil {
		return nil, false, err
	}
	return f.s.Meta(ctx, key)
}

// MetaPrefix is Postgres.MetaPrefix.
//
//	kvs, err := fenced.MetaPrefix(ctx, "exec/")
func (f *Fenced) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if err := f.alive(); err != nil {
		return nil, err
	}
	return f.s.MetaPrefix(ctx, prefix)
}

// Subscribe is Postgres.Subscribe (a closed view's channel never fires).
//
//	ch, cancel := fenced.Subscribe("x/exec-1")
func (f *Fenced) Subscribe(stream string) (<-chan struct{}, func()) {
	if f.closed.Load() {
		return make(chan struct{}), func() {}
	}
	return f.s.Subscribe(stream)
}

// Close ends the view: its calls answer store.ErrClosed from then on. The store stays open.
//
//	defer fenced.Close()
func (f *Fenced) Close() error {
	f.closed.Store(true)
	return nil
}

// Partitions returns the number of partitions the store's executions are shared out in
// (store.Layout): propose, recorded for good, when the database has none recorded yet (it was
// created empty and nothing asked before), else the count recorded. A database that held
// anything when the schema learnt partitions is at 1. Two handles asking at once on a new
// database agree: the first record wins and both read it.
//
// Errors: store.ErrClosed; a propose below 1 (store.ErrPartitionCount); ctx's error.
//
//	p, err := st.Partitions(ctx, 12)
//	if p != 12 { /* the database was made with another count */ }
func (s *Postgres) Partitions(ctx context.Context, propose int) (int, error) {
	if err := s.alive(); err != nil {
		return 0, err
	}
	if propose < 1 {
		return 0, fmt.Errorf("%w: %d", store.ErrPartitionCount, propose)
	}
	if _, err := s.pool.Exec(ctx, s.q.layoutPut, propose); err != nil {
		return 0, s.readErr("record the partition count", err)
	}
	var p int
	if err := s.pool.QueryRow(ctx, s.q.layoutGet).Scan(&p); err != nil {
		return 0, s.readErr("read the partition count", err)
	}
	return p, nil
}
