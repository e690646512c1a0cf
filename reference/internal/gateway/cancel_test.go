package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// goneKey carries the function that plays the client going away, and how.
type goneKey struct{}

type gone struct {
	cancel context.CancelFunc
	// authFails: the identity lookup itself fails because the request was cancelled under it;
	// otherwise the caller is authenticated and the request is cancelled just after.
	authFails bool
}

// TestClientGoneIsNotAnInternalError cancels each route's request as its client would by going
// away: during authentication (the identity lookup fails with the request's context error), or
// right after it (the operation then runs on a cancelled context). Neither is an internal error:
// the error hook gets nothing, nothing is logged as internal, and no 500 is answered.
func TestClientGoneIsNotAnInternalError(t *testing.T) {
	var mu sync.Mutex
	var reports []string
	var logged bytes.Buffer
	auth := func(r *http.Request) (loomtype.Identity, error) {
		if g, ok := r.Context().Value(goneKey{}).(*gone); ok {
			g.cancel()
			if g.authFails {
				return loomtype.Identity{}, fmt.Errorf("identity lookup: %w", r.Context().Err())
			}
		}
		return fuzzAlice, nil
	}
	eng := reftest.Open(t, reftest.Shared(fuzzService),
		reftest.Conversation(func(c *conversation.Config) { c.Keys = [][]byte{bytes.Repeat([]byte{0x42}, 32)} }),
		reftest.With(func(o *reference.Options) {
			o.Gateway = gateway.Config{Authenticate: auth, PostsPerMinute: 1 << 30, RuntimeDoor: true,
				OnError: func(id string, err error) {
					mu.Lock()
					reports = append(reports, id+": "+err.Error())
					mu.Unlock()
				},
				Logger: slog.New(slog.NewTextHandler(&logged, nil))}
			o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
	cv := eng.Conversations()
	fresh := func(shared bool) string {
		opt := conversation.StartOptions{}
		if shared {
			opt = conversation.StartOptions{Mode: conversation.ModeShared, Participants: []loomtype.Identity{fuzzBob}}
		}
		st, _, err := cv.Start(context.Background(), fuzzAlice, opt)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		return st.ID
	}
	routes := []struct {
		method, path, body string
		shared             bool
	}{
		{"POST", "/conversations", `{}`, false},
		{"POST", "/conversations", `{"mode":"shared","participants":[{"tenant":"t1","actor":"bob"}]}`, false},
		{"GET", "/conversations/{id}", "", false},
		{"POST", "/conversations/{id}/turns", `{"text":"hello","messageId":"m1"}`, false},
		{"POST", "/conversations/{id}/close", `{}`, false},
		{"GET", "/conversations/{id}/history", "", false},
		{"GET", "/conversations/{id}/events", "", false},
		{"GET", "/conversations/{id}/participants", "", true},
		{"POST", "/conversations/{id}/participants", `{"op":"add","identity":{"tenant":"t1","actor":"carol"}}`, true},
		{"POST", "/runtime/executions", `{"id":"raw-{id}","flow":"conversation.turn","input":{}}`, false},
		{"POST", "/runtime/executions/{id}/messages", `{"messageId":"m1","payload":{}}`, false},
		{"GET", "/runtime/executions/{id}/log", "", false},
	}
	for _, authFails := range []bool{true, false} {
		for _, rt := range routes {
			name := fmt.Sprintf("%s %s (authentication fails: %v)", rt.method, rt.path, authFails)
			id := fresh(rt.shared)
			path := strings.ReplaceAll(rt.path, "{id}", id)
			body := strings.ReplaceAll(rt.body, "{id}", id)
			ctx, cancel := context.WithCancel(context.Background())
			ctx = context.WithValue(ctx, goneKey{}, &gone{cancel: cancel, authFails: authFails})
			req := httptest.NewRequestWithContext(ctx, rt.method, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer alice")
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			rec := httptest.NewRecorder()
			aborted := serveAbortable(eng.Handler(), rec, req)
			cancel()
			mu.Lock()
			got := append([]string(nil), reports...)
			reports = nil
			mu.Unlock()
			if len(got) != 0 {
				t.Errorf("%s: the error hook got %d report(s) for a request whose client went away: %q", name, len(got), got)
			}
			if !aborted && rec.Code == http.StatusInternalServerError {
				t.Errorf("%s: answered 500 %s to a client that went away", name, rec.Body.String())
			}
		}
	}
	if strings.Contains(logged.String(), "internal") {
		t.Errorf("logged as internal: %s", logged.String())
	}
}

// serveAbortable serves one request and reports whether the handler aborted it
// (http.ErrAbortHandler: the connection is closed without an answer).
func serveAbortable(h http.Handler, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(w, r)
	return false
}
