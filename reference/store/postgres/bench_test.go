package postgres_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// The benchmarks are those of reference/store/sqlite (bench_test.go), with the same payload and
// shapes, so that the two backends can be quoted side by side:
//
//	go test -run '^$' -bench . -benchtime 2s ./reference/store/sqlite ./reference/store/postgres
//
// Each runs on a database of its own, through one handle.

// payload is about the size of a recorded decision in a conversation log.
var payload = []byte(`{"id":"conv#o12:reply","value":{"rec":{"ord":24,"turn":12,"role":"assistant","status":"complete","text":"re: a reply of a few dozen characters"}}}`)

// perSecond reports a rate of things done during the benchmark's timed part.
func perSecond(b *testing.B, n int, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(n)/s, unit)
	}
}

func openBench(b *testing.B) *postgres.Postgres {
	b.Helper()
	return open(b, pgtest.TempDatabase(b), postgres.Options{})
}

func benchAppend(b *testing.B, perTx int) {
	st := openBench(b)
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
	st := openBench(b)
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
	st := openBench(b)
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

// BenchmarkAppendTwoNodes is BenchmarkAppend on one handle while a second handle on the same
// database (another engine node) appends to a stream of its own as fast as it can: what sharing
// one database costs (each node locks its own stream only). events/s counts both nodes' appends.
func BenchmarkAppendTwoNodes(b *testing.B) {
	url := pgtest.TempDatabase(b)
	st, other := open(b, url, postgres.Options{}), open(b, url, postgres.Options{})
	ev := store.NewEvent{Kind: "decision", Data: payload}
	var others atomic.Int64
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		var head int64
		for {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			if err := other.Update(bg, func(tx store.Tx) error {
				var err error
				head, err = tx.Append("x/other", 0, head, ev)
				return err
			}); err != nil {
				stopped <- err
				return
			}
			others.Add(1)
		}
	}()
	b.ReportAllocs()
	var head, base int64
	first := true
	for b.Loop() {
		if first {
			base, first = others.Load(), false
		}
		if err := st.Update(bg, func(tx store.Tx) error {
			var err error
			head, err = tx.Append("x/bench", 0, head, ev)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	n := others.Load() - base
	close(stop)
	if err := <-stopped; err != nil {
		b.Fatal(err)
	}
	perSecond(b, b.N+int(n), "events/s")
	perSecond(b, b.N, "tx/s")
}
