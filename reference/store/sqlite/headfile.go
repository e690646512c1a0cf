package sqlite

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/reference/store"
)

// The head file (path + ".head") records how many events the store held after its newest commit.
// Events are append-only, so the count only grows; a database that holds fewer than its head file
// says lost commits it had acknowledged (a write-ahead log cut short, a database file replaced by
// an older copy), which SQLite alone would serve as a shorter past. The file is written after
// every commit that appended (without waiting for the disk: it outlives a process crash, and after
// a power loss it can only be behind the database, never ahead of it when commits wait for the
// disk) and made durable at Close, and at Open when Open writes it. After a crash that followed
// relaxed commits it is behind, and Open leaves it so until a commit that waits for the disk.
//
// Beside it the newest file (path + ".newest") names one event of that same commit, with the count
// it goes with, written just before the head file. Open looks that event up (one read, whatever
// the store's size) instead of counting every event: a commit lost is a suffix of the log lost,
// so the newest commit's event is gone with it. When the newest file is missing, does not check
// or goes with another count (a crash between the two writes), Open counts the events instead.
// The full check (at Open, or in the background) compares the count with the events it reads.
//
// What the newest file records is a fact that stays true: when the store held nn events, the
// stream it names had seq as its head. A commit that appends to that stream alone leaves it
// standing, and the file is not written again (one write per commit instead of two, as a flow's
// log grows); any other commit writes it anew. For a head file's count n >= nn, Open looks up the
// stream's event seq + (n - nn): when it is there, the database holds a commit that ended at or
// after the n-th event (each of the stream's events after seq came after the nn-th event, one
// count each), and, a lost commit being a suffix of the log, every commit before it. When it is
// missing and nn = n, the newest commit is lost; when it is missing and nn < n, another stream may
// have taken events since (the newest file was left behind by a crash between the two writes, or
// a power loss kept one and not the other), and Open counts the events instead.
func headPath(db string) string { return db + ".head" }

func newestPath(db string) string { return db + ".newest" }

// headLen is the length of a head file: "loom head <count> <crc>\n".
const headLen = len("loom head 00000000000000000000 00000000\n")

// newestLen is the length of a newest file: "loom newest <count> <gen> <seq> <stream in hex>"
// padded with spaces to newestLen-10 bytes, then " <crc>\n"; "-" in place of gen, seq and stream
// when it names no event. A stream whose name does not fit is not named.
const newestLen = 512

func headRecord(n int64) []byte { return appendHeadRecord(nil, n) }

// appendHeadRecord appends the head file's record of n to dst: "loom head <n as %020d>", then a
// space, the body's checksum as %08x and a newline. A commit formats it into a buffer the store
// keeps (writeHead), so that it allocates nothing.
func appendHeadRecord(dst []byte, n int64) []byte {
	start := len(dst)
	dst = append(dst, "loom head "...)
	dst = appendPadded(dst, n)
	return appendRecordSum(dst, start)
}

// newestEvent is an event a commit appended; ok is false when none is known.
type newestEvent struct {
	k   headKey
	seq int64
	ok  bool
}

// named says whether a newest record names ev: it is an event whose stream fits in the record.
func (ev newestEvent) named() bool {
	return ev.ok && len("loom newest ")+3*20+3+2*len(ev.k.stream) <= newestLen-10
}

// newestOnDisk is what the newest file holds: the record of n and ev, when ok.
type newestOnDisk struct {
	n  int64
	ev newestEvent
	ok bool
}

// newestStands says whether the newest file still names the newest event at the count s.events:
// it names the stream of s.newest, and every event since it was written is that stream's. wmu is
// held (or Open runs).
func (s *SQLite) newestStands() bool {
	d := s.newestDisk
	return d.ok && d.ev.named() && s.newest.named() && d.ev.k == s.newest.k && s.newest.seq-d.ev.seq == s.events-d.n
}

func newestRecord(n int64, ev newestEvent) []byte { return appendNewestRecord(nil, n, ev) }

