package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/store"
)

// exec runs one of the writer's statements. The writer's statements never take a caller's
// context: a statement interrupted half way could roll the whole batch back.
func (s *SQLite) exec(st *lazyStmt, args ...any) error {
	_, err := st.Exec(args...)
	return err
}

// tx is one Update's view of the transaction it runs in.
type tx struct {
	s   *SQLite
	now int64
	// touched are the streams appended to, each once.
	touched []string
	wrote   bool // something durable changed
	// appended is the number of events appended, bytes their kinds' and data's size.
	appended, bytes int64
	// undo puts back the heads of pending this Update changed.
	undo []headUndo
	// chg is what the Update wrote, applied to the view once it has committed.
	chg applied
}

// usable refuses every statement of a transaction SQLite has rolled back on its own: it would
// run outside any transaction, and commit at once.
func (t *tx) usable() error {
	if t.s.lost.Load() {
		return errTxLost
	}
	return nil
}

// known is the head of k as this transaction sees it, when the writer knows it without a read.
func (t *tx) known(k headKey) (int64, bool) {
	if h, ok := t.s.b.pending[k]; ok {
		return h, true
	}
	return t.s.heads.get(k)
}

// moved records that this transaction moved k's head to h.
func (t *tx) moved(k headKey, h int64) {
	b := &t.s.b
	if b.pending == nil {
		b.pending = make(map[headKey]int64)
	}
	old, ok := b.pending[k]
	t.undo = append(t.undo, headUndo{k: k, h: old, ok: ok})
	b.pending[k] = h
}

// readHead reads k's head from the events table. k is not in pending, so what it reads is the
// committed head, which the cache of committed heads keeps.
func (t *tx) readHead(k headKey) (int64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	if err := t.s.streamChecked(context.Background(), t.s.wc, k); err != nil {
		return 0, err
	}
	var h int64
	if err := t.s.ws.head.QueryRow(k.stream, k.gen).Scan(&h); err != nil {
		return 0, fmt.Errorf("store: head: %w", err)
	}
	t.s.heads.put(k, h)
	return h, nil
}

// has reports whether k holds the event seq.
func (t *tx) has(k headKey, seq int64) (bool, error) {
	if err := t.usable(); err != nil {
		return false, err
	}
	if err := t.s.streamChecked(context.Background(), t.s.wc, k); err != nil {
		return false, err
	}
	var ok bool
	if err := t.s.ws.has.QueryRow(k.stream, k.gen, seq).Scan(&ok); err != nil {
		return false, fmt.Errorf("store: head: %w", err)
	}
	return ok, nil
}

// conflict is store.ErrConflict for an Append to k expecting expect; it reads the actual head
// for the message when the writer does not know it.
func (t *tx) conflict(k headKey, expect int64) error {
	h, ok := t.known(k)
	if !ok {
		var err error
		if h, err = t.readHead(k); err != nil {
			return fmt.Errorf("%w: %s/%d head is not %d (%v)", store.ErrConflict, k.stream, k.gen, expect, err)
		}
	}
	return fmt.Errorf("%w: %s/%d head %d, expected %d", store.ErrConflict, k.stream, k.gen, h, expect)
}

// Head implements store.Tx.
func (t *tx) Head(stream string, gen int64) (int64, error) {
	k := headKey{stream, gen}
	if h, ok := t.known(k); ok {
		return h, nil
	}
	return t.readHead(k)
}

