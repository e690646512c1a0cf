package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/loomcheck/loomcheck/reference/store"
)

// The check in the background (Options.CheckInBackgroundOver). A large database is not read
// whole at Open: Open checks what is cheap (the write-ahead log after an unclean shutdown, the
// head file against the newest acknowledged event, the leases table), returns, and
// a goroutine then runs the full check (verifyAll) on a reader connection. Until that check has
// passed, nothing is served that was not checked first:
//
//   - a stream (one stream and generation) is read whole the first time it is read or written:
//     every row's checksum, its sequence from 1 without a gap, and the row just before it and
//     just after it in the table's order (a row whose key bytes changed sits among its old
//     neighbours, where this read meets it and its checksum no longer matches);
//   - a remembered scope is read whole, with its neighbours, before its first key is looked up;
//   - a metadata key, or a prefix's range of keys, is read with its neighbours the first time
//     (checkmeta.go).
//
// The limit of the first reads: a key copied into an interior page of the table (where lookups
// are steered) whose bytes changed can send a stream's lookup to the wrong leaf, where it finds
// nothing and neighbours that check: until the background check reaches that page (and refuses
// the store), such a stream reads as empty rather than as damaged.
//
// Once the background check has passed, the reads check what they read as they always do
// (every row's checksum and sequence). When it finds damage, the store refuses every read and
// write from then on with that *store.CorruptError, as Open would have refused the store, and
// records the damage (path + ".damaged") so that the next Open checks the whole database before
// anything is served. A read that finds damage records it the same way. A crash while the check
// runs leaves nothing behind: it writes nothing but that record.

// damagedPath is the record that damage was found in the store at db: Open then checks the whole
// database before serving anything, and removes the record when it finds none.
func damagedPath(db string) string { return db + ".damaged" }

// querier is what the checks read through: the writer's connection (inside its transaction), a
// reader connection or a pool.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// checks is the state of the check in the background.
type checks struct {
	// on: the database is being checked in the background (or was, and it passed or failed).
	on bool
	// record: damage found is recorded beside the database.
	record bool
	passed atomic.Bool
	damage atomic.Pointer[store.CorruptError]
	marked atomic.Bool
	// headN is the number of events the head file vouched for at Open.
	headN int64

	mu      sync.Mutex
	streams map[headKey]struct{}
	scopes  map[string]struct{}
	// metas are the metadata keys ("k:" + key) and prefixes ("p:" + prefix) checked since Open.
	metas map[string]struct{}

	cancel context.CancelFunc
	done   chan struct{}
}

// refused is the damage the background check found, if any.
func (c *checks) refused() error {
	if d := c.damage.Load(); d != nil {
		return d
	}
	return nil
}

// checkStarting, when set (by tests, before Open), runs as the check in the background begins,
// on its goroutine, with its context.
var checkStarting func(ctx context.Context)

// startCheck runs the full check in the background on a reader connection.
func (s *SQLite) startCheck() {
	ctx, cancel := context.WithCancel(context.Background())
	c := &s.chk
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		conn, err := s.r.Conn(ctx)
		if err != nil {
			return
		}
		defer conn.Close()
		if checkStarting != nil {
			checkStarting(ctx)
		}
		n, err := s.verifyAll(ctx, conn)
		if err == nil && n < c.headN {
			err = &store.CorruptError{Path: s.path, Table: "events",
				Reason: fmt.Sprintf("the database holds %d events and had acknowledged %d: commits were lost", n, c.headN)}
		}
		var ce *store.CorruptError
		switch {
		case errors.As(err, &ce):
			c.damage.Store(ce)
			s.noteDamage(ce)
		case err == nil:
			c.passed.Store(true)
			c.mu.Lock()
			c.streams, c.scopes, c.metas = nil, nil, nil
			c.mu.Unlock()
		}
		// Another error (the store closed, killed or cancelled under it) leaves the check
		// unfinished: the reads go on checking what they serve.
	}()
}

// stopCheck ends the background check and waits for it.
func (s *SQLite) stopCheck() {
	if s.chk.cancel != nil {
		s.chk.cancel()
		<-s.chk.done
	}
}

// CheckDone is closed once the check in the background has ended (passed, found damage, or
// stopped with the store), and at once when the store was checked whole at Open.
//
//	<-st.CheckDone()
func (s *SQLite) CheckDone() <-chan struct{} {
	if s.chk.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.chk.done
}

