package conversation

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// behindRejections opens a conversation with one answered turn followed by n empty messages,
// every one of them recorded (maxInvalidRecords is set above n: the worst case for a reader
// looking for the newest accepted turn), and waits until the last is recorded.
func behindRejections(tb testing.TB, n int) (*Conversations, *countingStore, string, func()) {
	tb.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "loom.db"), sqlite.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	dl, err := New(Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}, MaxInvalidRecords: n + 1, RotateEveryTurns: 2 * (n + 2)}, Deps{}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	cs := &countingStore{Store: st}
	k, err := kernel.Open(ctx, cs, kernel.Options{Flows: dl.Flows()})
	if err != nil {
		tb.Fatal(err)
	}
	cv := dl.Client(k)
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	s, _, err := cv.Start(ctx, alice, StartOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	send := func(text string) {
		if _, err := cv.SendTurn(ctx, alice, s.ID, text, SendOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	send("hello")
	for range n {
		send(" ")
	}
	want := int64(n + 2)
	for deadline := time.Now().Add(5 * time.Minute); ; {
		page, err := cv.History(ctx, alice, s.ID, HistoryOptions{Direction: Backward, Limit: 1})
		if err != nil {
			tb.Fatal(err)
		}
		if len(page.Entries) == 1 && page.Entries[0].Ord == want {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d records not written in time", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cs.take()
	return cv, cs, s.ID, func() { k.Close(); st.Close() }
}

// BenchmarkStatusBehindRejections: a status read costs the same behind 1 rejected record as
// behind 5 200, and counts the one accepted turn either way.
//
//	go test ./reference/internal/conversation -run '^$' -bench StatusBehindRejections -benchtime 200x
func BenchmarkStatusBehindRejections(b *testing.B) {
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	for _, n := range []int{1, 5200} {
		b.Run(fmt.Sprintf("rejections=%d", n), func(b *testing.B) {
			cv, _, id, done := behindRejections(b, n)
			defer done()
			b.ResetTimer()
			for range b.N {
				st, err := cv.Status(context.Background(), alice, id)
				if err != nil {
					b.Fatal(err)
				}
				if st.Turns != 1 {
					b.Fatalf("status counts %d turns behind %d rejections, want 1", st.Turns, n)
				}
			}
		})
	}
}

// TestStatusBehindRejections: behind 600 recorded rejections, far more than one backward read
// of the history takes in (maxScan 10 here), the status still counts the one accepted turn, and
// it reads the store exactly as behind a single rejection.
func TestStatusBehindRejections(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 600 records")
	}
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	var reads [][]string
	for _, n := range []int{1, 600} {
		cv, cs, id, done := behindRejections(t, n)
		cv.cfg.MaxScan = 10
		cs.ids = []string{id}
		st, err := cv.Status(context.Background(), alice, id)
		reads = append(reads, cs.take())
		done()
		if err != nil {
			t.Fatal(err)
		}
		if st.Turns != 1 {
			t.Fatalf("status counts %d turns behind %d rejections, want 1", st.Turns, n)
		}
	}
	if strings.Join(reads[0], "\n") != strings.Join(reads[1], "\n") {
		t.Fatalf("the status reads the store differently behind 600 rejections:\n%s\nthan behind 1:\n%s", reads[1], reads[0])
	}
}

// TestEmptyCountedOnlyWhereStartSaysSo: a conversation Start makes counts empty messages against
// MaxInvalidRecords; one whose start input predates the count (no countEmpty) records every one,
// as its log was written, so replaying such a log never diverges.
func TestEmptyCountedOnlyWhereStartSaysSo(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dl, err := New(Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}, MaxInvalidRecords: 2}, Deps{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	if err != nil {
		t.Fatal(err)
	}
	cv := dl.Client(k)
	defer k.Close()
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	current, _, err := cv.Start(ctx, alice, StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	legacy := "c_legacy"
	if _, err := k.Start(ctx, kernel.StartRequest{ID: legacy, Flow: FlowName, Input: []byte(`{"v":1,"owner":{"tenant":"acme","actor":"alice"},"mode":"owner"}`), Principal: alice}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int64{current.ID: 2 + 2, legacy: 3 + 2} {
		for _, text := range []string{"", " ", "\t", "hi"} {
			if _, err := cv.SendTurn(ctx, alice, id, text, SendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var got int64
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			page, err := cv.History(ctx, alice, id, HistoryOptions{Direction: Backward, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Entries) == 1 && page.Entries[0].Role == loomtype.RoleAssistant {
				got = page.Entries[0].Ord
				break
			}
		}
		if got != want {
			t.Errorf("%s: the reply is record %d, want %d", id, got, want)
		}
	}
}
