package threads_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// crashRound sends one message to the planner as dana and kills the engine a random moment
// after (from nothing to 3 ms); the client then retries the same message, under the same key
// when keyed, until it is acknowledged. It returns whether the answer of the first try was lost
// (the client could not tell whether the message was taken).
func crashRound(t *testing.T, url func() string, kill, restart func(), text, key string) bool {
	t.Helper()
	post := func() (int, error) {
		req, _ := http.NewRequest("POST", url()+"/roles/planner/conversation/messages", strings.NewReader(`{"text":"ask `+text+`"}`))
		req.Header.Set("Authorization", "Bearer dana")
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	done := make(chan int, 1)
	go func() {
		st, _ := post()
		done <- st
	}()
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	kill()
	first := <-done
	restart()
	if first == http.StatusAccepted {
		return false
	}
	for {
		st, err := post()
		if err == nil && st == http.StatusAccepted {
			return true
		}
		if err == nil && st != http.StatusServiceUnavailable && st != http.StatusTooManyRequests {
			t.Fatalf("retry of %q: %d", text, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// crashFigures runs 30 rounds of crashRound and returns the acknowledged messages, the turns of
// dana's conversation and the texts the peer received, with the distinct message ids among them.
func crashFigures(t *testing.T, keyed bool) (acked, lost, turns, texts, ids int) {
	ctx := context.Background()
	peer := &fakePeer{}
	psrv := httptest.NewServer(peer)
	defer psrv.Close()
	eng := openThreadsEngine(t, psrv.URL, askModel())
	if st, v := (client{t, eng.URL}).do("POST", "/roles/planner/conversation", "dana", ""); st != 200 {
		t.Fatalf("open: %d %v", st, v)
	}
	const rounds = 30
	for i := range rounds {
		key := ""
		if keyed {
			key = fmt.Sprintf("k-%d", i)
		}
		if crashRound(t, func() string { return eng.URL }, eng.Kill, func() { eng.Restart() }, fmt.Sprintf("m%02d", i), key) {
			lost++
		}
		acked++
	}
	eventually(t, "every turn completed", func() bool {
		cv, err := eng.Threads().Conversation(ctx, tDana, "planner")
		if err != nil {
			return false
		}
		for _, tr := range cv.Turns {
			if tr.Status != "completed" {
				return false
			}
		}
		turns = len(cv.Turns)
		return true
	})
	eventually(t, "every text sent", func() bool {
		vs, _ := eng.Threads().List(ctx, tDana)
		for _, v := range vs {
			for _, x := range v.Texts {
				if x.State != "sent" {
					return false
				}
			}
		}
		return true
	})
	got := peer.received()
	seen := map[string]bool{}
	for _, x := range got {
		seen[x.Message] = true
	}
	return acked, lost, turns, len(got), len(seen)
}

// TestRetriedMessagesUnderAKeyRunOnceAcrossCrashes: a client that retries every message under its
// key until acknowledged, across 30 kills of the engine, gets one turn per message and the peer one
// message id per message (a text sent again after a crash keeps its id).
func TestRetriedMessagesUnderAKeyRunOnceAcrossCrashes(t *testing.T) {
	acked, lost, turns, texts, ids := crashFigures(t, true)
	t.Logf("keyed: %d acknowledged (%d after a lost answer), %d turns, %d texts at the peer under %d message ids", acked, lost, turns, texts, ids)
	if turns != acked || ids != acked {
		t.Fatalf("%d acknowledged messages made %d turns and %d message ids at the peer", acked, turns, ids)
	}
}

// TestRetriedMessagesWithoutAKeyFigures prints the same figures for a client that retries without
// a key (each retry is a new message). Only with LOOM_CRASH_FIGURES set; it asserts nothing.
//
//	LOOM_CRASH_FIGURES=1 go test ./reference/internal/threads -run TestRetriedMessagesWithoutAKeyFigures -v
func TestRetriedMessagesWithoutAKeyFigures(t *testing.T) {
	if os.Getenv("LOOM_CRASH_FIGURES") == "" {
		t.Skip("set LOOM_CRASH_FIGURES to print the figures")
	}
	acked, lost, turns, texts, ids := crashFigures(t, false)
	t.Logf("no key: %d acknowledged (%d after a lost answer), %d turns, %d texts at the peer under %d message ids", acked, lost, turns, texts, ids)
}
