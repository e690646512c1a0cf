package world_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

type answer struct {
	status int
	body   string
}

func postAsync(t *testing.T, ctx context.Context, url string, body any, header ...string) <-chan answer {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	ch := make(chan answer, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
		if err != nil {
			ch <- answer{}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- answer{}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- answer{resp.StatusCode, string(b)}
	}()
	return ch
}

func TestToolBehaviors(t *testing.T) {
	w := start(t, world.Options{})
	u := w.URL() + "/tools/"
	require.NoError(t, w.Tools().Define("weather", world.Behavior{Result: map[string]any{"temp": 3}}))
	require.NoError(t, w.Tools().Enqueue("weather",
		world.Behavior{Fail: &world.Failure{Status: http.StatusServiceUnavailable, Message: "station down"}},
		world.Behavior{Result: json.RawMessage(`{"temp":1}`)}))
	require.NoError(t, w.Tools().Enqueue("empty", world.Behavior{}))

	status, body := post(t, u+"weather", map[string]string{"city": "Oslo"}, "Idempotency-Key", "k1")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.JSONEq(t, `{"error":"station down"}`, string(body))

	// The failure was not remembered: a retry with the same key takes the next behavior.
	status, body = post(t, u+"weather", map[string]string{"city": "Oslo"}, "Idempotency-Key", "k1")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"temp":1}`, string(body))

	// The default, then a replay of k1's success without consuming anything.
	status, body = post(t, u+"weather", map[string]string{"city": "Rome"}, "Idempotency-Key", "k2")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"temp":3}`, string(body))
	status, body = post(t, u+"weather", map[string]string{"city": "Oslo"}, "Idempotency-Key", "k1")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"temp":1}`, string(body))

	status, body = post(t, u+"empty", map[string]string{})
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{}`, string(body))
	// Queue used up and no default: unknown from now on.
	status, body = post(t, u+"empty", map[string]string{})
	assert.Equal(t, http.StatusNotFound, status)
	assert.JSONEq(t, `{"error":"unknown tool"}`, string(body))
	status, body = post(t, u+"nosuch", map[string]string{})
	assert.Equal(t, http.StatusNotFound, status)
	assert.JSONEq(t, `{"error":"unknown tool"}`, string(body))

	require.NoError(t, w.Tools().WaitCallsOf(bounded(t), "weather", 4))
	require.NoError(t, w.Tools().WaitCalls(bounded(t), 7))
	calls := w.Tools().CallsOf("weather")
	require.Len(t, calls, 4)
	assert.Equal(t, "k1", calls[0].IdempotencyKey)
	assert.JSONEq(t, `{"city":"Oslo"}`, string(calls[0].Args))
	assert.False(t, calls[2].Replayed)
	assert.True(t, calls[3].Replayed)
	last, err := w.Tools().WaitDone(bounded(t), 6)
	require.NoError(t, err)
	assert.Equal(t, "nosuch", last.Name)
	assert.Equal(t, http.StatusNotFound, last.Status)
	assert.Equal(t, 6, last.Index)
}

func TestToolHold(t *testing.T) {
	w := start(t, world.Options{})
	h := w.NewHold()
	require.NoError(t, w.Tools().Enqueue("slow", world.Behavior{Hold: h, Result: map[string]bool{"ok": true}},
		world.Behavior{Hold: h, Result: map[string]bool{"ok": true}}))

	got := postAsync(t, bounded(t), w.URL()+"/tools/slow", map[string]int{"n": 1}, "Idempotency-Key", "a")
	require.NoError(t, h.WaitReached(bounded(t)))
	select {
	case a := <-got:
		t.Fatalf("answered before release: %+v", a)
	default:
	}
	h.Release()
	a := await(t, got, "the released tool answer")
	assert.Equal(t, http.StatusOK, a.status)
	assert.JSONEq(t, `{"ok":true}`, a.body)

	// A second hold, abandoned by its client.
	h2 := w.NewHold()
	require.NoError(t, w.Tools().Enqueue("stuck", world.Behavior{Hold: h2}))
	ctx, cancel := context.WithCancel(bounded(t))
	got = postAsync(t, ctx, w.URL()+"/tools/stuck", map[string]int{}, "Idempotency-Key", "b")
	require.NoError(t, h2.WaitReached(bounded(t)))
	cancel()
	await(t, got, "the abandoned call")
	inv, err := w.Tools().WaitDone(bounded(t), 1)
	require.NoError(t, err)
	assert.True(t, inv.Aborted)
	assert.Zero(t, inv.Status)
}

