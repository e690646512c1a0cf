package sqlite

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/reference/store"
)

// The head file (path + ".head") records how many events the store held after its newest commit,
// and one event that commit appended. Events are append-only, so the count only grows; a database
// that holds fewer than its head file says, or lacks the event it names, lost commits it had
// acknowledged (a write-ahead log cut short, a database file replaced by an older copy), which
// SQLite alone would serve as a shorter past. The file is written after every commit that
// appended (without waiting for the disk: it outlives a process crash, and after a power loss it
// can only be behind the database, never ahead of it when commits wait for the disk) and made
// durable at Open and Close.
//
// Open looks the named event up (one read, whatever the store's size); the count is compared
// with the events the database holds by the full check, at Open or in the background. A head
// file of the first version (the count alone) is compared by counting at Open, then rewritten.
func headPath(db string) string { return db + ".head" }

// The first version: "loom head <count> <crc>\n", headLen bytes.
const headLen = len("loom head 00000000000000000000 00000000\n")

// The second: "loom head2 <count> <gen> <seq> <stream in hex>" padded with spaces to head2Len-10
// bytes, then " <crc>\n"; "-" in place of gen, seq and stream when it names no event. A stream
// whose name does not fit is not named.
const head2Len = 512

func headRecord(n int64) []byte {
	body := fmt.Sprintf("loom head %020d", n)
	return fmt.Appendf(nil, "%s %08x\n", body, uint32(sumOf([]byte(body))))
}

// newestEvent is an event a commit appended; ok is false when none is known.
type newestEvent struct {
	k   headKey
	seq int64
	ok  bool
}

func head2Record(n int64, ev newestEvent) []byte {
	body := fmt.Sprintf("loom head2 %020d -", n)
	if named := fmt.Sprintf("loom head2 %020d %020d %020d %s", n, ev.k.gen, ev.seq, hex.EncodeToString([]byte(ev.k.stream))); ev.ok && len(named) <= head2Len-10 {
		body = named
	}
	body += strings.Repeat(" ", head2Len-10-len(body))
	return fmt.Appendf(nil, "%s %08x\n", body, uint32(sumOf([]byte(body))))
}

// parseHead reads a head file of either version; ok is false for one that does not check.
func parseHead(b []byte) (n int64, ev newestEvent, ok bool) {
	switch len(b) {
	case headLen:
		var sum uint32
		if _, err := fmt.Sscanf(string(b), "loom head %d %x\n", &n, &sum); err != nil || string(headRecord(n)) != string(b) {
			return 0, ev, false
		}
		return n, ev, true
	case head2Len:
		f := strings.Fields(string(b))
		if len(f) < 5 || f[0] != "loom" || f[1] != "head2" {
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
		return n, ev, string(head2Record(n, ev)) == string(b)
	}
	return 0, ev, false
}

// openHead checks the head file against the database, then keeps it open for writing. need says
// the store must have one: a missing head file is then damage, since the database alone cannot
// show that its write-ahead log was not cut short. counted is the number of events the database
// holds when Open counted them (-1 when it did not): the file's count is compared with it;
// otherwise the event the file names is looked up, and a file that names none is compared by
// counting.
func (s *SQLite) openHead(ctx context.Context, need bool, counted int64) error {
	count := func() error {
		if counted >= 0 {
			s.events = counted
			return nil
		}
		if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&s.events); err != nil {
			return s.damageErr(err)
		}
		counted = s.events
		return nil
	}
	b, err := os.ReadFile(headPath(s.path))
	created := errors.Is(err, os.ErrNotExist)
	switch {
	case created && need:
		return &store.CorruptError{Path: s.path, Table: "head", Reason: fmt.Sprintf(
			"the head file %s is gone: nothing shows that the events the database holds are all it acknowledged", headPath(s.path))}
	case created:
		if err := count(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	default:
		n, ev, ok := parseHead(b)
		if !ok {
			if len(b) != headLen && len(b) != head2Len {
				return &store.CorruptError{Path: s.path, Table: "head", Reason: fmt.Sprintf("the head file %s is %d bytes long", headPath(s.path), len(b))}
			}
			return &store.CorruptError{Path: s.path, Table: "head", Reason: fmt.Sprintf("the head file %s does not check", headPath(s.path))}
		}
		if ev.ok {
			var there bool
			if err := s.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE stream = ? AND gen = ? AND seq = ?)`,
				ev.k.stream, ev.k.gen, ev.seq).Scan(&there); err != nil {
				return s.damageErr(err)
			}
			if !there {
				return &store.CorruptError{Path: s.path, Table: "events", Stream: ev.k.stream, Gen: ev.k.gen, Seq: ev.seq,
					Reason: "the database does not hold this event, which it had acknowledged: commits were lost"}
			}
			s.newest = ev
		}
		if !ev.ok || counted >= 0 {
			if err := count(); err != nil {
				return err
			}
			if s.events < n {
				return &store.CorruptError{Path: s.path, Table: "events",
					Reason: fmt.Sprintf("the database holds %d events and had acknowledged %d: commits were lost", s.events, n)}
			}
		} else {
			s.events = n // a lower bound: the full check compares it with the count
		}
		s.chk.headN = n
	}
	f, err := os.OpenFile(headPath(s.path), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	}
	s.head = f
	if !created && string(b) == string(head2Record(s.events, s.newest)) {
		// It already says what the database holds, and it was read back whole: nothing to
		// write, nothing to wait for the disk for (a restart's common case).
		return nil
	}
	s.writeHead()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: head of %s: %w", s.path, err)
	}
	if !created {
		return nil
	}
	return syncDir(filepath.Dir(s.path))
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
	n, _, good := parseHead(b)
	if !good {
		return 1, true
	}
	return n, true
}

// writeHead records the event count and the newest event known; an error leaves the file behind
// the database, which the check at Open allows.
func (s *SQLite) writeHead() {
	if s.head != nil {
		_, _ = s.head.WriteAt(head2Record(s.events, s.newest), 0)
	}
}