// appendNewestRecord appends the newest file's record of n and ev to dst: "loom newest <n> <gen>
// <seq> <stream in hex>" (the numbers as %020d), or "loom newest <n> -" when ev names no event or
// its stream does not fit, padded with spaces to newestLen-10 bytes; then a space, the body's
// checksum as %08x and a newline.
func appendNewestRecord(dst []byte, n int64, ev newestEvent) []byte {
	start := len(dst)
	dst = append(dst, "loom newest "...)
	dst = appendPadded(dst, n)
	// Each number takes 20 bytes whatever its value (an int64 has at most 19 digits and a sign).
	if ev.named() {
		dst = append(dst, ' ')
		dst = appendPadded(dst, ev.k.gen)
		dst = append(dst, ' ')
		dst = appendPadded(dst, ev.seq)
		dst = append(dst, ' ')
		for i := 0; i < len(ev.k.stream); i++ {
			c := ev.k.stream[i]
			dst = append(dst, hexDigits[c>>4], hexDigits[c&0xf])
		}
	} else {
		dst = append(dst, " -"...)
	}
	dst = append(dst, spaces[:newestLen-10-(len(dst)-start)]...)
	return appendRecordSum(dst, start)
}

const hexDigits = "0123456789abcdef"

// spaces pads a newest record: its shortest body ("loom newest <n> -") leaves the most to pad.
var spaces = strings.Repeat(" ", newestLen-10)

// headSumSeed and newestSumSeed are sumOf's checksum of a body's length alone, for the one length
// the body of each record has: its body is then summed on from there.
var headSumSeed, newestSumSeed = lengthSum(headLen - 10), lengthSum(newestLen - 10)

func lengthSum(n int) uint32 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	return crc32.Update(0, castagnoli, b[:])
}

// appendPadded appends v as fmt's %020d writes it: zero-padded to 20 bytes, a minus sign first.
func appendPadded(dst []byte, v int64) []byte {
	u, width := uint64(v), 20
	if v < 0 {
		dst = append(dst, '-')
		u, width = -u, 19
	}
	var b [20]byte
	digits := strconv.AppendUint(b[:0], u, 10)
	for i := len(digits); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// appendRecordSum ends the record begun at dst[start:]: a space, the checksum of the body (all of
// dst[start:], sumOf's) as %08x, a newline.
func appendRecordSum(dst []byte, start int) []byte {
	body := dst[start:]
	var sum uint32
	switch len(body) {
	case headLen - 10:
		sum = crc32.Update(headSumSeed, castagnoli, body)
	case newestLen - 10:
		sum = crc32.Update(newestSumSeed, castagnoli, body)
	default:
		sum = uint32(sumOf(body))
	}
	dst = append(dst, ' ')
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(sum>>shift)&0xf])
	}
	return append(dst, '\n')
}

// parseHead reads a head file; ok is false for one that does not check.
func parseHead(b []byte) (n int64, ok bool) {
	var sum uint32
	if len(b) != headLen {
		return 0, false
	}
	if _, err := fmt.Sscanf(string(b), "loom head %d %x\n", &n, &sum); err != nil || string(headRecord(n)) != string(b) {
		return 0, false
	}
	return n, true
}

// parseNewest reads a newest file; ok is false for one that does not check.
func parseNewest(b []byte) (n int64, ev newestEvent, ok bool) {
	f := strings.Fields(string(b))
	if len(b) != newestLen || len(f) < 5 || f[0] != "loom" || f[1] != "newest" {
		return 0, ev, false
	}
	var err error
	if n, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return 0, ev, false
	}
	if len(f) == 7 {
		gen, err1 := strconv.ParseInt(f[3], 10, 64)
		seq, err2 := strconv.ParseInt(f[4], 10, 64)
		stream, err3 := hex.DecodeString(f[5])
		if err1 != nil || err2 != nil || err3 != nil {
			return 0, ev, false
		}
		ev = newestEvent{k: headKey{string(stream), gen}, seq: seq, ok: true}
	}
	return n, ev, string(newestRecord(n, ev)) == string(b)
}

