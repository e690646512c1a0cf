package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
)

// The rows of one conversation turn, by the sizes of their data in bytes, as the engine writes
// them in reference/perf's turns-durable figure (an owner conversation, the built-in model, no
// barge-in): the message in the inbox, committed with its dedupe key before the 202; then the
// execution's log in two commits: the consumed copy of the message, the verification verdict and
// the user's record (before the model is called); then the journaled response and the reply's
// record.
var (
	turnInbox = 435
	turnLog   = [2][]int{{463, 330, 249}, {75, 228}}
)

// turnScope and the streams are named as the kernel names one conversation's (their length
// matters: they are part of every row's key).
const (
	turnConv  = "owner-1.3d1c7bd3e54dc31516ceb66d"
	turnScope = "dd/" + turnConv
	turnIn    = "in/" + turnConv
	turnX     = "x/" + turnConv
)

// turnDedupeWindow is how many keys the kernel keeps per execution by default
// (kernel.Options.DedupeWindow).
const turnDedupeWindow = 4096

// turnKey is the dedupe key of turn n: a SHA-256 in hex, as the kernel's are, so that keys land
// at scattered places of the remembered table as they do in the engine.
func turnKey(n int) string {
	s := sha256.Sum256(fmt.Appendf(nil, "sender-%d", n))
	return hex.EncodeToString(s[:])
}

func filler(n int) []byte { return bytes.Repeat([]byte("j"), n) }

// rawTurnDB is a database with the store's schema and pragmas, written by plain SQL: one
// transaction per commit of the turn, one INSERT per row, no head read, no checksum computed, no
// head file, no notification. It is what SQLite itself costs for the rows the store writes.
type rawTurnDB struct {
	db                         *sql.DB
	begin, commit, ins, rember *sql.Stmt
}