// Append implements store.Tx. With expect >= 0 the head is not read: when the writer knows the
// head it compares, and otherwise the first event is inserted at expect+1 after checking that
// seq expect exists, so that the primary key refuses an expectation behind the head and the
// check one ahead of it: either way the answer is store.ErrConflict, and no gap can be made.
func (t *tx) Append(stream string, gen, expect int64, evs ...store.NewEvent) (int64, error) {
	k := headKey{stream, gen}
	h, known := t.known(k)
	switch {
	case known:
		if expect >= 0 && h != expect {
			return 0, t.conflict(k, expect)
		}
	case expect < 0:
		var err error
		if h, err = t.readHead(k); err != nil {
			return 0, err
		}
	default:
		if expect > 0 {
			ok, err := t.has(k, expect)
			if err != nil {
				return 0, err
			}
			if !ok {
				return 0, t.conflict(k, expect)
			}
		}
		if len(evs) == 0 {
			ok, err := t.has(k, expect+1)
			if err != nil {
				return 0, err
			}
			if ok {
				return 0, t.conflict(k, expect)
			}
			t.s.heads.put(k, expect)
			return expect, nil
		}
		h = expect
	}
	if len(evs) == 0 {
		return h, nil
	}
	if err := t.usable(); err != nil {
		return 0, err
	}
	return t.insertEvents(k, stream, gen, expect, h, evs)
}

// insertEvents is Append's insert of evs after head h of k (stream, gen), which the caller
// expected at expect; it returns the new head.
func (t *tx) insertEvents(k headKey, stream string, gen, expect, h int64, evs []store.NewEvent) (int64, error) {
	// The events go in rows of up to insertRows per statement; a statement inserts all its rows
	// or none. The view keeps copies of the events of the streams it caches only.
	cached := t.s.view.cached(stream)
	args := t.s.b.args[:0]
	for i := 0; i < len(evs); {
		chunk := evs[i:min(len(evs), i+insertRows)]
		args = args[:0]
		for j, e := range chunk {
			seq := h + 1 + int64(j)
			args = append(args, stream, gen, seq, e.Kind, e.Data, t.now,
				eventSumBuf(&t.s.b.scratch, stream, gen, seq, e.Kind, e.Data, t.now))
		}
		_, err := t.s.ws.insert[len(chunk)].Exec(args...)
		clear(args)
		if err != nil {
			if i > 0 {
				// What was inserted stays in the transaction unless fn gives up: its head too.
				t.appended1(k, stream, h)
			}
			if i == 0 && sqliteCode(err) == sqliteConstraint {
				// The head is past the one expected (or past the one the writer knew, which
				// only a write bypassing the store could do): the head is read again.
				t.s.heads.drop(k)
				t.s.view.drop(k)
				return 0, t.conflict(k, expect)
			}
			return 0, fmt.Errorf("store: append %s/%d: %w", stream, gen, err)
		}
		for _, e := range chunk {
			h++
			if cached {
				t.chg.evs = append(t.chg.evs, store.Event{Stream: stream, Gen: gen, Seq: h, Kind: e.Kind,
					Data: append([]byte(nil), e.Data...), Time: t.now})
			}
			t.appended++
			t.bytes += int64(len(e.Kind) + len(e.Data))
		}
		i += len(chunk)
	}
	t.s.b.args = args
	t.appended1(k, stream, h)
	return h, nil
}

// appended1 records one Append's outcome: k's head is now h.
func (t *tx) appended1(k headKey, stream string, h int64) {
	t.moved(k, h)
	t.touch(stream)
	t.wrote = true
}

// sqliteConstraint is SQLITE_CONSTRAINT: on the events table, only its primary key.
const sqliteConstraint = 19

// touch records an append to stream.
func (t *tx) touch(stream string) {
	for _, s := range t.touched {
		if s == stream {
			return
		}
	}
	t.touched = append(t.touched, stream)
}

// PutMeta implements store.Tx.
func (t *tx) PutMeta(key string, val []byte) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.s.exec(t.s.ws.putMeta, key, val, metaSum(key, val)); err != nil {
		return fmt.Errorf("store: put meta %s: %w", key, err)
	}
	t.chg.metas = append(t.chg.metas, metaPut{key: key, val: append([]byte(nil), val...)})
	t.wrote = true
	return nil
}

// DeleteMeta implements store.Tx.
func (t *tx) DeleteMeta(key string) error {
	if err := t.usable(); err != nil {
		return err
	}
	res, err := t.s.ws.delMeta.Exec(key)
	if err != nil {
		return fmt.Errorf("store: delete meta %s: %w", key, err)
	}
	t.chg.metas = append(t.chg.metas, metaPut{key: key, gone: true})
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		t.wrote = true // deleting a key that is not there changes nothing
	}
	return nil
}

