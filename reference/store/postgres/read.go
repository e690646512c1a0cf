package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/loomcheck/loomcheck/reference/store"
)

// ReadForward returns up to limit events (at most store.MaxRead; limit <= 0 means the most) of
// (stream, gen) with Seq > after, oldest first. It sees every commit made before it began, by
// any handle.
//
// Errors: a *store.CorruptError (store.ErrCorrupt) when the events read are not consecutive
// (a gap); store.ErrClosed after Close or Kill; ctx's error when ctx ends first.
//
//	evs, err := st.ReadForward(ctx, "x/exec-1", 0, seen, 256)
func (s *Postgres) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	evs, err := s.readEvents(ctx, s.q.readForward, stream, gen, after, clampLimit(limit))
	if err != nil {
		return nil, err
	}
	// Sequences run 1, 2, 3... without a gap: the first event after `after` is after+1.
	next := max(after, 0) + 1
	for _, e := range evs {
		if e.Seq != next {
			return nil, &store.CorruptError{Path: s.where, Table: "events", Stream: stream, Gen: gen, Seq: e.Seq,
				Reason: fmt.Sprintf("read in place of seq %d", next)}
		}
		next++
	}
	return evs, nil
}

// ReadBackward returns up to limit events (at most store.MaxRead) of (stream, gen) with
// Seq < before, newest first. Errors as ReadForward; a read that reaches the stream's oldest
// event checks that it is seq 1.
//
//	evs, err := st.ReadBackward(ctx, "x/exec-1", 0, math.MaxInt64, 50)
func (s *Postgres) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	limit = clampLimit(limit)
	evs, err := s.readEvents(ctx, s.q.readBackward, stream, gen, before, limit)
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq-1 {
			return nil, &store.CorruptError{Path: s.where, Table: "events", Stream: stream, Gen: gen, Seq: evs[i].Seq,
				Reason: fmt.Sprintf("read in place of seq %d", evs[i-1].Seq-1)}
		}
	}
	if n := len(evs); n > 0 && evs[n-1].Seq != 1 && n < limit {
		return nil, &store.CorruptError{Path: s.where, Table: "events", Stream: stream, Gen: gen, Seq: evs[n-1].Seq,
			Reason: "the stream's oldest event is not seq 1"}
	}
	return evs, nil
}

func (s *Postgres) readEvents(ctx context.Context, q, stream string, gen, bound int64, limit int) ([]store.Event, error) {
	done, err := s.use(ctx)
	if err != nil {
		return nil, s.readErr("read "+stream, err)
	}
	defer done()
	rows, err := s.pool.Query(ctx, q, bs(stream), gen, bound, limit)
	if err != nil {
		return nil, s.readErr("read "+stream, err)
	}
	defer rows.Close()
	out := make([]store.Event, 0, min(limit, 64))
	var kind []byte
	for rows.Next() {
		e := store.Event{Stream: stream, Gen: gen}
		if err := rows.Scan(&e.Seq, &kind, &e.Data, &e.Time); err != nil {
			return nil, s.readErr("read "+stream, err)
		}
		e.Kind = string(kind)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("read "+stream, err)
	}
	return out, nil
}

// Head returns the newest Seq of (stream, gen), 0 when it is empty. Errors: store.ErrClosed after
// Close or Kill; ctx's error.
//
//	h, err := st.Head(ctx, "x/exec-1", 0)
func (s *Postgres) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	if err := s.alive(); err != nil {
		return 0, err
	}
	done, err := s.use(ctx)
	if err != nil {
		return 0, s.readErr("head "+stream, err)
	}
	defer done()
	var h int64
	if err := s.pool.QueryRow(ctx, s.q.head, bs(stream), gen).Scan(&h); err != nil {
		return 0, s.readErr("head "+stream, err)
	}
	return h, nil
}

// Meta returns the metadata value stored under key; ok is false when there is none. Errors:
// store.ErrClosed after Close or Kill; ctx's error.
//
//	v, ok, err := st.Meta(ctx, "exec/exec-1")
func (s *Postgres) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.alive(); err != nil {
		return nil, false, err
	}
	done, err := s.use(ctx)
	if err != nil {
		return nil, false, s.readErr("meta", err)
	}
	defer done()
	var v []byte
	err = s.pool.QueryRow(ctx, s.q.meta, bs(key)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.readErr("meta", err)
	}
	return v, true, nil
}

// MetaPrefix returns every metadata pair whose key starts with prefix, in byte order of the
// keys (as SQLite orders them; keys are stored as bytes, so any Go string is a key). Errors as
// Meta.
//
//	kvs, err := st.MetaPrefix(ctx, "exec/")
func (s *Postgres) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	q, args := s.q.metaFrom, []any{bs(prefix)}
	if end, ok := prefixEnd(prefix); ok {
		q, args = s.q.metaRange, []any{bs(prefix), bs(end)}
	}
	done, err := s.use(ctx)
	if err != nil {
		return nil, s.readErr("meta", err)
	}
	defer done()
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.readErr("meta", err)
	}
	defer rows.Close()
	var out []store.KV
	var key []byte
	for rows.Next() {
		var kv store.KV
		if err := rows.Scan(&key, &kv.Val); err != nil {
			return nil, s.readErr("meta", err)
		}
		kv.Key = string(key)
		out = append(out, kv)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("meta", err)
	}
	return out, nil
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
