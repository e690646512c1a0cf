package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const waitLimit = 5 * time.Second

// newServer starts a test server that is closed when the test ends.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// newHangingServer starts a test server whose handler may block on release; release is closed
// before the server shuts down.
func newHangingServer(t *testing.T, h func(release <-chan struct{}) http.HandlerFunc) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(h(release))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv
}

func sse(w http.ResponseWriter, payload string) {
	fmt.Fprintf(w, "data: %s\n\n", payload)
	w.(http.Flusher).Flush()
}

func contentChunk(text string) string {
	b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0,
		"delta": map[string]any{"content": text}, "finish_reason": nil}}})
	return string(b)
}

func finishChunk(reason string) string {
	return `{"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

func TestPlainCompletion(t *testing.T) {
	var got map[string]any
	var auth, path string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		auth = r.Header.Get("Authorization")
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, "bad", 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,
			"message":{"role":"assistant","content":"hello there",
			"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":1}"}}]},
			"finish_reason":"tool_calls"}]}`)
	})
	c := NewClient(ClientOptions{BaseURL: srv.URL + "/v1/", APIKey: "sekret", Model: "m1"})
	var deltas []string
	resp, err := c.Complete(context.Background(), Request{
		Messages: []Message{
			{Role: RoleSystem, Content: "be brief"},
			{Role: RoleUser, Content: "hi"},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c0", Name: "f", Arguments: "{}"}}},
			{Role: RoleTool, ToolCallID: "c0", Content: `{"ok":true}`},
		},
		Tools:     []Tool{{Name: "lookup", Description: "looks up", Parameters: map[string]any{"type": "object"}}},
		MaxTokens: 64,
	}, func(s string) { deltas = append(deltas, s) })
	require.NoError(t, err)

	assert.Equal(t, "/v1/chat/completions", path)
	assert.Equal(t, "Bearer sekret", auth)
	assert.Equal(t, "m1", got["model"])
	assert.EqualValues(t, 64, got["max_tokens"])
	assert.NotContains(t, got, "stream")
	msgs := got["messages"].([]any)
	require.Len(t, msgs, 4)
	call := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	assert.Equal(t, "function", call["type"])
	assert.Equal(t, "f", call["function"].(map[string]any)["name"])
	assert.Equal(t, "c0", msgs[3].(map[string]any)["tool_call_id"])
	tool := got["tools"].([]any)[0].(map[string]any)
	assert.Equal(t, "function", tool["type"])
	assert.Equal(t, "lookup", tool["function"].(map[string]any)["name"])

	assert.Equal(t, "hello there", resp.Content)
	assert.Equal(t, FinishToolCalls, resp.FinishReason)
	assert.Equal(t, []ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":1}`}}, resp.ToolCalls)
	assert.Equal(t, []string{"hello there"}, deltas)
}

func TestRequestModelOverridesDefault(t *testing.T) {
	var got struct {
		Model string `json:"model"`
	}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		assert.Empty(t, r.Header.Get("Authorization"))
		io.WriteString(w, `{"choices":[{"message":{"content":null},"finish_reason":"stop"}]}`)
	})
	resp, err := NewClient(ClientOptions{BaseURL: srv.URL, Model: "default"}).
		Complete(context.Background(), Request{Model: "other"}, nil)
	require.NoError(t, err)
	assert.Equal(t, "other", got.Model)
	assert.Equal(t, "", resp.Content)
	assert.Equal(t, FinishStop, resp.FinishReason)
}

func TestStreamedCompletion(t *testing.T) {
	var stream any
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		stream = body["stream"]
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": keep-alive\n\n")
		sse(w, `{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`)
		for _, p := range []string{"Hel", "lo ", "world"} {
			sse(w, contentChunk(p))
		}
		sse(w, finishChunk("stop"))
		sse(w, `{"choices":[],"usage":{"prompt_tokens":3}}`)
		sse(w, "[DONE]")
	})
	c := NewClient(ClientOptions{BaseURL: srv.URL, Stream: true})
	var deltas []string
	resp, err := c.Complete(context.Background(), Request{Messages: []Message{{Role: RoleUser, Content: "x"}}},
		func(s string) { deltas = append(deltas, s) })
	require.NoError(t, err)
	assert.Equal(t, true, stream)
	assert.Equal(t, []string{"Hel", "lo ", "world"}, deltas)
	assert.Equal(t, Response{Content: "Hello world", FinishReason: FinishStop}, resp)
}