func openRawTurnDB(tb testing.TB, path string, syncNormal bool) *rawTurnDB {
	tb.Helper()
	db, err := sql.Open("sqlite", rawDSN(path, syncNormal))
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	if _, err := db.Exec(schema); err != nil {
		tb.Fatal(err)
	}
	r := &rawTurnDB{db: db}
	for dst, q := range map[**sql.Stmt]string{
		&r.begin:  `BEGIN IMMEDIATE`,
		&r.commit: `COMMIT`,
		&r.ins:    `INSERT INTO events (stream, gen, seq, kind, data, time, sum) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		&r.rember: `INSERT INTO remembered (scope, key, n, sum) VALUES (?, ?, ?, ?)`,
	} {
		if *dst, err = db.Prepare(q); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { (*dst).Close() })
	}
	return r
}

// aSum stands for a checksum: an eight-byte integer, so that rows are as long as the store's.
const aSum = int64(1) << 60

// turn makes turn n's three commits; in and x are the heads of the inbox and the log before it.
func (r *rawTurnDB) turn(n int, in, x int64, data [][]byte) error {
	now := time.Now().UnixMilli()
	exec := func(st *sql.Stmt, args ...any) error { _, err := st.Exec(args...); return err }
	if err := exec(r.begin); err != nil {
		return err
	}
	if err := exec(r.rember, turnScope, turnKey(n), int64(n), aSum); err != nil {
		return err
	}
	if err := exec(r.ins, turnIn, 0, in+1, "message", data[0], now, aSum); err != nil {
		return err
	}
	if err := exec(r.commit); err != nil {
		return err
	}
	i := 1
	for _, commit := range turnLog {
		if err := exec(r.begin); err != nil {
			return err
		}
		for range commit {
			x++
			if err := exec(r.ins, turnX, 0, x, "decision", data[i], now, aSum); err != nil {
				return err
			}
			i++
		}
		if err := exec(r.commit); err != nil {
			return err
		}
	}
	return nil
}

// storeTurn makes turn n's three commits through the store, as the kernel does: the dedupe key
// and the message in one Update, then each part of the log in an Update of its own with the head
// it expects. It returns the new heads.
func storeTurn(st *SQLite, n int, in, x int64, data [][]byte) (int64, int64, error) {
	ctx := context.Background()
	err := st.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Remember(turnScope, turnKey(n), turnDedupeWindow); err != nil {
			return err
		}
		var err error
		in, err = tx.Append(turnIn, 0, in, store.NewEvent{Kind: "message", Data: data[0]})
		return err
	})
	if err != nil {
		return in, x, err
	}
	i := 1
	for _, commit := range turnLog {
		evs := make([]store.NewEvent, len(commit))
		for j := range commit {
			evs[j] = store.NewEvent{Kind: "decision", Data: data[i]}
			i++
		}
		if err := st.Update(ctx, func(tx store.Tx) error {
			var err error
			x, err = tx.Append(turnX, 0, x, evs...)
			return err
		}); err != nil {
			return in, x, err
		}
	}
	return in, x, nil
}

// BenchmarkTurnCommits is what a conversation's turn costs in durable commits, three ways in
// turn within every iteration, so that each is measured against the others in the same run:
//
//   - store: the store's three commits of a turn's rows (a dedupe key and the inbox message; three
//     events of the log; two more), as the engine makes them;
//   - raw: the same rows in the same three transactions as plain SQL on a database of the store's
//     schema and pragmas: SQLite's own cost for that journal;
//   - bare: three one-row autocommit INSERTs of a few dozen bytes (sqlite.Raw), the commits of
//     reference/perf's bare server, which the engine's turns-durable figure is measured against.
//
// store minus raw is the store's own work; raw minus bare is the cost of the journal's rows.
func BenchmarkTurnCommits(b *testing.B) {
	for _, mode := range []struct {
		name   string
		normal bool
	}{{"full", false}, {"normal", true}} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			st, err := Open(ctx, filepath.Join(dir, "loom.db"), Options{SyncNormal: mode.normal})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			raw := openRawTurnDB(b, filepath.Join(dir, "raw.db"), mode.normal)
			bare, err := OpenRaw(ctx, filepath.Join(dir, "bare.db"), mode.normal)
			if err != nil {
				b.Fatal(err)
			}
			defer bare.Close()
			data := [][]byte{filler(turnInbox)}
			for _, commit := range turnLog {
				for _, size := range commit {
					data = append(data, filler(size))
				}
			}
			hello := []byte("hello")
			reply := []byte(`{"turn":1,"role":"assistant","status":"complete","text":"You said: \"hello\""}`)
			var in, x int64
			var took [3]time.Duration
			n := 0
			for b.Loop() {
				n++
				t0 := time.Now()
				if in, x, err = storeTurn(st, n, in, x, data); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := raw.turn(n, in-1, x-int64(len(data)-1), data); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				for _, d := range [][]byte{hello, reply, reply} {
					if err := bare.Insert(ctx, d); err != nil {
						b.Fatal(err)
					}
				}
				took[0], took[1], took[2] = took[0]+t1.Sub(t0), took[1]+t2.Sub(t1), took[2]+time.Since(t2)
			}
			// Every side wrote every row: the store's heads, and the raw tables' row counts.
			if in != int64(n) || x != int64(n*(len(data)-1)) {
				b.Fatalf("store heads %d and %d after %d turns", in, x, n)
			}
			var rows int64
			if err := raw.db.QueryRow(`SELECT COUNT(*) FROM events`).Scan(&rows); err != nil || rows != int64(n*len(data)) {
				b.Fatalf("raw holds %d events after %d turns (%v)", rows, n, err)
			}
			for i, unit := range []string{"store-µs/turn", "raw-µs/turn", "bare-µs/turn"} {
				b.ReportMetric(float64(took[i].Microseconds())/float64(n), unit)
			}
		})
	}
}

// The two sides of BenchmarkTurnCommits that write a turn's rows write the same rows: the store's
// heads move by a turn each time, and the raw database holds the same streams, keys and bytes.
func TestTurnCommitsWriteOneTurnEach(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(ctx, filepath.Join(dir, "loom.db"), Options{SyncNormal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw := openRawTurnDB(t, filepath.Join(dir, "raw.db"), true)
	data := [][]byte{filler(turnInbox), filler(1), filler(2), filler(3), filler(4), filler(5)}
	in, x, err := storeTurn(st, 1, 0, 0, data)
	if err != nil || in != 1 || x != 5 {
		t.Fatalf("store turn: heads %d, %d (%v)", in, x, err)
	}
	in, x, err = storeTurn(st, 2, in, x, data)
	if err != nil || in != 2 || x != 10 {
		t.Fatalf("second store turn: heads %d, %d (%v)", in, x, err)
	}
	if err := raw.turn(1, 0, 0, data); err != nil {
		t.Fatal(err)
	}
	if err := raw.turn(2, 1, 5, data); err != nil {
		t.Fatal(err)
	}
	var streams, keys, sum int64
	if err := raw.db.QueryRow(`SELECT COUNT(DISTINCT stream), SUM(length(data)) FROM events`).Scan(&streams, &sum); err != nil {
		t.Fatal(err)
	}
	if err := raw.db.QueryRow(`SELECT COUNT(*) FROM remembered`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if streams != 2 || keys != 2 || sum != 2*int64(turnInbox+15) {
		t.Fatalf("raw: %d streams, %d keys, %d bytes of data", streams, keys, sum)
	}
	evs, err := st.ReadForward(ctx, turnX, 0, 0, 100)
	if err != nil || len(evs) != 10 || !bytes.Equal(evs[4].Data, data[5]) || !bytes.Equal(evs[9].Data, data[5]) {
		t.Fatalf("store log: %d events (%v)", len(evs), err)
	}
}