// openHead checks the head file against the database, then keeps it (and the newest file) open
// for writing. need says the store must have one: a missing head file is then damage, since the
// database alone cannot show that its write-ahead log was not cut short. counted is the number of
// events the database holds when Open counted them (-1 when it did not): the head file's count is
// compared with it; otherwise the event the newest file names is looked up, and the events are
// counted when it names none for that count.
func (s *SQLite) openHead(ctx context.Context, need bool, counted int64) error {
	b, err := os.ReadFile(headPath(s.path))
	created := errors.Is(err, os.ErrNotExist)
	nb, _ := os.ReadFile(newestPath(s.path)) // missing or unreadable: the events are counted
	switch {
	case created && need:
		return &store.CorruptError{Path: s.path, Table: "head", Reason: fmt.Sprintf(
			"the head file %s is gone: nothing shows that the events the database holds are all it acknowledged", headPath(s.path))}
	case created:
		if err := s.countEvents(ctx, counted); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	default:
		n, ok := parseHead(b)
		if !ok {
			if len(b) != headLen {
				return &store.CorruptError{Path: s.path, Table: "head", Reason: fmt.Sprintf("the head file %s is %d bytes long", headPath(s.path), len(b))}
			}
			return &store.CorruptError{Path: s.path, Table: "head", Reason: fmt.Sprintf("the head file %s does not check", headPath(s.path))}
		}
		if err := s.checkHead(ctx, n, nb, counted); err != nil {
			return err
		}
		s.chk.headN = n
	}
	f, err := os.OpenFile(headPath(s.path), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	}
	s.head = f
	nf, err := os.OpenFile(newestPath(s.path), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	}
	s.newestF = nf
	if !created && string(b) == string(headRecord(s.events)) && (s.newestStands() || string(nb) == string(newestRecord(s.events, s.newest))) {
		// They already say what the database holds, and were read back whole: nothing to
		// write, nothing to wait for the disk for (a restart's common case).
		return nil
	}
	if !created && s.chk.headN < s.events {
		// Behind: the last run crashed after relaxed commits (relaxed.go), whose events the
		// write-ahead log holds but the disk may not have yet. Counting them now could put the
		// head file ahead of what a power loss leaves; it stays behind, as it was, until the
		// next commit that waits for the disk (or Close) syncs them.
		s.headBehind, s.unsynced = true, true
		return nil
	}
	s.writeHead()
	if err := errors.Join(nf.Sync(), f.Sync()); err != nil {
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	}
	return syncDir(filepath.Dir(s.path))
}

// checkHead compares the head file's count n with the database: through the event the newest
// file nb names for that count when Open did not count the events, by counting otherwise.
func (s *SQLite) checkHead(ctx context.Context, n int64, nb []byte, counted int64) error {
	nn, ev, ok := parseNewest(nb)
	if ok && nn <= n && ev.ok {
		at := newestEvent{k: ev.k, seq: ev.seq + (n - nn), ok: true} // the newest event at n (see above)
		var there bool
		if err := s.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE stream = ? AND gen = ? AND seq = ?)`,
			at.k.stream, at.k.gen, at.seq).Scan(&there); err != nil {
			return s.damageErr(err)
		}
		if !there && nn == n {
			return &store.CorruptError{Path: s.path, Table: "events", Stream: at.k.stream, Gen: at.k.gen, Seq: at.seq,
				Reason: "the database does not hold this event, which it had acknowledged: commits were lost"}
		}
		if there {
			s.newest = at
			s.newestDisk = newestOnDisk{n: nn, ev: ev, ok: true}
			if counted < 0 {
				s.events = n // a lower bound: the full check compares it with the count
				return nil
			}
		}
	}
	if err := s.countEvents(ctx, counted); err != nil {
		return err
	}
	if s.events < n {
		return &store.CorruptError{Path: s.path, Table: "events",
			Reason: fmt.Sprintf("the database holds %d events and had acknowledged %d: commits were lost", s.events, n)}
	}
	return nil
}

// countEvents sets the number of events: counted, or counted now when Open did not (-1).
func (s *SQLite) countEvents(ctx context.Context, counted int64) error {
	if counted >= 0 {
		s.events = counted
		return nil
	}
	if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&s.events); err != nil {
		return s.damageErr(err)
	}
	return nil
}

// leftHead reads the count of a head file left at path; ok is false when there is none, and
// true with n = 1 for one that does not check (it counts something).
func leftHead(db string) (n int64, ok bool) {
	b, err := os.ReadFile(headPath(db))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false
	}
	if err != nil {
		return 1, true
	}
	n, good := parseHead(b)
	if !good {
		return 1, true
	}
	return n, true
}

// writeHead records the event count, and first the newest event known beside it unless the newest
// file already stands for it; an error leaves the files behind the database, which the check at
// Open allows.
func (s *SQLite) writeHead() {
	if s.newestF != nil && !s.newestStands() {
		s.headBuf = appendNewestRecord(s.headBuf[:0], s.events, s.newest)
		m, err := s.newestF.WriteAt(s.headBuf, 0)
		s.newestDisk = newestOnDisk{n: s.events, ev: s.newest, ok: err == nil && m == len(s.headBuf)}
	}
	if s.head != nil {
		s.headBuf = appendHeadRecord(s.headBuf[:0], s.events)
		_, _ = s.head.WriteAt(s.headBuf, 0)
	}
}
