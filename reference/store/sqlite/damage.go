package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/loomcheck/loomcheck/reference/store"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumOf is the checksum of a record: CRC-32C over its fields, each prefixed with its length (8
// bytes, big-endian), so that no two different records share an encoding.
func sumOf(fields ...[]byte) int64 {
	var c uint32
	for _, f := range fields {
		c = sumField(c, f)
	}
	return int64(c)
}

func sumField(c uint32, f []byte) uint32 {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(f)))
	return crc32.Update(crc32.Update(c, castagnoli, n[:]), castagnoli, f)
}

func i64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func eventSum(stream string, gen, seq int64, kind string, data []byte, t int64) int64 {
	var scratch []byte
	return eventSumBuf(&scratch, stream, gen, seq, kind, data, t)
}

// eventSumBuf is sumOf(stream, gen, seq, kind, data, time), encoded into *scratch (reused from
// call to call, so that a read summing many events allocates once).
func eventSumBuf(scratch *[]byte, stream string, gen, seq int64, kind string, data []byte, t int64) int64 {
	b := (*scratch)[:0]
	field := func(f string) {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	num := func(v int64) {
		b = binary.BigEndian.AppendUint64(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	field(stream)
	num(gen)
	num(seq)
	field(kind)
	b = binary.BigEndian.AppendUint64(b, uint64(len(data)))
	b = append(b, data...)
	num(t)
	*scratch = b
	return int64(crc32.Checksum(b, castagnoli))
}

func metaSum(key string, val []byte) int64 { return sumOf([]byte("meta"), []byte(key), val) }

func rememberedSum(scope, key string, n int64) int64 {
	return sumOf([]byte("remembered"), []byte(scope), []byte(key), i64(n))
}

func leaseSum(name, holder, note string, token, expires int64) int64 {
	return sumOf([]byte("lease"), []byte(name), []byte(holder), []byte(note), i64(token), i64(expires))
}

// checkSum compares a stored checksum with the record's; a missing one is damage too (every row
// has one since the migration).
func checkSum(stored sql.NullInt64, want int64) bool { return stored.Valid && stored.Int64 == want }

// sqliteCode is the primary result code of a SQLite error, 0 for other errors.
func sqliteCode(err error) int {
	var ce interface{ Code() int }
	if errors.As(err, &ce) {
		return ce.Code() & 0xff
	}
	return 0
}

// isCorruption reports whether err is SQLite saying the file is damaged (SQLITE_CORRUPT,
// SQLITE_NOTADB).
func isCorruption(err error) bool {
	c := sqliteCode(err)
	return c == 11 || c == 26
}

// checkWAL looks for damage in a write-ahead log SQLite would not report: SQLite reads the log
// up to its first frame whose salt or checksum does not match and silently drops everything
// after it. A log that is cut short by a crash or a torn write ends there, or holds after that
// frame only frames of transactions never committed (committedAfter); a log that holds a commit
// of the same salts after that frame, or frames after a header that does not check, was damaged
// and would come up as a shorter past. (Damage to the very last frame looks like a torn write
// and is not found here, nor damage to the checksum that a commit frame's predecessor holds.)
//
// After a crash of the machine that may have lost relaxed commits (torn is set: see relaxed.go)
// the pages of the log's unsynced tail may have reached the disk in any order, so frames after
// the first that does not check are what such a crash leaves, not damage: they are not refused.
// What was synced is still held to its count by the head file, written after synced commits
// only (openHead).
func checkWAL(dbPath string, torn bool) error {
	path := dbPath + "-wal"
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: read %s: %w", path, err)
	}
	bad := func(reason string) error {
		return &store.CorruptError{Path: dbPath, Table: "wal", Reason: reason}
	}
	if len(b) < 32 {
		if len(b) == 0 {
			return nil
		}
		return bad(fmt.Sprintf("a log of %d bytes, shorter than its header", len(b)))
	}
	magic := binary.BigEndian.Uint32(b[0:])
	if magic&^1 != 0x377f0682 {
		return bad("the log's header is not a write-ahead log header")
	}
	var order binary.ByteOrder = binary.LittleEndian
	if magic&1 == 1 {
		order = binary.BigEndian
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:]))
	if pageSize == 1 {
		pageSize = 65536
	}
	frame := 24 + pageSize
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return bad(fmt.Sprintf("the log's header gives a page size of %d", pageSize))
	}
	salt1, salt2 := binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])
	s0, s1 := walSum(order, 0, 0, b[:24])
	if s0 != binary.BigEndian.Uint32(b[24:]) || s1 != binary.BigEndian.Uint32(b[28:]) {
		if len(b) >= 32+frame && !torn {
			return bad("the log's header checksum does not match and frames follow it")
		}
		return nil
	}
	off := 32
	for ; off+frame <= len(b); off += frame {
		f := b[off : off+frame]
		if binary.BigEndian.Uint32(f[8:]) != salt1 || binary.BigEndian.Uint32(f[12:]) != salt2 {
			break
		}
		s0, s1 = walSum(order, s0, s1, f[:8])
		s0, s1 = walSum(order, s0, s1, f[24:])
		if s0 != binary.BigEndian.Uint32(f[16:]) || s1 != binary.BigEndian.Uint32(f[20:]) {
			break
		}
	}
	// off is the first frame SQLite will not read. A commit of this log after it means damage.
	if later := committedAfter(b, order, off, frame); later > 0 && !torn {
		return bad(fmt.Sprintf("frame %d does not check and frame %d, which commits a transaction of the same log, follows it", (off-32)/frame+1, (later-32)/frame+1))
	}
	return nil
}