// Meta implements store.Tx.
func (t *tx) Meta(key string) ([]byte, bool, error) {
	if err := t.usable(); err != nil {
		return nil, false, err
	}
	if err := t.s.metaChecked(context.Background(), t.s.wc, key); err != nil {
		return nil, false, err
	}
	var v []byte
	var sum sql.NullInt64
	err := t.s.ws.meta.QueryRow(key).Scan(&v, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: meta %s: %w", key, err)
	}
	if !checkSum(sum, metaSum(key, v)) {
		return nil, false, &store.CorruptError{Path: t.s.path, Table: "meta", Key: key, Reason: "checksum does not match"}
	}
	return v, true, nil
}

// Remembered sets. A key's row holds its number in its scope (1, 2, 3... in the order keys were
// added); the key is remembered while its number is among the newest keep. The writer knows the
// newest number of each scope it has met (kept with the heads, under topKey), so adding a new key
// is one insert, which reads nothing else. A key that leaves the window is not deleted at once:
// the scope is swept every forgetEvery keys, and until then a lookup that finds it judges it by
// its number, so the answers are those of a set that forgets at once. The table has no index by
// number: each key added writes one B-tree, and a sweep reads the scope's rows (at most keep +
// forgetEvery of them) through the primary key, once in forgetEvery keys.
const forgetEvery = 256

// topKey is where the heads keep scope's newest number: no stream has a negative generation.
func topKey(scope string) headKey { return headKey{stream: scope, gen: -1} }

// Remember implements store.Tx. The key is inserted with the next number first: a key the scope
// does not hold (the usual case) costs that one statement. Only when the scope holds it already
// is its row read, checked, and judged by its number.
func (t *tx) Remember(scope, key string, keep int) (bool, error) {
	if err := t.usable(); err != nil {
		return false, err
	}
	ws := &t.s.ws
	top, err := t.top(scope)
	if err != nil {
		return false, err
	}
	n := top + 1
	res, err := ws.rememberNew.Exec(scope, key, n, rememberedSum(scope, key, n))
	if err != nil {
		return false, fmt.Errorf("store: remember: %w", err)
	}
	added, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store: remember: %w", err)
	}
	if added == 0 { // the scope holds the key already
		var old int64
		var sum sql.NullInt64
		if err := ws.remembered.QueryRow(scope, key).Scan(&old, &sum); err != nil {
			return false, fmt.Errorf("store: remember: %w", err)
		}
		if !checkSum(sum, rememberedSum(scope, key, old)) {
			return false, &store.CorruptError{Path: t.s.path, Table: "remembered", Key: scope + "/" + key, Reason: "checksum does not match"}
		}
		if keep <= 0 || old > top-int64(keep) {
			return false, nil
		}
		// Forgotten, not swept yet: it comes back as the newest.
		if err := t.s.exec(ws.renumber, n, rememberedSum(scope, key, n), scope, key); err != nil {
			return false, fmt.Errorf("store: remember: %w", err)
		}
	}
	t.moved(topKey(scope), n)
	t.wrote = true
	if keep > 0 && n > int64(keep) && n%forgetEvery == 0 {
		if err := t.s.exec(ws.forget, scope, n-int64(keep)); err != nil {
			return false, fmt.Errorf("store: forget: %w", err)
		}
	}
	return true, nil
}

// top is scope's newest number as this transaction sees it, 0 for an empty scope.
func (t *tx) top(scope string) (int64, error) {
	k := topKey(scope)
	if h, ok := t.known(k); ok {
		return h, nil
	}
	if err := t.s.scopeChecked(context.Background(), t.s.wc, scope); err != nil {
		return 0, err
	}
	var top int64
	if err := t.s.ws.rememberTop.QueryRow(scope).Scan(&top); err != nil {
		return 0, fmt.Errorf("store: remember: %w", err)
	}
	t.s.heads.put(k, top) // not in pending: what was read is committed
	return top, nil
}
