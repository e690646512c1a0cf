package world_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

const waitLimit = 5 * time.Second

// start returns a listening World that is closed when the test ends.
func start(t *testing.T, opts world.Options) *world.World {
	t.Helper()
	w := world.New(opts)
	_, err := w.Start("")
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// bounded returns a context that ends after waitLimit.
func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// post sends body (a string is sent as it is, anything else JSON-encoded) and returns the status
// and the answer body. It must be called from the test's goroutine.
func post(t *testing.T, url string, body any, header ...string) (int, []byte) {
	t.Helper()
	status, out, err := send(url, body, header...)
	require.NoError(t, err)
	return status, out
}

// send is post for any goroutine: it reports failures as an error.
func send(url string, body any, header ...string) (int, []byte, error) {
	var b []byte
	if s, ok := body.(string); ok {
		b = []byte(s)
	} else {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func TestConfigFillsEndpoints(t *testing.T) {
	w := start(t, world.Options{})
	base := sutconfig.SUTConfig{Listen: "127.0.0.1:9", DataDir: "/d",
		Tools: sutconfig.ToolsConfig{Definitions: []sutconfig.ToolDef{{Name: "x"}}}}
	cfg := w.Config(base)
	u := w.URL()
	require.True(t, strings.HasPrefix(u, "http://127.0.0.1:"))
	assert.Equal(t, u+"/v1", cfg.Model.BaseURL)
	assert.Equal(t, u+"/tools", cfg.Tools.BaseURL)
	assert.Equal(t, u+"/summarize", cfg.Summarizer.URL)
	assert.Equal(t, u+"/identity", cfg.Identity.URL)
	assert.Equal(t, u+"/clearance", cfg.Clearance.URL)
	assert.Equal(t, u+"/errors", cfg.ErrorHook.URL)
	assert.Equal(t, "127.0.0.1:9", cfg.Listen)
	assert.Equal(t, base.Tools.Definitions, cfg.Tools.Definitions)
}

func TestOptionsURLForExternalServer(t *testing.T) {
	w := world.New(world.Options{URL: "http://example.test:1/"})
	defer w.Close()
	assert.Equal(t, "http://example.test:1", w.URL())
	assert.Equal(t, "http://example.test:1/v1", w.Config(sutconfig.SUTConfig{}).Model.BaseURL)
}

func TestStartTwiceAndAfterClose(t *testing.T) {
	w := world.New(world.Options{})
	_, err := w.Start("127.0.0.1:0")
	require.NoError(t, err)
	_, err = w.Start("127.0.0.1:0")
	assert.ErrorIs(t, err, world.ErrStarted)
	require.NoError(t, w.Close())
	require.NoError(t, w.Close())
	_, err = w.Start("127.0.0.1:0")
	assert.ErrorIs(t, err, world.ErrClosed)
}

func TestHandlerAfterCloseAnswers503(t *testing.T) {
	w := world.New(world.Options{})
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	require.NoError(t, w.Close())
	status, body := post(t, srv.URL+"/errors", map[string]any{"errorId": "e"})
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.JSONEq(t, `{"error":"world closed"}`, string(body))
}

func TestWaitFailsWithContextAndClose(t *testing.T) {
	w := start(t, world.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := w.Model().WaitRequests(ctx, 1)
	var we *world.WaitError
	require.ErrorAs(t, err, &we)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotEmpty(t, we.What)

	done := make(chan error, 1)
	go func() { done <- w.ErrorHook().WaitErrors(context.Background(), 1) }()
	require.NoError(t, w.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, world.ErrClosed)
	case <-time.After(waitLimit):
		t.Fatal("wait did not end at Close")
	}
}

func TestMalformedRequestsAreRejected(t *testing.T) {
	w := start(t, world.Options{MaxBodyBytes: 1024})
	u := w.URL()
	cases := []struct {
		path   string
		body   string
		status int
	}{
		{"/v1/chat/completions", `{`, 400},
		{"/v1/chat/completions", `null`, 400},
		{"/v1/chat/completions", `{"messages":[]}`, 400},
		{"/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":{"x":1}}]}`, 400},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`, 413},
		{"/tools/x", `[1]`, 400},
		{"/tools/x", `null`, 400},
		{"/summarize", `{"previous":""}`, 400},
		{"/identity", `{}`, 400},
		{"/clearance", `{"viewer":{"actor":"a"}}`, 400},
		{"/errors", `{"error":"boom"}`, 400},
		{"/errors", `"text"`, 400},
	}
	for _, tc := range cases {
		status, body := post(t, u+tc.path, tc.body)
		assert.Equal(t, tc.status, status, "%s %s", tc.path, tc.body)
		if strings.HasPrefix(tc.path, "/v1/") {
			// The model answers as an OpenAI-compatible provider does.
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			assert.NotEmpty(t, e.Error.Message)
			assert.Equal(t, "invalid_request_error", e.Error.Type)
			continue
		}
		var e struct {
			Error string `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &e), "%s", body)
		assert.NotEmpty(t, e.Error)
	}
	assert.Len(t, w.Rejections(), len(cases))
	w.Reset()
	assert.Empty(t, w.Rejections())
	assert.Equal(t, 0, w.Model().Count())

	// Wrong method and unknown path never reach a handler that could misbehave.
	resp, err := http.Get(u + "/v1/chat/completions")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestRecordingsAreBounded(t *testing.T) {
	w := start(t, world.Options{MaxRecords: 2})
	for i := 0; i < 3; i++ {
		status, _ := post(t, w.URL()+"/errors", map[string]any{"errorId": "e", "turn": i})
		require.Equal(t, http.StatusNoContent, status)
	}
	require.NoError(t, w.ErrorHook().WaitErrors(bounded(t), 3))
	assert.Len(t, w.ErrorHook().Errors(), 2)

	w2 := start(t, world.Options{MaxRecordBytes: 100})
	for i := 0; i < 3; i++ {
		post(t, w2.URL()+"/tools/t", map[string]string{"pad": strings.Repeat("x", 80)})
	}
	require.NoError(t, w2.Tools().WaitCalls(bounded(t), 3))
	assert.Len(t, w2.Tools().Calls(), 1)
}

func TestScriptsAreBounded(t *testing.T) {
	w := start(t, world.Options{MaxScript: 2})
	require.NoError(t, w.Model().Enqueue(world.Reply{}, world.Reply{}))
	assert.ErrorIs(t, w.Model().Enqueue(world.Reply{}), world.ErrScriptFull)
	assert.ErrorIs(t, w.Model().EnqueueFor("x", world.Reply{}), world.ErrScriptFull)
	assert.ErrorIs(t, w.Tools().Enqueue("t", world.Behavior{}, world.Behavior{}, world.Behavior{}), world.ErrScriptFull)
	assert.ErrorIs(t, w.Summarizer().Enqueue(world.Summary{}, world.Summary{}, world.Summary{}), world.ErrScriptFull)
	require.NoError(t, w.Identity().Add("a", sutconfig.Principal{Actor: "a"}))
	require.NoError(t, w.Identity().Add("b", sutconfig.Principal{Actor: "b"}))
	assert.ErrorIs(t, w.Identity().Add("c", sutconfig.Principal{Actor: "c"}), world.ErrScriptFull)
	assert.ErrorIs(t, w.Clearance().Allow("a", "1", "2", "3"), world.ErrScriptFull)
}

func TestErrorHook(t *testing.T) {
	w := start(t, world.Options{})
	ctx := bounded(t)
	got204 := postAsync(t, ctx, w.URL()+"/errors", map[string]any{"errorId": "E1", "error": "disk full", "conversationId": "c1", "turn": 3})
	require.NoError(t, w.ErrorHook().WaitErrors(ctx, 1))
	assert.Equal(t, http.StatusNoContent, await(t, got204, "the hook's answer").status)
	got := w.ErrorHook().Errors()
	require.Len(t, got, 1)
	assert.Equal(t, "E1", got[0].ErrorID)
	assert.Equal(t, "disk full", got[0].Error)
	assert.Equal(t, "c1", got[0].ConversationID)
	assert.Equal(t, 3, got[0].Turn)
	assert.False(t, got[0].Arrived.IsZero())
}

func TestConcurrentUse(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Identity().Add("tok", sutconfig.Principal{Actor: "a"}))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				for _, c := range []struct {
					path string
					body any
				}{
					{"/v1/chat/completions", map[string]any{"messages": []any{map[string]string{"role": "user", "content": "x"}}}},
					{"/identity", map[string]string{"token": "tok"}},
					{"/tools/t", map[string]int{"n": j}},
				} {
					_, _, err := send(w.URL()+c.path, c.body)
					assert.NoError(t, err)
				}
				_ = w.Model().Requests()
				_ = w.Tools().Calls()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; j < 20; j++ {
			_ = w.Model().Enqueue(world.Reply{Text: "scripted"})
			_ = w.Identity().Principals()
		}
	}()
	wg.Wait()
	assert.Equal(t, 80, w.Model().Count())
	assert.Len(t, w.Identity().Lookups(), 80)
}

func TestPanicsAreContained(t *testing.T) {
	// A result that cannot be encoded must not take the world down.
	w := start(t, world.Options{})
	require.NoError(t, w.Tools().Define("bad", world.Behavior{Result: func() {}}))
	status, _ := post(t, w.URL()+"/tools/bad", `{}`)
	assert.Equal(t, http.StatusInternalServerError, status)
	status, _ = post(t, w.URL()+"/errors", map[string]string{"errorId": "still alive"})
	assert.Equal(t, http.StatusNoContent, status)
}

func TestWaitErrorUnwraps(t *testing.T) {
	err := &world.WaitError{What: "x", Err: context.Canceled}
	assert.True(t, errors.Is(err, context.Canceled))
}