// committedAfter is the offset of the first frame after the one at off that carries the log's
// salts and a commit mark and checks against the checksum its predecessor holds, 0 if none: a
// transaction committed to this log that SQLite will not read.
//
// Frames of the same salts after off are not damage in themselves. A transaction's frames are
// written one after the other and its commit frame last; a process killed before that leaves
// frames that check and commit nothing, which SQLite drops. The next writer starts again at the
// last commit and writes over them: if it writes fewer, the rest stay, and the first of them no
// longer checks (its checksum continues the frames that were overwritten). A transaction that
// spilled its cache into the log and was rolled back leaves the same. None of those frames is
// a commit frame that checks: a commit frame is written after every other frame of its
// transaction, and once it checks, SQLite reads the log up to it, so nothing writes over it
// while the log keeps its salts. A commit frame whose header was written and its page not (a
// kill between the two writes) does not check against its predecessor either.
//
// One state a kill can leave is still refused: a transaction that spilled its cache into the log
// and then changed a page it had spilled writes that page over its frame, and rewrites the
// checksums from there only after its commit frame (walRewriteChecksums); a kill inside that
// window leaves a commit frame that checks after a frame that does not, which is what a flipped
// byte in that frame leaves too. It takes a transaction larger than the writer's page cache.
func committedAfter(b []byte, order binary.ByteOrder, off, frame int) int {
	salt1, salt2 := binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])
	for later := off + frame; later+frame <= len(b); later += frame {
		f, prev := b[later:later+frame], b[later-frame:later]
		if binary.BigEndian.Uint32(f[8:]) != salt1 || binary.BigEndian.Uint32(f[12:]) != salt2 || binary.BigEndian.Uint32(f[4:]) == 0 {
			continue
		}
		s0, s1 := walSum(order, binary.BigEndian.Uint32(prev[16:]), binary.BigEndian.Uint32(prev[20:]), f[:8])
		s0, s1 = walSum(order, s0, s1, f[24:])
		if s0 == binary.BigEndian.Uint32(f[16:]) && s1 == binary.BigEndian.Uint32(f[20:]) {
			return later
		}
	}
	return 0
}

// walSum is SQLite's write-ahead log checksum over b (a multiple of 8 bytes), continuing s0, s1.
func walSum(order binary.ByteOrder, s0, s1 uint32, b []byte) (uint32, uint32) {
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += order.Uint32(b[i:]) + s1
		s1 += order.Uint32(b[i+4:]) + s0
	}
	return s0, s1
}

// verifyAll reads the whole database through q: SQLite's integrity check, then every row's
// checksum (events, meta, remembered, leases) and every stream's sequence from 1 without a gap.
// It returns the number of events. Open runs it, or starts it in the background (check.go):
// damage that happened while the store was closed (a flipped key makes a record vanish from every
// lookup, where no read-time checksum can see it) is found before anything is served.
func (s *SQLite) verifyAll(ctx context.Context, q querier) (int64, error) {
	n, err := s.verifyAll1(ctx, q)
	if err != nil {
		return 0, err
	}
	return n, s.verifyMeta(ctx, q)
}

