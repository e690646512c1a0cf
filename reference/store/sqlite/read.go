package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/store"
)

func clampLimit(limit int) int {
	if limit <= 0 || limit > store.MaxRead {
		return store.MaxRead
	}
	return limit
}

func (s *SQLite) alive() error {
	if s.shut.Load() {
		return store.ErrClosed
	}
	return nil
}

// ReadForward implements store.Store.
func (s *SQLite) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	if err := s.streamChecked(ctx, s.r, headKey{stream, gen}); err != nil {
		return nil, err
	}
	evs, err := s.readForward(ctx, stream, gen, after, limit)
	return evs, s.noteDamage(err)
}

func (s *SQLite) readForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	k := headKey{stream, gen}
	if evs, ok := s.view.forward(k, after, clampLimit(limit)); ok {
		return evs, nil
	}
	if h, ok := s.view.head(k); ok && after >= h {
		// Nothing was committed after the head the view holds: a reader that follows a stream
		// and finds nothing new does not query the database for it.
		return []store.Event{}, nil
	}
	evs, err := s.query(ctx, s.rs.forward, stream, gen, after, clampLimit(limit))
	if err != nil {
		return nil, err
	}
	// Sequences run 1, 2, 3... without a gap: the first event after `after` is after+1.
	next := max(after, 0) + 1
	for _, e := range evs {
		if e.Seq != next {
			return nil, &store.CorruptError{Path: s.path, Table: "events", Stream: stream, Gen: gen, Seq: e.Seq,
				Reason: fmt.Sprintf("read in place of seq %d", next)}
		}
		next++
	}
	return evs, nil
}

// ReadBackward implements store.Store.
func (s *SQLite) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	if err := s.streamChecked(ctx, s.r, headKey{stream, gen}); err != nil {
		return nil, err
	}
	evs, err := s.readBackward(ctx, stream, gen, before, limit)
	return evs, s.noteDamage(err)
}

func (s *SQLite) readBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	evs, err := s.query(ctx, s.rs.backward, stream, gen, before, clampLimit(limit))
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq-1 {
			return nil, &store.CorruptError{Path: s.path, Table: "events", Stream: stream, Gen: gen, Seq: evs[i].Seq,
				Reason: fmt.Sprintf("read in place of seq %d", evs[i-1].Seq-1)}
		}
	}
	if n := len(evs); n > 0 && evs[n-1].Seq != 1 && n < clampLimit(limit) {
		return nil, &store.CorruptError{Path: s.path, Table: "events", Stream: stream, Gen: gen, Seq: evs[n-1].Seq,
			Reason: "the stream's oldest event is not seq 1"}
	}
	return evs, nil
}

func (s *SQLite) query(ctx context.Context, q *lazyStmt, stream string, gen, bound int64, limit int) ([]store.Event, error) {
	rows, err := q.QueryContext(ctx, stream, gen, bound, limit)
	if err != nil {
		return nil, s.readErr(err)
	}
	defer rows.Close()
	out := make([]store.Event, 0, min(limit, 64))
	var scratch []byte
	for rows.Next() {
		e := store.Event{Stream: stream, Gen: gen}
		var sum sql.NullInt64
		if err := rows.Scan(&e.Seq, &e.Kind, &e.Data, &e.Time, &sum); err != nil {
			return nil, s.readErr(err)
		}
		if !checkSum(sum, eventSumBuf(&scratch, stream, gen, e.Seq, e.Kind, e.Data, e.Time)) {
			return nil, &store.CorruptError{Path: s.path, Table: "events", Stream: stream, Gen: gen, Seq: e.Seq, Reason: "checksum does not match"}
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
		return store.ErrClosed
	}
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isCorruption(err) {
		return &store.CorruptError{Path: s.path, Table: "database", Reason: err.Error()}
	}
	return fmt.Errorf("store: read: %w", err)
}

// Head implements store.Store.
func (s *SQLite) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	if err := s.alive(); err != nil {
		return 0, err
	}
	if err := s.streamChecked(ctx, s.r, headKey{stream, gen}); err != nil {
		return 0, err
	}
	if h, ok := s.view.head(headKey{stream, gen}); ok {
		return h, nil
	}
	var h int64
	err := s.rs.head.QueryRowContext(ctx, stream, gen).Scan(&h)
	if err != nil {
		return 0, s.readErr(err)
	}
	return h, nil
}

// Meta implements store.Store.
func (s *SQLite) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	if err := s.alive(); err != nil {
		return nil, false, err
	}
	if err := s.chk.refused(); err != nil {
		return nil, false, err
	}
	v, ok, err := s.meta(ctx, key)
	return v, ok, s.noteDamage(err)
}

func (s *SQLite) meta(ctx context.Context, key string) ([]byte, bool, error) {
	v, present, known, epoch := s.view.metaOf(key)
	if known {
		return v, present, nil
	}
	if err := s.metaChecked(ctx, s.r, key); err != nil {
		return nil, false, err
	}
	var sum sql.NullInt64
	err := s.rs.meta.QueryRowContext(ctx, key).Scan(&v, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		s.view.fillMeta(key, nil, false, epoch)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.readErr(err)
	}
	if !checkSum(sum, metaSum(key, v)) {
		return nil, false, &store.CorruptError{Path: s.path, Table: "meta", Key: key, Reason: "checksum does not match"}
	}
	s.view.fillMeta(key, v, true, epoch)
	return v, true, nil
}

// MetaPrefix implements store.Store.
func (s *SQLite) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if err := s.alive(); err != nil {
		return nil, err
	}
	if err := s.chk.refused(); err != nil {
		return nil, err
	}
	kvs, err := s.metaPrefix(ctx, prefix)
	return kvs, s.noteDamage(err)
}

func (s *SQLite) metaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	if err := s.metaPrefixChecked(ctx, s.r, prefix); err != nil {
		return nil, err
	}
	q, args := s.rs.metaFrom, []any{prefix}
	if end, ok := prefixEnd(prefix); ok {
		q, args = s.rs.metaRange, []any{prefix, end}
	}
	rows, err := q.QueryContext(ctx, args...)
	if err != nil {
		return nil, s.readErr(err)
	}
	defer rows.Close()
	var out []store.KV
	for rows.Next() {
		var kv store.KV
		var sum sql.NullInt64
		if err := rows.Scan(&kv.Key, &kv.Val, &sum); err != nil {
			return nil, s.readErr(err)
		}
		if !checkSum(sum, metaSum(kv.Key, kv.Val)) {
			return nil, &store.CorruptError{Path: s.path, Table: "meta", Key: kv.Key, Reason: "checksum does not match"}
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
