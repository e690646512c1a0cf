package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Group commit: Updates that wait for the writer while a commit is in progress share the next
// transaction and its one sync.
//
// Every Update queues a request. The request at the front of the queue leads: it takes the
// writer (wmu), begins a transaction and runs its own fn in it; then, while requests are queued
// and the batch is within its bounds, it hands the transaction to the next one, whose goroutine
// runs its fn in a savepoint of its own and hands the transaction back. The leader commits once,
// tells each member its own outcome, and hands the lead to the request now at the front, which
// batches whatever queued meanwhile. A lone writer leads at once and commits alone: nobody waits
// for company.
//
// Each fn runs on its caller's goroutine, so a panic (or runtime.Goexit) in fn unwinds the
// caller as it would without batching, after its savepoint is rolled back.
//
// What each Update is told and counted is its own:
//
//   - fn's error rolls back its savepoint only: its appends, metadata, remembered keys and lease
//     changes, and the heads it moved (the first Update of a transaction rolls the transaction
//     back instead, which holds nothing else);
//   - the crash hook counts durable writes per Update, in the order they ran: when the armed
//     write is a member of a batch, the batch ends with it, commits (it and the members before
//     it) and the store dies; it answers store.ErrCrashed and every Update after it
//     store.ErrClosed;
//   - subscribers are told of the streams of the members that committed, before any member
//     returns;
//   - a failed commit fails every member that had succeeded, with the commit's error.
//
// A transaction SQLite rolled back on its own (an I/O error, a full disk) is noticed through the
// connection's rollback hook: nothing more runs in it, and every member that had succeeded in it
// is told it failed.

// The bounds of a batch: at most batchMaxUpdates Updates, and no Update joins once the events
// appended reach batchMaxBytes (of kinds and data).
const (
	batchMaxUpdates = 128
	batchMaxBytes   = 4 << 20
)

// errTxLost is what the members of a transaction SQLite rolled back on its own are told.
var errTxLost = errors.New("store: the transaction was rolled back by the database")

// errFnDidNotReturn is the outcome recorded for an Update whose fn panicked or ended its
// goroutine (the caller never sees it: the panic unwinds it).
var errFnDidNotReturn = errors.New("store: the update's function did not return")

// turn is what a queued request's goroutine is told to do next.
type turn uint8

const (
	turnRun  turn = iota + 1 // run fn in the transaction in progress, then hand it back
	turnDone                 // the outcome is in err
	turnLead                 // lead the next batch
)

// request is one Update.
type request struct {
	ctx context.Context
	fn  func(*tx) error
	// turn is nil for a request that leads at once; otherwise buffered, so that the leader never
	// waits to tell it.
	turn chan turn
	t    tx
	err  error
	// ok: fn returned nil and its work stands in the transaction in progress.
	ok bool
	// relaxed: the Update does not wait for the disk (UpdateRelaxed).
	relaxed bool
}

// batch is the state of the transaction in progress, owned by whoever holds the transaction:
// the leader (holding wmu), or a member running its fn while the leader waits on back.
type batch struct {
	inTx bool
	// relaxed: every member so far is relaxed, and the transaction commits without waiting for
	// the disk (relaxed.go); a batch led by an Update that waits takes relaxed members too.
	relaxed bool
	// broken is set when the transaction can no longer be trusted to commit what it holds: it
	// is rolled back, and every member that had succeeded in it fails with this error.
	broken error
	// back is where a member hands the transaction back to the leader.
	back    chan struct{}
	members []*request
	bytes   int64
	writes  int64    // members that wrote, in this transaction
	armed   *request // the member whose write is the one the crash hook was armed for
	pending map[headKey]int64
	scratch []byte
	args    []any
	changes []*applied
}

// Update implements store.Store: fn runs in a write transaction, on the caller's goroutine, and
// its work commits whole or not at all.
//
// Updates are serialised, in the order they queue; Updates that queue while another commit is
// in progress share the next transaction and its one sync (group commit, at most 128 Updates or
// 4 MiB of appended events at a time), each fn in a savepoint of its own: fn sees what the
// Updates before it did, its error undoes only its own work, and each caller is told its own
// outcome. Subscribers of the streams fn appended to are signalled after the commit, before
// Update returns. A lone Update commits at once: it never waits for others to join.
//
// Errors: fn's own error (nothing of fn's is kept); store.ErrConflict (wrapped) from an Append
// whose expected head did not hold; store.ErrClosed after Close or Kill; store.ErrCrashed from
// the write the crash hook was armed for; ctx's error when ctx ended before fn ran (fn then does
// not run; once begun, the write is not cancelled); a wrapped database error when the
// transaction could not commit (every Update that shared it is told so). A panic in fn unwinds
// the caller after fn's work is rolled back; the other Updates are not affected.
//
// Do not call the store's writing methods (Update, the leases' changes) from inside fn: it waits
// for the write fn is part of.
//
//	err := st.Update(ctx, func(tx store.Tx) error {
//		_, err := tx.Append("x/exec-1", 0, head, store.NewEvent{Kind: "decided", Data: b})
//		return err
//	})
func (s *SQLite) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.noteDamage(s.update(ctx, func(t *tx) error { return fn(t) }))
}

