package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// payload is about the size of a recorded decision in a conversation log.
var payload = []byte(`{"id":"conv#o12:reply","value":{"rec":{"ord":24,"turn":12,"role":"assistant","status":"complete","text":"re: a reply of a few dozen characters"}}}`)

// perSecond reports a rate of things done during the benchmark's timed part.
func perSecond(b *testing.B, n int, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(n)/s, unit)
	}
}

func benchAppend(b *testing.B, perTx int) {
	st, _ := openTemp(b)
	evs := make([]store.NewEvent, perTx)
	for i := range evs {
		evs[i] = store.NewEvent{Kind: "decision", Data: payload}
	}
	b.SetBytes(int64(perTx * len(payload)))
	b.ReportAllocs()
	var head int64
	for b.Loop() {
		if err := st.Update(bg, func(tx store.Tx) error {
			var err error
			head, err = tx.Append("x/bench", 0, head, evs...)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	if head != int64(b.N*perTx) {
		b.Fatalf("head %d after %d appends of %d", head, b.N, perTx)
	}
	perSecond(b, b.N*perTx, "events/s")
	perSecond(b, b.N, "tx/s")
	if perTx > 1 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perTx), "ns/event")
	}
}

// BenchmarkAppend is one event per transaction, with an expected head, as a flow's log grows.
func BenchmarkAppend(b *testing.B) { benchAppend(b, 1) }

// BenchmarkAppendBatch is ten events per transaction.
func BenchmarkAppendBatch(b *testing.B) { benchAppend(b, 10) }

// BenchmarkReadForward reads 256-event blocks from a 16384-event stream, as a replay or a history
// page does.
func BenchmarkReadForward(b *testing.B) {
	const total, block = 16384, 256
	st, _ := openTemp(b)
	evs := make([]store.NewEvent, store.MaxRead)
	for i := range evs {
		evs[i] = store.NewEvent{Kind: "decision", Data: payload}
	}
	for range total / store.MaxRead {
		if err := st.Update(bg, func(tx store.Tx) error {
			_, err := tx.Append("x/bench", 0, -1, evs...)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(block * len(payload)))
	b.ReportAllocs()
	var after int64
	for b.Loop() {
		got, err := st.ReadForward(bg, "x/bench", 0, after, block)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != block || got[0].Seq != after+1 {
			b.Fatalf("read %d events from %d", len(got), after)
		}
		after = (after + block) % total
	}
	perSecond(b, b.N*block, "events/s")
}

// BenchmarkRemember adds a fresh key per transaction to a set that keeps 4096, so past the
// first 4096 every call also forgets the oldest key.
func BenchmarkRemember(b *testing.B) {
	st, _ := openTemp(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := fmt.Sprintf("acme/alice\x00m-%d", i)
		i++
		if err := st.Update(bg, func(tx store.Tx) error {
			fresh, err := tx.Remember("dd/bench", key, 4096)
			if err == nil && !fresh {
				err = fmt.Errorf("%s was not fresh", key)
			}
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	perSecond(b, b.N, "keys/s")
}

// BenchmarkCommitSync is the cost of durability on power loss: one event per transaction with
// synchronous=FULL (the default: each commit waits for the disk) and with synchronous=NORMAL
// (Options.SyncNormal: commits survive a process crash but the newest may roll back on a power
// loss). Both run in the same invocation, on the same disk, so the two are comparable.
func BenchmarkCommitSync(b *testing.B) {
	for _, mode := range []struct {
		name   string
		normal bool
	}{{"full", false}, {"normal", true}} {
		b.Run(mode.name, func(b *testing.B) {
			st, err := sqlite.Open(bg, filepath.Join(b.TempDir(), "loom.db"), sqlite.Options{SyncNormal: mode.normal})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.ReportAllocs()
			var head int64
			for b.Loop() {
				if err := st.Update(bg, func(tx store.Tx) error {
					var err error
					head, err = tx.Append("x/bench", 0, head, store.NewEvent{Kind: "decision", Data: payload})
					return err
				}); err != nil {
					b.Fatal(err)
				}
			}
			perSecond(b, b.N, "tx/s")
		})
	}
}
