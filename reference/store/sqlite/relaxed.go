package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Relaxed commits (store.Relaxed). The writer's connection commits at synchronous=FULL: the
// write-ahead log is synced before COMMIT returns. A batch made of relaxed Updates only commits
// at synchronous=NORMAL instead: the log is written (a crash of the process keeps it) and not
// synced. The pragma cannot change inside a transaction, so it is set before the batch begins,
// and a batch begun relaxed takes no member that waits for the disk: that one leads the next
// batch. The next commit that waits syncs the log, and with it every relaxed commit before it;
// so a machine that crashes loses at most relaxed commits after the last synced one.
//
// While relaxed, the connection checkpoints nothing on its own (wal_autocheckpoint=0): a
// checkpoint syncs the log and the database, which would put two syncs on the path of a commit
// that asked for none. The next synced commit checkpoints as usual once the log is long enough.
//
// The head file (headfile.go) must never count events the disk may not have: it is written after
// synced commits only, so after a relaxed one it stays behind (allowed) until the next synced
// commit or Close.
//
// The loss epoch lives in the epoch file (path + ".epoch": "loom epoch <n> <boot id>"), written
// and synced at Open. Open raises n when the store was not closed cleanly and the machine started
// again since the last open (Linux's boot id differs from the one the file keeps). Where no boot
// id is known, every open after an unclean close raises it.

// defaultAutoCheckpoint is SQLite's wal_autocheckpoint, put back after a relaxed batch.
const defaultAutoCheckpoint = 1000

// UpdateRelaxed implements store.Relaxed: Update, committing without waiting for the disk.
//
//	err := st.UpdateRelaxed(ctx, func(tx store.Tx) error { _, err := tx.Append(s, 0, h, ev); return err })
func (s *SQLite) UpdateRelaxed(ctx context.Context, fn func(store.Tx) error) error {
	return s.noteDamage(s.submit(ctx, true, func(t *tx) error { return fn(t) }))
}

// LossEpoch implements store.Relaxed: how many opens of this store followed a crash of the
// machine that may have lost relaxed commits.
//
//	epoch := st.LossEpoch()
func (s *SQLite) LossEpoch() int64 { return s.epoch }

// syncMode sets the writer connection to commit relaxed or synced, when it is not already; wmu
// is held and no transaction is open. A store opened with Options.SyncNormal commits at NORMAL
// whatever is asked. A pragma that fails leaves the connection synced, which keeps more.
func (s *SQLite) syncMode(relaxed bool) {
	if s.normal || relaxed == s.relaxedConn {
		return
	}
	q := fmt.Sprintf("PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=%d", defaultAutoCheckpoint)
	if relaxed {
		q = "PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0"
	}
	if _, err := s.wc.ExecContext(context.Background(), q); err != nil {
		if relaxed {
			s.b.relaxed = false // the connection may still be at FULL: the batch waits
			_, _ = s.wc.ExecContext(context.Background(), "PRAGMA synchronous=FULL")
		}
		return
	}
	s.relaxedConn = relaxed
}

// noteHead is what a commit changes of the head file: appended says it appended events, wrote
// that it wrote anything, relaxed that it did not wait for the disk. wmu is held.
func (s *SQLite) noteHead(appended, wrote, relaxed bool) {
	switch {
	case relaxed && !s.normal:
		s.headBehind = s.headBehind || appended
		s.unsynced = s.unsynced || wrote
	case appended || (wrote && s.headBehind):
		s.writeHead()
		s.headBehind, s.unsynced = false, false
	case wrote:
		s.unsynced = false
	}
}

// syncRelaxed makes the relaxed commits not yet synced durable (the write-ahead log and the
// database), then brings the head file up to date; Close calls it with wmu held.
func (s *SQLite) syncRelaxed() error {
	if !s.unsynced && !s.headBehind {
		return nil
	}
	if err := syncFiles(s.path+"-wal", s.path); err != nil {
		return err
	}
	s.writeHead()
	s.headBehind, s.unsynced = false, false
	return nil
}

func epochPath(db string) string { return db + ".epoch" }

// bootIDFile is where Linux names the current boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// bootID is the identity of the machine's current boot: opt.BootID when set, else Linux's, else
// "" (none known).
func bootID(opt Options) string {
	if opt.BootID != "" {
		return opt.BootID
	}
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func epochRecord(n int64, boot string) []byte {
	body := fmt.Sprintf("loom epoch %d %s", n, boot)
	return fmt.Appendf(nil, "%s %08x\n", body, uint32(sumOf([]byte(body))))
}

// parseEpoch reads an epoch file; ok is false for one that does not check.
func parseEpoch(b []byte) (n int64, boot string, ok bool) {
	f := strings.Fields(string(b))
	if len(f) < 4 || len(f) > 5 || f[0] != "loom" || f[1] != "epoch" {
		return 0, "", false
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 {
		return 0, "", false
	}
	if len(f) == 5 {
		boot = f[3]
	}
	return n, boot, string(epochRecord(n, boot)) == string(b)
}

// epochState is what Open learnt of the loss epoch: the count, the boot it is recorded with,
// whether this open raised it, and the epoch file as it was read.
type epochState struct {
	n      int64
	boot   string
	raised bool
	was    []byte
}

// readEpoch reads the epoch file of the store at db and raises the loss epoch when relaxed
// commits may have been lost since the last open (clean says the last run closed the store
// cleanly; dbThere that a store was there). A store with no epoch file never committed relaxed
// (it was written before them, or is new): its epoch is 0.
func readEpoch(db string, opt Options, dbThere, clean bool) (epochState, error) {
	e := epochState{boot: bootID(opt)}
	b, err := os.ReadFile(epochPath(db))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return e, nil
	case err != nil:
		return e, fmt.Errorf("store: epoch of %s: %w", db, err)
	}
	e.was = b
	n, was, ok := parseEpoch(b)
	if !ok {
		return e, &store.CorruptError{Path: db, Table: "epoch", Reason: fmt.Sprintf("the epoch file %s does not check", epochPath(db))}
	}
	e.n = n
	if dbThere && !clean && (e.boot == "" || e.boot != was) {
		e.n++ // the machine may have lost relaxed commits: see above
		e.raised = true
	}
	return e, nil
}

// write records e (with this boot) in the epoch file of the store at db, when the file does not
// say so already.
func (e epochState) write(db string) error {
	rec := epochRecord(e.n, e.boot)
	if string(e.was) == string(rec) {
		return nil
	}
	if err := writeFileSync(epochPath(db), rec); err != nil {
		return fmt.Errorf("store: epoch of %s: %w", db, err)
	}
	return nil
}