// update runs fn as one Update: Update, the fenced views' Update and the lease writes all go
// through it. It returns fn's error, or the error of the transaction fn ran in.
func (s *SQLite) update(ctx context.Context, fn func(*tx) error) error {
	return s.submit(ctx, false, fn)
}

// submit queues fn as one Update, relaxed or not, and returns its outcome.
func (s *SQLite) submit(ctx context.Context, relaxed bool, fn func(*tx) error) error {
	if err := s.chk.refused(); err != nil {
		return err // the check in the background found damage: nothing more is written
	}
	r := &request{ctx: ctx, fn: fn, relaxed: relaxed}
	s.qmu.Lock()
	lead := !s.leading
	if !lead {
		r.turn = make(chan turn, 1)
	}
	s.leading = true
	s.queue = append(s.queue, r)
	s.qmu.Unlock()
	for !lead {
		switch <-r.turn {
		case turnRun:
			s.runMember(r)
		case turnDone:
			return r.err
		case turnLead:
			lead = true
		}
	}
	s.lead(r)
	return r.err
}

// runMember runs r's fn on r's goroutine while the leader waits, and hands the transaction back
// whatever fn does (returns, panics, ends the goroutine).
func (s *SQLite) runMember(r *request) {
	defer func() { s.b.back <- struct{}{} }()
	s.run(r)
}

// pop takes the request at the front of the queue, nil when there is none.
func (s *SQLite) pop() *request {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.qhead == len(s.queue) {
		return nil
	}
	r := s.queue[s.qhead]
	s.queue[s.qhead] = nil
	s.qhead++
	switch {
	case s.qhead == len(s.queue):
		s.queue, s.qhead = s.queue[:0], 0
	case s.qhead >= 64 && s.qhead*2 >= len(s.queue):
		n := copy(s.queue, s.queue[s.qhead:])
		clear(s.queue[n:])
		s.queue, s.qhead = s.queue[:n], 0
	}
	return r
}

// nextWaits reports whether the request at the front of the queue waits for the disk: it does
// not join a relaxed batch, whose durability is settled before its transaction begins.
func (s *SQLite) nextWaits() bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return s.qhead < len(s.queue) && !s.queue[s.qhead].relaxed
}

// handOff gives the lead to the request at the front of the queue, if any.
func (s *SQLite) handOff() {
	s.qmu.Lock()
	if s.qhead == len(s.queue) {
		s.leading = false
		s.qmu.Unlock()
		return
	}
	next := s.queue[s.qhead]
	s.qmu.Unlock()
	next.turn <- turnLead
}

// lead runs one batch, me (the front of the queue) first.
func (s *SQLite) lead(me *request) {
	s.wmu.Lock()
	if s.pop() != me {
		panic("store: the leader of a batch is not the front of the queue")
	}
	if s.closed {
		s.refuseAll(me)
		return
	}
	b := &s.b
	b.members = append(b.members[:0], me)
	b.bytes, b.writes, b.armed, b.broken = 0, 0, nil, nil
	b.relaxed = me.relaxed
	s.syncMode(b.relaxed)
	returned := false
	defer func() {
		if !returned {
			// me's fn panicked or ended the goroutine: run has rolled its work back, and it was
			// the transaction's first. The lead passes on; the panic goes on up.
			s.wmu.Unlock()
			s.handOff()
		}
	}()
	s.run(me)
	returned = true
	s.counted(me)
	for b.broken == nil && b.armed == nil && len(b.members) < batchMaxUpdates && b.bytes < batchMaxBytes {
		if b.relaxed && !s.normal && s.nextWaits() {
			break // it leads the next batch, which waits for the disk (a SyncNormal store never does)
		}
		r := s.pop()
		if r == nil {
			break
		}
		b.members = append(b.members, r)
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		r.turn <- turnRun
		<-b.back
		s.counted(r)
	}
	s.finish()
	for _, r := range b.members[1:] {
		r.turn <- turnDone
	}
	clear(b.members)
	b.members = b.members[:0]
	s.wmu.Unlock()
	s.handOff()
}

// refuseAll answers store.ErrClosed to me and to every queued request (the store is closed),
// with wmu held; it releases wmu.
func (s *SQLite) refuseAll(me *request) {
	s.qmu.Lock()
	q := s.queue[s.qhead:]
	s.queue, s.qhead, s.leading = nil, 0, false
	s.qmu.Unlock()
	s.wmu.Unlock()
	me.err = store.ErrClosed
	for _, r := range q {
		r.err = store.ErrClosed
		r.turn <- turnDone
	}
}

// counted notes a member that ran: its bytes, its durable write, and whether that write is the
// one the crash hook is armed for. It also notices a transaction SQLite rolled back under it.
func (s *SQLite) counted(r *request) {
	b := &s.b
	if b.inTx && b.broken == nil && s.lost.Load() {
		b.broken = errTxLost
	}
	if !r.ok || b.broken != nil {
		return
	}
	b.bytes += r.t.bytes
	if r.t.wrote {
		b.writes++
		if s.crashAt > 0 && s.writes.Load()+b.writes == s.crashAt {
			b.armed = r
		}
	}
}

