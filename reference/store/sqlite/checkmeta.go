package sqlite

import (
	"context"
	"database/sql"
)

// The metadata table under the check in the background. It holds a row per execution record, so
// reading it whole at Open grows with the store; Open checks only the leases table, and until the
// check in the background has passed, a metadata key (or a prefix's range) is checked with its
// neighbours the first time it is read, as a stream is: its own rows are checked as every read
// checks them, and the rows on either side of it in the table's order must check too (a row whose
// key bytes changed sits among its old neighbours, where this read meets it). A neighbour that
// does not check refuses the read whatever key it is under: it is damage the check in the
// background would refuse the store for.

// metaChecked makes sure the rows beside key were checked before key is served: at once when
// the store was checked whole, or key since Open; otherwise they are checked now, through q.
func (s *SQLite) metaChecked(ctx context.Context, q querier, key string) error {
	return s.metaRangeChecked(ctx, q, "k:"+key, key, key, true)
}

// metaPrefixChecked is metaChecked for every key with prefix: the rows just before the prefix's
// range and just after it.
func (s *SQLite) metaPrefixChecked(ctx context.Context, q querier, prefix string) error {
	end, bounded := prefixEnd(prefix)
	return s.metaRangeChecked(ctx, q, "p:"+prefix, prefix, end, bounded)
}

// metaRangeChecked checks, once per name until the check in the background passes, the row
// just before from and (when bounded) the row just after the range that ends at to (to itself
// when the range is one key, else the first key not in it).
func (s *SQLite) metaRangeChecked(ctx context.Context, q querier, name, from, to string, bounded bool) error {
	c := &s.chk
	if done, err := c.settled(func() bool { _, ok := c.metas[name]; return ok }); done || err != nil {
		return err
	}
	after := `SELECT key, val, sum FROM meta WHERE key > ? ORDER BY key LIMIT 1`
	if from != to {
		after = `SELECT key, val, sum FROM meta WHERE key >= ? ORDER BY key LIMIT 1`
	}
	checks := []struct {
		sql string
		arg string
	}{{`SELECT key, val, sum FROM meta WHERE key < ? ORDER BY key DESC LIMIT 1`, from}}
	if bounded {
		checks = append(checks, struct {
			sql string
			arg string
		}{after, to})
	}
	for _, ck := range checks {
		if err := s.verifyTable(ctx, q, ck.sql, "meta", metaRow, ck.arg); err != nil {
			return s.noteDamage(err)
		}
	}
	c.mu.Lock()
	if !c.passed.Load() {
		if c.metas == nil {
			c.metas = map[string]struct{}{}
		}
		c.metas[name] = struct{}{}
	}
	c.mu.Unlock()
	return nil
}

// metaRow reads one row of the metadata table and checks it.
func metaRow(r *sql.Rows) (string, bool, error) {
	var k string
	var v []byte
	var sum sql.NullInt64
	err := r.Scan(&k, &v, &sum)
	return k, checkSum(sum, metaSum(k, v)), err
}

// verifyLeases checks every row of the leases table: a small table (one row per lease), which
// Open checks even when the rest is checked in the background.
func (s *SQLite) verifyLeases(ctx context.Context, q querier) error {
	return s.verifyTable(ctx, q, `SELECT name, holder, note, token, expires, sum FROM leases`, "leases", func(r *sql.Rows) (string, bool, error) {
		var name, holder, note string
		var token, expires int64
		var sum sql.NullInt64
		err := r.Scan(&name, &holder, &note, &token, &expires, &sum)
		return name, checkSum(sum, leaseSum(name, holder, note, token, expires)), err
	})
}
