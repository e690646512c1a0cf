package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// decider makes n decisions (n is its input), tells reached once it has made or replayed them
// all, then parks in Receive until a message ends it.
func decider(reached chan<- struct{}) kernel.Flow {
	return func(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
		var n int
		if err := json.Unmarshal(input, &n); err != nil {
			return nil, err
		}
		for i := range n {
			v := i
			if _, err := c.Decide(fmt.Sprintf("d%d", i), func() (json.RawMessage, error) {
				return json.Marshal(v)
			}); err != nil {
				return nil, err
			}
		}
		select {
		case reached <- struct{}{}:
		default:
		}
		_, err := c.Receive()
		return nil, err
	}
}

func benchStore(b *testing.B) *sqlite.SQLite {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "loom.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// waitHead waits until execution id's log holds want events: a flow's last decisions are
// committed when it goes on to wait for a message, just after it tells reached.
func waitHead(b *testing.B, st *sqlite.SQLite, id string, want int64) {
	deadline := time.Now().Add(time.Minute)
	for {
		head, err := st.Head(context.Background(), kernel.LogStream(id), 0)
		if err != nil {
			b.Fatal(err)
		}
		if head == want {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("log head %d, want %d", head, want)
		}
	}
}

func waitReached(b *testing.B, reached <-chan struct{}) {
	select {
	case <-reached:
	case <-time.After(5 * time.Minute):
		b.Fatal("the flow never reached the end of its decisions")
	}
}

// BenchmarkDecide measures live decisions: one execution makes b.N decisions in a row, committed
// to its log together (a few hundred to a transaction) since nothing outside it can see them
// until it waits. The time runs until all of them are in the log.
func BenchmarkDecide(b *testing.B) {
	st := benchStore(b)
	reached := make(chan struct{}, 1)
	k, err := kernel.Open(context.Background(), st, kernel.Options{Flows: map[string]kernel.Flow{"d": decider(reached)}})
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close()
	input, _ := json.Marshal(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "d", Input: input, Principal: alice}); err != nil {
		b.Fatal(err)
	}
	waitReached(b, reached)
	waitHead(b, st, "x", int64(b.N)+1)
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "decisions/s")
	}
}

// BenchmarkReplay measures recovery: each iteration opens a kernel on a store that holds an
// execution with 1000 recorded decisions and waits until its flow has replayed them all.
func BenchmarkReplay(b *testing.B) {
	const decisions = 1000
	st := benchStore(b)
	reached := make(chan struct{}, 1)
	opt := kernel.Options{Flows: map[string]kernel.Flow{"d": decider(reached)}}
	k, err := kernel.Open(context.Background(), st, opt)
	if err != nil {
		b.Fatal(err)
	}
	input, _ := json.Marshal(decisions)
	if _, err := k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "d", Input: input, Principal: alice}); err != nil {
		b.Fatal(err)
	}
	waitReached(b, reached)
	waitHead(b, st, "x", decisions+1)
	k.Close()

	b.ReportAllocs()
	for b.Loop() {
		k, err := kernel.Open(context.Background(), st, opt)
		if err != nil {
			b.Fatal(err)
		}
		waitReached(b, reached)
		b.StopTimer()
		k.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*decisions), "ns/decision")
	head, err := st.Head(context.Background(), kernel.LogStream("x"), 0)
	if err != nil {
		b.Fatal(err)
	}
	if head != decisions+1 {
		b.Fatalf("replays wrote to the log: head %d, want %d", head, decisions+1)
	}
}

// answerer makes n decisions (n is its input) in its first generation, then answers each message
// with a decision, telling answered of each answer it makes live.
func answerer(answered chan<- string) kernel.Flow {
	return func(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
		var n int
		_ = json.Unmarshal(input, &n)
		for i := range n {
			if _, err := c.Decide(fmt.Sprintf("d%d", i), func() (json.RawMessage, error) { return json.Marshal(i) }); err != nil {
				return nil, err
			}
		}
		for {
			m, err := c.Receive()
			if err != nil {
				return nil, err
			}
			if _, err := c.Decide("answer "+m.MessageID, func() (json.RawMessage, error) {
				answered <- m.MessageID
				return m.Payload, nil
			}); err != nil {
				return nil, err
			}
		}
	}
}

// BenchmarkFirstAnswerAfterOpen measures what a restart costs the first request: each iteration
// opens a kernel on a store holding 1000 open executions (each with 20 recorded decisions and
// one answered message) and sends one of them a message; the time is from before Open to the
// answer. The ns/op is that time; the other executions are recovered in the background.
func BenchmarkFirstAnswerAfterOpen(b *testing.B) {
	const open, decisions = 1000, 20
	st := benchStore(b)
	answered := make(chan string, open+1)
	opt := kernel.Options{Flows: map[string]kernel.Flow{"a": answerer(answered)}}
	k, err := kernel.Open(context.Background(), st, opt)
	if err != nil {
		b.Fatal(err)
	}
	input, _ := json.Marshal(decisions)
	for i := range open {
		id := fmt.Sprintf("x%04d", i)
		if _, err := k.Start(context.Background(), kernel.StartRequest{ID: id, Flow: "a", Input: input, Principal: alice}); err != nil {
			b.Fatal(err)
		}
		if _, err := k.Send(context.Background(), id, alice, "first", json.RawMessage(`1`)); err != nil {
			b.Fatal(err)
		}
	}
	for range open {
		<-answered
	}
	for i := range open {
		waitHead(b, st, fmt.Sprintf("x%04d", i), decisions+3) // started, the decisions, consumed, answer
	}
	k.Close()

	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k, err := kernel.Open(context.Background(), st, opt)
		if err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprintf("x%04d", (i*7919)%open)
		msg := fmt.Sprintf("m%d", i)
		if _, err := k.Send(context.Background(), id, alice, msg, json.RawMessage(`2`)); err != nil {
			b.Fatal(err)
		}
		for got := ""; got != msg; {
			select {
			case got = <-answered:
			case <-time.After(time.Minute):
				b.Fatal("no answer")
			}
		}
		b.StopTimer()
		k.Close()
		b.StartTimer()
	}
}