func (s *SQLite) verifyAll1(ctx context.Context, q querier) (int64, error) {
	bad := func(table, reason string) error {
		return &store.CorruptError{Path: s.path, Table: table, Reason: reason}
	}
	rows, err := q.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return 0, s.damageErr(err)
	}
	var problems []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return 0, s.damageErr(err)
		}
		if m != "ok" {
			problems = append(problems, m)
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return 0, s.damageErr(err)
	}
	rows.Close()
	if len(problems) > 0 {
		return 0, bad("database", "integrity check: "+strings.Join(problems[:min(len(problems), 3)], "; "))
	}
	ev, err := q.QueryContext(ctx, `SELECT stream, gen, seq, kind, data, time, sum FROM events ORDER BY stream, gen, seq`)
	if err != nil {
		return 0, s.damageErr(err)
	}
	defer ev.Close()
	var count int64
	var lastStream string
	var lastGen, lastSeq int64 = 0, 0
	first := true
	for ev.Next() {
		var e store.Event
		var sum sql.NullInt64
		if err := ev.Scan(&e.Stream, &e.Gen, &e.Seq, &e.Kind, &e.Data, &e.Time, &sum); err != nil {
			return 0, s.damageErr(err)
		}
		count++
		if !checkSum(sum, eventSum(e.Stream, e.Gen, e.Seq, e.Kind, e.Data, e.Time)) {
			return 0, &store.CorruptError{Path: s.path, Table: "events", Stream: e.Stream, Gen: e.Gen, Seq: e.Seq, Reason: "checksum does not match"}
		}
		if first || e.Stream != lastStream || e.Gen != lastGen {
			lastSeq = 0
		}
		if e.Seq != lastSeq+1 {
			return 0, &store.CorruptError{Path: s.path, Table: "events", Stream: e.Stream, Gen: e.Gen, Seq: e.Seq,
				Reason: fmt.Sprintf("the sequence jumps from %d", lastSeq)}
		}
		first, lastStream, lastGen, lastSeq = false, e.Stream, e.Gen, e.Seq
	}
	if err := ev.Err(); err != nil {
		return 0, s.damageErr(err)
	}
	return count, s.verifyTable(ctx, q, `SELECT scope, key, n, sum FROM remembered`, "remembered", func(r *sql.Rows) (string, bool, error) {
		var sc, k string
		var n int64
		var sum sql.NullInt64
		err := r.Scan(&sc, &k, &n, &sum)
		return sc + "/" + k, checkSum(sum, rememberedSum(sc, k, n)), err
	})
}

// verifyMeta checks every row of the metadata and leases tables.
func (s *SQLite) verifyMeta(ctx context.Context, q querier) error {
	if err := s.verifyTable(ctx, q, `SELECT key, val, sum FROM meta`, "meta", metaRow); err != nil {
		return err
	}
	return s.verifyLeases(ctx, q)
}

func (s *SQLite) verifyTable(ctx context.Context, db querier, q, table string, row func(*sql.Rows) (string, bool, error), args ...any) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return s.damageErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		key, ok, err := row(rows)
		if err != nil {
			return s.damageErr(err)
		}
		if !ok {
			return &store.CorruptError{Path: s.path, Table: table, Key: key, Reason: "checksum does not match"}
		}
	}
	if err := rows.Err(); err != nil {
		return s.damageErr(err)
	}
	return nil
}

// damageErr turns SQLite's own corruption report into a store.CorruptError; other errors pass.
func (s *SQLite) damageErr(err error) error {
	if isCorruption(err) {
		return &store.CorruptError{Path: s.path, Table: "database", Reason: err.Error()}
	}
	return fmt.Errorf("store: verify %s: %w", s.path, err)
}

// The files beside the database. The identity file records that a store was created at this path
// (and which one); the clean file is written by Close and removed by Open, so that its absence at
// Open means the last run did not end cleanly.
func identityPath(db string) string { return db + ".identity" }
func cleanPath(db string) string    { return db + ".clean" }

const cleanContent = "closed cleanly\n"

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// writeFileSync writes a small file and makes it and its name durable.
func writeFileSync(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// takeClean reports whether the last run closed the store cleanly, and removes the record of it.
func takeClean(db string) (bool, error) {
	b, err := os.ReadFile(cleanPath(db))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.Remove(cleanPath(db)); err != nil {
		return false, err
	}
	if err := syncDir(filepath.Dir(db)); err != nil {
		return false, err
	}
	return string(b) == cleanContent, nil
}

func readIdentity(db string) (string, bool, error) {
	f, err := os.Open(identityPath(db))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(b)), true, nil
}