func TestSummarizer(t *testing.T) {
	w := start(t, world.Options{})
	u := w.URL() + "/summarize"
	msgs := []map[string]string{{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}}

	status, body := post(t, u, map[string]any{"messages": msgs, "previous": ""})
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"summary":"summary of 2 messages"}`, string(body))

	require.NoError(t, w.Summarizer().Enqueue(world.Summary{Text: "cats"}, world.Summary{Fail: &world.Failure{Status: 503}}))
	status, body = post(t, u, map[string]any{"messages": msgs, "previous": "summary of 2 messages"})
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"summary":"cats"}`, string(body))
	status, _ = post(t, u, map[string]any{"messages": msgs})
	assert.Equal(t, http.StatusServiceUnavailable, status)
	status, body = post(t, u, map[string]any{"messages": msgs[:1], "previous": "cats"})
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"summary":"summary of 1 messages and a previous summary"}`, string(body))

	require.NoError(t, w.Summarizer().WaitRequests(bounded(t), 4))
	reqs := w.Summarizer().Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, "summary of 2 messages", reqs[1].Previous)
	assert.Equal(t, []world.SummaryMessage{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}, reqs[0].Messages)
	assert.Equal(t, "cats", reqs[1].Answer)
	assert.Equal(t, "", reqs[2].Answer)
	assert.Equal(t, 3, reqs[3].Index)
}

func TestIdentity(t *testing.T) {
	w := start(t, world.Options{})
	u := w.URL() + "/identity"
	p := sutconfig.Principal{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob", Grants: []string{"weather"}, Narrowed: true}
	require.NoError(t, w.Identity().Add("tok-a", p))

	status, body := post(t, u, map[string]string{"token": "tok-a"})
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"tenant":"acme","actor":"alice","onBehalfOf":"bob","grants":["weather"],"narrowed":true}`, string(body))

	status, body = post(t, u, map[string]string{"token": "nope"})
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.JSONEq(t, `{"error":"unauthenticated"}`, string(body))

	ps := w.Identity().Principals()
	assert.Equal(t, map[string]sutconfig.Principal{"tok-a": p}, ps)
	ps["tok-a"].Grants[0] = "changed"
	assert.Equal(t, []string{"weather"}, w.Identity().Principals()["tok-a"].Grants, "Principals returns a copy")

	w.Identity().Revoke("tok-a")
	status, _ = post(t, u, map[string]string{"token": "tok-a"})
	assert.Equal(t, http.StatusUnauthorized, status)

	require.NoError(t, w.Identity().WaitLookups(bounded(t), 3))
	looks := w.Identity().Lookups()
	require.Len(t, looks, 3)
	assert.True(t, looks[0].Known)
	assert.False(t, looks[1].Known)
	assert.False(t, looks[2].Known)

	require.NoError(t, w.Identity().Add("tok-b", sutconfig.Principal{Actor: "b"}))
	w.Reset()
	assert.Empty(t, w.Identity().Principals())
	assert.Empty(t, w.Identity().Lookups())
}

func TestClearance(t *testing.T) {
	w := start(t, world.Options{})
	u := w.URL() + "/clearance"
	ask := func(actor string, classes ...string) (int, string) {
		if classes == nil {
			classes = []string{}
		}
		status, body := post(t, u, map[string]any{"viewer": map[string]string{"tenant": "acme", "actor": actor}, "classes": classes})
		return status, string(body)
	}
	require.NoError(t, w.Clearance().Allow("alice", "finance"))
	require.NoError(t, w.Clearance().Allow("alice", "hr"))

	status, body := ask("alice", "finance", "hr")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"cleared":true}`, body)
	_, body = ask("alice", "finance", "legal")
	assert.JSONEq(t, `{"cleared":false}`, body)
	_, body = ask("bob", "finance")
	assert.JSONEq(t, `{"cleared":false}`, body)
	_, body = ask("bob")
	assert.JSONEq(t, `{"cleared":true}`, body, "no classes asked: vacuously cleared")

	require.NoError(t, w.Clearance().AnswerWith("alice", json.RawMessage(`"yes"`)))
	_, body = ask("alice", "finance")
	assert.JSONEq(t, `{"cleared":"yes"}`, body)
	require.NoError(t, w.Clearance().AnswerWith("alice", json.RawMessage(`1`)))
	_, body = ask("alice", "finance")
	assert.JSONEq(t, `{"cleared":1}`, body)
	require.NoError(t, w.Clearance().FailWith("alice", world.Failure{Status: http.StatusServiceUnavailable}))
	status, _ = ask("alice", "finance")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	require.NoError(t, w.Clearance().AnswerWith("alice", nil))
	_, body = ask("alice", "finance")
	assert.JSONEq(t, `{"cleared":true}`, body)

	require.NoError(t, w.Clearance().WaitCalls(bounded(t), 8))
	calls := w.Clearance().Calls()
	require.Len(t, calls, 8)
	assert.Equal(t, world.Viewer{Tenant: "acme", Actor: "alice"}, calls[0].Viewer)
	assert.Equal(t, []string{"finance", "hr"}, calls[0].Classes)
	assert.JSONEq(t, `true`, string(calls[0].Answer))
	assert.JSONEq(t, `"yes"`, string(calls[4].Answer))
	assert.Nil(t, calls[6].Answer)
	assert.Equal(t, http.StatusServiceUnavailable, calls[6].Status)

	w.Reset()
	_, body = ask("alice", "finance")
	assert.JSONEq(t, `{"cleared":false}`, body)
	assert.Len(t, w.Clearance().Calls(), 1)
}