// CheckPassed reports whether every row the store held at Open has been checked: at Open, or in
// the background since.
func (s *SQLite) CheckPassed() bool { return !s.chk.on || s.chk.passed.Load() }

// noteDamage records err, when it is damage, beside the database (once), and returns it.
func (s *SQLite) noteDamage(err error) error {
	if err == nil || !s.chk.record || !errors.Is(err, store.ErrCorrupt) || s.chk.marked.Swap(true) {
		return err
	}
	// Best effort: without the record the next Open still finds the damage when it is read.
	_ = writeFileSync(damagedPath(s.path), []byte(err.Error()+"\n"))
	return err
}

// takeDamaged reports whether damage was recorded at db.
func takeDamaged(db string) (bool, error) { return exists(damagedPath(db)) }

// clearDamaged removes the record of damage once the whole database has been checked again.
func clearDamaged(db string) error {
	if err := os.Remove(damagedPath(db)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return syncDir(filepath.Dir(db))
}

// streamChecked makes sure k was checked before any of it is served: at once when the store was
// checked whole, or k since Open; otherwise k is checked now, through q.
func (s *SQLite) streamChecked(ctx context.Context, q querier, k headKey) error {
	c := &s.chk
	if done, err := c.settled(func() bool { _, ok := c.streams[k]; return ok }); done || err != nil {
		return err
	}
	if err := s.checkStream(ctx, q, k); err != nil {
		return s.noteDamage(err)
	}
	c.mu.Lock()
	if !c.passed.Load() { // once it passed, nothing needs remembering
		if c.streams == nil {
			c.streams = map[headKey]struct{}{}
		}
		c.streams[k] = struct{}{}
	}
	c.mu.Unlock()
	return nil
}

// checkStream reads k whole through q: each row's checksum, the sequence from 1 without a gap,
// and the rows on either side of it.
func (s *SQLite) checkStream(ctx context.Context, q querier, k headKey) error {
	rows, err := q.QueryContext(ctx, `SELECT stream, gen, seq, kind, data, time, sum FROM events WHERE stream = ? AND gen = ? ORDER BY seq`, k.stream, k.gen)
	if err != nil {
		return s.readErr(err)
	}
	var last int64
	var scratch []byte
	for rows.Next() {
		var e store.Event
		var sum sql.NullInt64
		if err := rows.Scan(&e.Stream, &e.Gen, &e.Seq, &e.Kind, &e.Data, &e.Time, &sum); err != nil {
			rows.Close()
			return s.readErr(err)
		}
		// A row out of the table's order (its key bytes changed) can be met by the lookup of
		// the key it had: the key it holds must be the one asked for, and its checksum that of
		// the row it holds.
		if e.Stream != k.stream || e.Gen != k.gen ||
			!checkSum(sum, eventSumBuf(&scratch, k.stream, k.gen, e.Seq, e.Kind, e.Data, e.Time)) {
			rows.Close()
			return &store.CorruptError{Path: s.path, Table: "events", Stream: k.stream, Gen: k.gen, Seq: e.Seq, Reason: "checksum does not match"}
		}
		if e.Seq != last+1 {
			rows.Close()
			return &store.CorruptError{Path: s.path, Table: "events", Stream: k.stream, Gen: k.gen, Seq: e.Seq,
				Reason: fmt.Sprintf("the sequence jumps from %d", last)}
		}
		last = e.Seq
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return s.readErr(err)
	}
	rows.Close()
	for _, nb := range []struct {
		sql   string
		bound int64
	}{
		{`SELECT stream, gen, seq, kind, data, time, sum FROM events WHERE (stream, gen, seq) < (?, ?, ?) ORDER BY stream DESC, gen DESC, seq DESC LIMIT 1`, 0},
		{`SELECT stream, gen, seq, kind, data, time, sum FROM events WHERE (stream, gen, seq) > (?, ?, ?) ORDER BY stream, gen, seq LIMIT 1`, last},
	} {
		if err := s.checkNeighbour(ctx, q, nb.sql, k, nb.bound); err != nil {
			return err
		}
	}
	return nil
}

// checkNeighbour checks the one event row query finds beside k's rows.
func (s *SQLite) checkNeighbour(ctx context.Context, q querier, query string, k headKey, bound int64) error {
	rows, err := q.QueryContext(ctx, query, k.stream, k.gen, bound)
	if err != nil {
		return s.readErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var e store.Event
		var sum sql.NullInt64
		if err := rows.Scan(&e.Stream, &e.Gen, &e.Seq, &e.Kind, &e.Data, &e.Time, &sum); err != nil {
			return s.readErr(err)
		}
		// A neighbour that does not check refuses k when it may be a row of k whose key
		// changed: it names k's stream, or would check if it did. Damage to a row of another
		// stream is that stream's (and the check in the background finds it).
		if !checkSum(sum, eventSum(e.Stream, e.Gen, e.Seq, e.Kind, e.Data, e.Time)) &&
			(e.Stream == k.stream || checkSum(sum, eventSum(k.stream, e.Gen, e.Seq, e.Kind, e.Data, e.Time))) {
			return &store.CorruptError{Path: s.path, Table: "events", Stream: k.stream, Gen: e.Gen, Seq: e.Seq,
				Reason: fmt.Sprintf("a row beside the stream, read as %s/%d/%d, does not check", e.Stream, e.Gen, e.Seq)}
		}
	}
	return s.rowsErr(rows)
}

// scopeChecked makes sure the remembered scope was checked (its rows and their neighbours)
// before a key of it is looked up; q is the writer's connection, inside its transaction.
func (s *SQLite) scopeChecked(ctx context.Context, q querier, scope string) error {
	c := &s.chk
	if done, err := c.settled(func() bool { _, ok := c.scopes[scope]; return ok }); done || err != nil {
		return err
	}
	// A neighbouring row that does not check refuses the scope only when it may be a row of the
	// scope whose key changed: it names the scope, or would check if it did.
	row := func(r *sql.Rows) (string, bool, error) {
		var sc, k string
		var n int64
		var sum sql.NullInt64
		err := r.Scan(&sc, &k, &n, &sum)
		ok := checkSum(sum, rememberedSum(sc, k, n)) || sc != scope && !checkSum(sum, rememberedSum(scope, k, n))
		return sc + "/" + k, ok, err
	}
	for _, qs := range []struct {
		sql  string
		args []any
	}{
		{`SELECT scope, key, n, sum FROM remembered WHERE scope = ?`, []any{scope}},
		{`SELECT scope, key, n, sum FROM remembered WHERE scope < ? ORDER BY scope DESC, key DESC LIMIT 1`, []any{scope}},
		{`SELECT scope, key, n, sum FROM remembered WHERE scope > ? ORDER BY scope, key LIMIT 1`, []any{scope}},
	} {
		if err := s.verifyTable(ctx, q, qs.sql, "remembered", row, qs.args...); err != nil {
			return s.noteDamage(err)
		}
	}
	c.mu.Lock()
	if !c.passed.Load() {
		if c.scopes == nil {
			c.scopes = map[string]struct{}{}
		}
		c.scopes[scope] = struct{}{}
	}
	c.mu.Unlock()
	return nil
}

// checkAtOpen checks the database whole, or (a large one, with opt.CheckInBackgroundOver) its
// leases only, leaving the rest to the check in the background. It returns the
// number of events when it counted them, -1 otherwise. A database whose damage was recorded is
// checked whole, and the record removed when it finds none.
func (s *SQLite) checkAtOpen(ctx context.Context, dbThere bool, opt Options) (int64, error) {
	s.chk.record = opt.CheckInBackgroundOver > 0
	if !dbThere {
		return -1, nil
	}
	marked, err := takeDamaged(s.path)
	if err != nil {
		return 0, fmt.Errorf("store: open %s: %w", s.path, err)
	}
	if !marked && s.chk.record && sizeOf(s.path)+sizeOf(s.path+"-wal") > opt.CheckInBackgroundOver {
		s.chk.on = true
		return -1, s.verifyLeases(ctx, s.w)
	}
	n, err := s.verifyAll(ctx, s.w)
	if err != nil {
		return 0, err
	}
	if marked {
		if err := clearDamaged(s.path); err != nil {
			return 0, fmt.Errorf("store: open %s: %w", s.path, err)
		}
	}
	return n, nil
}

// sizeOf is the size of the file at path, 0 when there is none.
func sizeOf(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// settled says whether a first-read check is already settled: no background check runs, it has
// passed, or seen (called under c.mu) says this stream or scope was checked since Open. A check
// that found damage answers its error.
func (c *checks) settled(seen func() bool) (bool, error) {
	if !c.on {
		return true, nil
	}
	if err := c.refused(); err != nil {
		return true, err
	}
	if c.passed.Load() {
		return true, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return seen(), nil
}