func TestStreamedToolCallFragments(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_","arguments":""}}]}}]}`)
		sse(w, `{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"other","arguments":"{\"x\""}}]}}]}`)
		sse(w, `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"{\"city\":"}}]}}]}`)
		sse(w, `{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":":2}"}}]}}]}`)
		// One event split over two data lines is joined with a newline.
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\n")
		fmt.Fprint(w, "data: \"function\":{\"arguments\":\"\\\"Oslo\\\"}\"}}]}}]}\n\n")
		sse(w, finishChunk("tool_calls"))
		sse(w, "[DONE]")
	})
	resp, err := NewClient(ClientOptions{BaseURL: srv.URL, Stream: true}).
		Complete(context.Background(), Request{}, nil)
	require.NoError(t, err)
	assert.Equal(t, FinishToolCalls, resp.FinishReason)
	assert.Equal(t, []ToolCall{
		{ID: "call_a", Name: "get_weather", Arguments: `{"city":"Oslo"}`},
		{ID: "call_b", Name: "other", Arguments: `{"x":2}`},
	}, resp.ToolCalls)
}

func TestStreamAcceptsPlainJSONAnswer(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"choices":[{"message":{"content":"whole"},"finish_reason":"stop"}]}`)
	})
	var deltas []string
	resp, err := NewClient(ClientOptions{BaseURL: srv.URL, Stream: true}).
		Complete(context.Background(), Request{}, func(s string) { deltas = append(deltas, s) })
	require.NoError(t, err)
	assert.Equal(t, "whole", resp.Content)
	assert.Equal(t, []string{"whole"}, deltas)
}

func TestProviderErrorIsBounded(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, strings.Repeat("x", 3*MaxErrorBody))
	})
	for _, stream := range []bool{false, true} {
		_, err := NewClient(ClientOptions{BaseURL: srv.URL, Stream: stream}).Complete(context.Background(), Request{}, nil)
		var pe *ProviderError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, http.StatusTooManyRequests, pe.Status)
		assert.Len(t, pe.Body, MaxErrorBody)
	}
}

func TestErrorObjectInStream(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, contentChunk("par"))
		sse(w, `{"error":{"message":"overloaded"}}`)
	})
	resp, err := NewClient(ClientOptions{BaseURL: srv.URL, Stream: true}).Complete(context.Background(), Request{}, nil)
	var pe *ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, http.StatusOK, pe.Status)
	assert.Equal(t, "par", resp.Content)
}

func TestMalformedAnswers(t *testing.T) {
	cases := map[string]struct {
		stream bool
		body   string
		max    int64
	}{
		"plain not json":      {false, `{"choices":`, 0},
		"plain no choices":    {false, `{"choices":[]}`, 0},
		"stream bad chunk":    {true, "data: " + contentChunk("ok") + "\n\ndata: {nope\n\n", 0},
		"stream truncated":    {true, "data: " + contentChunk("ok") + "\n\n", 0},
		"stream bad index":    {true, `data: {"choices":[{"delta":{"tool_calls":[{"index":100000}]}}]}` + "\n\n", 0},
		"stream line too big": {true, "data: " + strings.Repeat("a", MaxLineBytes+10) + "\n\n", 0},
		"plain too large":     {false, `{"choices":[{"message":{"content":"` + strings.Repeat("a", 1000) + `"}}]}`, 100},
		"stream too large":    {true, "data: " + contentChunk(strings.Repeat("a", 1000)) + "\n\ndata: [DONE]\n\n", 100},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				io.WriteString(w, tc.body)
			})
			c := NewClient(ClientOptions{BaseURL: srv.URL, Stream: tc.stream, MaxResponseBytes: tc.max})
			resp, err := c.Complete(context.Background(), Request{}, nil)
			var pe *ProtocolError
			require.ErrorAs(t, err, &pe)
			if strings.HasPrefix(tc.body, "data: "+contentChunk("ok")) {
				assert.Equal(t, "ok", resp.Content, "the partial text survives a malformed stream")
			}
		})
	}
}

func TestTransportError(t *testing.T) {
	// A port held by a socket that never listens refuses every connection, and no other program
	// can start listening there meanwhile (as it could on the port of a closed server).
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	syscall.CloseOnExec(fd)
	defer syscall.Close(fd)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	url := "http://127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	_, err = NewClient(ClientOptions{BaseURL: url}).Complete(context.Background(), Request{}, nil)
	var te *TransportError
	require.ErrorAs(t, err, &te)
	assert.NotNil(t, errors.Unwrap(err))
}

func TestAlreadyCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewClient(ClientOptions{BaseURL: "http://127.0.0.1:1"}).Complete(ctx, Request{}, nil)
	assert.ErrorIs(t, err, context.Canceled)
}

// complete runs Complete in the background and returns a channel with its outcome.
type outcome struct {
	resp Response
	err  error
}

func completeAsync(ctx context.Context, p Provider, onDelta func(string)) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		resp, err := p.Complete(ctx, Request{Messages: []Message{{Role: RoleUser, Content: "go"}}}, onDelta)
		ch <- outcome{resp, err}
	}()
	return ch
}

func awaitOutcome(t *testing.T, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(waitLimit):
		t.Fatal("Complete did not return after cancellation")
		return outcome{}
	}
}

func TestCancelMidStreamReturnsPartial(t *testing.T) {
	srv := newHangingServer(t, func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, contentChunk("first"))
			sse(w, contentChunk(" second"))
			// Keep streaming until the client goes away.
			for {
				select {
				case <-r.Context().Done():
					return
				case <-release:
					return
				default:
				}
				if _, err := io.WriteString(w, ": tick\n\n"); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := ""
	ch := completeAsync(ctx, NewClient(ClientOptions{BaseURL: srv.URL, Stream: true}), func(s string) {
		seen += s
		if seen == "first second" {
			cancel()
		}
	})
	o := awaitOutcome(t, ch)
	require.ErrorIs(t, o.err, context.Canceled)
	assert.Equal(t, "first second", o.resp.Content)
	assert.Nil(t, o.resp.ToolCalls)
}

func TestCancelWhileServerHangs(t *testing.T) {
	srv := newHangingServer(t, func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, contentChunk("Let me"))
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := make(chan struct{})
	ch := completeAsync(ctx, NewClient(ClientOptions{BaseURL: srv.URL, Stream: true}), func(s string) { close(first) })
	select {
	case <-first:
	case <-time.After(waitLimit):
		t.Fatal("first delta never arrived")
	}
	cancel()
	o := awaitOutcome(t, ch)
	require.ErrorIs(t, o.err, context.Canceled)
	assert.Equal(t, "Let me", o.resp.Content)
}

func TestDeadlineWhileWaitingForHeaders(t *testing.T) {
	srv := newHangingServer(t, func(release <-chan struct{}) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	o := awaitOutcome(t, completeAsync(ctx, NewClient(ClientOptions{BaseURL: srv.URL}), nil))
	assert.ErrorIs(t, o.err, context.DeadlineExceeded)
}

func TestMessageJSONRoundTrip(t *testing.T) {
	in := Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "1", Name: "n", Arguments: `{"a":1}`}}}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, `{"role":"assistant","content":"","tool_calls":[{"id":"1","type":"function","function":{"name":"n","arguments":"{\"a\":1}"}}]}`, string(b))
	var out Message
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)

	tb, err := json.Marshal(Tool{Name: "t"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"function","function":{"name":"t"}}`, string(tb))
	var tool Tool
	require.NoError(t, json.Unmarshal(tb, &tool))
	assert.Equal(t, Tool{Name: "t"}, tool)
}