// run runs r's fn in the transaction in progress, beginning one when none is open (r is then
// its first Update and needs no savepoint), and records the outcome in r.
func (s *SQLite) run(r *request) {
	b := &s.b
	r.t = tx{s: s, now: time.Now().UnixMilli()}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return
	}
	first := !b.inTx
	if first {
		if err := s.exec(s.ws.begin); err != nil {
			r.err = fmt.Errorf("store: begin: %w", err)
			return
		}
		b.inTx = true
		s.lost.Store(false)
	} else if err := s.exec(s.ws.savepoint); err != nil {
		r.err = fmt.Errorf("store: savepoint: %w", err)
		b.broken = r.err
		return
	}
	returned := false
	defer func() {
		if !returned {
			r.err = errFnDidNotReturn
			s.rollback(r, first)
		}
	}()
	err := r.fn(&r.t)
	returned = true
	if err == nil && s.lost.Load() {
		err = errTxLost // SQLite rolled the transaction back under fn
	}
	if err != nil {
		r.err = err
		s.rollback(r, first)
		return
	}
	if !first {
		if err := s.exec(s.ws.release); err != nil {
			r.err = fmt.Errorf("store: release savepoint: %w", err)
			b.broken = r.err
			s.rollback(r, false)
			return
		}
	}
	r.ok = true
}

// rollback undoes what r did: its savepoint, or the whole transaction when r was its first.
func (s *SQLite) rollback(r *request, first bool) {
	b := &s.b
	for i := len(r.t.undo) - 1; i >= 0; i-- {
		u := r.t.undo[i]
		if u.ok {
			b.pending[u.k] = u.h
		} else {
			delete(b.pending, u.k)
		}
	}
	r.t.undo = r.t.undo[:0]
	if first {
		b.inTx = false
		clear(b.pending)
		if s.lost.Load() {
			return // SQLite rolled it back already
		}
		if err := s.exec(s.ws.rollback); err != nil {
			b.broken = fmt.Errorf("store: rollback: %w", err)
		}
		return
	}
	if s.lost.Load() {
		// SQLite rolled the whole transaction back, the work of the Updates before r with it.
		if b.broken == nil {
			b.broken = errTxLost
		}
		return
	}
	if err := s.exec(s.ws.rollbackTo); err != nil {
		b.broken = fmt.Errorf("store: rollback to savepoint: %w", err)
		return
	}
	if err := s.exec(s.ws.release); err != nil {
		b.broken = fmt.Errorf("store: release savepoint: %w", err)
	}
}

// finish commits the transaction in progress (or rolls it back when it is broken), then tells
// the store what committed: the event count and its head file, the durable writes and the crash
// hook, the heads, the subscribers. wmu is held.
func (s *SQLite) finish() {
	b := &s.b
	var failed error
	held := false // the view, from before the COMMIT until it holds the outcome
	if b.inTx && b.broken == nil && s.lost.Load() {
		b.broken = errTxLost
	}
	switch {
	case b.broken != nil:
		_ = s.exec(s.ws.rollback) // whether or not a transaction is still open
		failed = b.broken
	case b.inTx:
		s.view.hold()
		held = true
		if err := s.exec(s.ws.commit); err != nil {
			// Whether a failed COMMIT kept anything is not known: the heads are read again.
			_ = s.exec(s.ws.rollback)
			failed = fmt.Errorf("store: commit: %w", err)
		} else {
			s.commits.Add(1)
		}
	}
	b.inTx = false
	if failed != nil {
		clear(b.pending)
		s.heads.reset()
		if held {
			s.view.resetHeld()
		}
		for _, r := range b.members {
			if r.ok {
				r.ok, r.err = false, failed
			}
		}
		return
	}
	for k, h := range b.pending {
		s.heads.put(k, h)
		if k.gen >= 0 {
			s.newest = newestEvent{k: k, seq: h, ok: true} // for the head file: an event this commit appended
		}
	}
	changes := b.changes[:0]
	for _, r := range b.members {
		if r.ok {
			changes = append(changes, &r.t.chg)
		}
	}
	if held {
		s.view.commitHeld(changes, b.pending)
	}
	clear(changes)
	b.changes = changes[:0]
	clear(b.pending)
	var appended int64
	for _, r := range b.members {
		if r.ok {
			appended += r.t.appended
		}
	}
	s.events += appended
	s.noteHead(appended > 0, b.writes > 0, b.relaxed)
	s.writes.Add(b.writes)
	s.subMu.Lock()
	for _, r := range b.members {
		if r.ok && r != b.armed {
			s.notifyLocked(r.t.touched)
		}
	}
	s.subMu.Unlock()
	if b.armed != nil {
		b.armed.err = store.ErrCrashed
		s.die()
	}
}
