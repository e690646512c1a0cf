package sqlite_test

import (
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// syncModes are the two commit settings the benchmarks below compare: synchronous FULL (the
// default: a commit waits for the disk) and NORMAL (Options.SyncNormal).
var syncModes = []struct {
	name   string
	normal bool
}{{"full", false}, {"normal", true}}

// BenchmarkConcurrentAppend is k appenders (1, 8, 64) at once, each to a stream of its own, one
// event per Update with the expected head, as k conversations' logs grow side by side: b.N
// events in all. events/s at 8 and 64 over events/s at 1 is what several waiting writers gain
// from sharing a commit.
func BenchmarkConcurrentAppend(b *testing.B) {
	for _, mode := range syncModes {
		for _, k := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/appenders=%d", mode.name, k), func(b *testing.B) {
				st, err := sqlite.Open(bg, filepath.Join(b.TempDir(), "loom.db"), sqlite.Options{SyncNormal: mode.normal})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				b.ReportAllocs()
				var next atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, k)
				b.ResetTimer()
				for i := range k {
					stream := fmt.Sprintf("x/conc/%d", i)
					wg.Go(func() {
						var head int64
						for next.Add(1) <= int64(b.N) {
							if err := st.Update(bg, func(tx store.Tx) error {
								h, err := tx.Append(stream, 0, head, store.NewEvent{Kind: "decision", Data: payload})
								head = h
								return err
							}); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
				perSecond(b, b.N, "events/s")
			})
		}
	}
}

// BenchmarkRawInsert is the baseline of BenchmarkCommitSync and BenchmarkConcurrentAppend: what
// SQLite itself does on this machine with the store's pragmas (WAL, synchronous FULL or NORMAL)
// and a table of the events table's shape, one row per autocommit INSERT through one prepared
// statement on one connection. None of the store's work: no head, no checksum, no head file, no
// notification.
func BenchmarkRawInsert(b *testing.B) {
	for _, mode := range syncModes {
		b.Run(mode.name, func(b *testing.B) {
			sync := "FULL"
			if mode.normal {
				sync = "NORMAL"
			}
			q := url.Values{}
			q.Add("_pragma", "journal_mode(WAL)")
			q.Add("_pragma", "synchronous("+sync+")")
			q.Add("_pragma", "busy_timeout(10000)")
			db, err := sql.Open("sqlite", "file:"+filepath.Join(b.TempDir(), "raw.db")+"?"+q.Encode())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.Exec(`CREATE TABLE events (
	stream TEXT NOT NULL,
	gen    INTEGER NOT NULL,
	seq    INTEGER NOT NULL,
	kind   TEXT NOT NULL,
	data   BLOB,
	time   INTEGER NOT NULL,
	sum    INTEGER,
	PRIMARY KEY (stream, gen, seq)
) WITHOUT ROWID`); err != nil {
				b.Fatal(err)
			}
			ins, err := db.Prepare(`INSERT INTO events (stream, gen, seq, kind, data, time, sum) VALUES (?, ?, ?, ?, ?, ?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			defer ins.Close()
			b.ReportAllocs()
			seq := 0
			for b.Loop() {
				seq++
				if _, err := ins.Exec("x/raw", 0, seq, "decision", payload, time.Now().UnixMilli(), seq); err != nil {
					b.Fatal(err)
				}
			}
			perSecond(b, b.N, "tx/s")
		})
	}
}
