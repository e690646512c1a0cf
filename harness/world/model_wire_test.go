package world_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference/model"
)

// rawPost sends body with the given Content-Type ("" sends none) and returns the whole answer.
func rawPost(t *testing.T, url, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// sseLines returns the lines of an event stream, blank lines included.
func sseLines(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	require.NoError(t, sc.Err())
	return out
}

// sseEvents returns the data of each event of a stream (several data lines joined with "\n"),
// and the comment lines met.
func sseEvents(t *testing.T, b []byte) (events []string, comments []string) {
	t.Helper()
	var data []string
	for _, line := range sseLines(t, b) {
		switch {
		case line == "":
			if len(data) > 0 {
				events = append(events, strings.Join(data, "\n"))
				data = nil
			}
		case strings.HasPrefix(line, ":"):
			comments = append(comments, line)
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			t.Fatalf("unexpected stream line %q", line)
		}
	}
	require.Empty(t, data, "an event without its blank line")
	return events, comments
}

type wireUsage struct {
	PromptTokens     *int `json:"prompt_tokens"`
	CompletionTokens *int `json:"completion_tokens"`
	TotalTokens      *int `json:"total_tokens"`
}

type wireAnswer struct {
	Object  string            `json:"object"`
	Choices []json.RawMessage `json:"choices"`
	Usage   *wireUsage        `json:"usage"`
}

// checkUsage asserts that u is a whole usage object whose total is the sum of its parts and whose
// counts are the heuristic of spec/token-counting.md (ceil(ascii/4) + other per text, 4 per message).
func checkUsage(t *testing.T, u *wireUsage, prompt, completion int) {
	t.Helper()
	require.NotNil(t, u, "usage")
	require.NotNil(t, u.PromptTokens, "usage.prompt_tokens")
	require.NotNil(t, u.CompletionTokens, "usage.completion_tokens")
	require.NotNil(t, u.TotalTokens, "usage.total_tokens")
	assert.Equal(t, prompt, *u.PromptTokens)
	assert.Equal(t, completion, *u.CompletionTokens)
	assert.Equal(t, prompt+completion, *u.TotalTokens)
}

const chatBody = `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}]%s}`

func TestModelPlainAnswerCarriesUsage(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Model().Enqueue(world.Reply{Text: "Hi you"}))
	resp, body := rawPost(t, w.URL()+world.PathModel, "application/json", strings.Replace(chatBody, "%s", "", 1))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var got wireAnswer
	require.NoError(t, json.Unmarshal(body, &got))
	// "be brief": 8 ASCII = 2, +4; "hello there": 11 ASCII = 3, +4; "Hi you": 6 ASCII = 2.
	checkUsage(t, got.Usage, 13, 2)
}

func TestModelStreamIncludesUsageOnlyWhenAsked(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Model().Enqueue(world.Reply{Chunks: []string{"Hi", " you"}}, world.Reply{Chunks: []string{"Hi", " you"}}))

	resp, body := rawPost(t, w.URL()+world.PathModel, "application/json",
		strings.Replace(chatBody, "%s", `,"stream":true,"stream_options":{"include_usage":true}`, 1))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	events, _ := sseEvents(t, body)
	require.GreaterOrEqual(t, len(events), 3)
	assert.Equal(t, "[DONE]", events[len(events)-1])
	var last wireAnswer
	require.NoError(t, json.Unmarshal([]byte(events[len(events)-2]), &last))
	assert.Equal(t, "chat.completion.chunk", last.Object)
	assert.NotNil(t, last.Choices, "choices is an empty list, not absent")
	assert.Empty(t, last.Choices)
	checkUsage(t, last.Usage, 13, 2)
	for _, e := range events[:len(events)-2] {
		var ch wireAnswer
		require.NoError(t, json.Unmarshal([]byte(e), &ch))
		assert.Len(t, ch.Choices, 1, e)
		assert.Nil(t, ch.Usage, e)
	}

	// Not asked: no chunk carries usage, every chunk has its choice.
	resp, body = rawPost(t, w.URL()+world.PathModel, "application/json", strings.Replace(chatBody, "%s", `,"stream":true`, 1))
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	events, _ = sseEvents(t, body)
	assert.Equal(t, "[DONE]", events[len(events)-1])
	for _, e := range events[:len(events)-1] {
		var ch wireAnswer
		require.NoError(t, json.Unmarshal([]byte(e), &ch))
		assert.Len(t, ch.Choices, 1, e)
		assert.Nil(t, ch.Usage, e)
	}
}

func TestModelRefusalIsAnErrorObject(t *testing.T) {
	w := start(t, world.Options{})
	for name, body := range map[string]string{
		"no messages":    `{"model":"m","messages":[]}`,
		"not JSON":       `{"model":`,
		"dangling calls": `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"x"}]}`,
	} {
		resp, b := rawPost(t, w.URL()+world.PathModel, "application/json", body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, name)
		var got map[string]map[string]any
		require.NoError(t, json.Unmarshal(b, &got), "%s: %s", name, b)
		require.Contains(t, got, "error", name)
		assert.IsType(t, "", got["error"]["message"], name)
		assert.NotEmpty(t, got["error"]["message"], name)
		assert.Equal(t, "invalid_request_error", got["error"]["type"], name)
	}
	assert.Len(t, w.Rejections(), 3)
}

func TestContentTypeMustBeJSON(t *testing.T) {
	w := start(t, world.Options{})
	paths := []string{world.PathModel, world.PathTools + "lookup", world.PathSummarize, world.PathIdentity,
		world.PathClearance, world.PathErrorHook, world.PathMemoryRecall, world.PathMemoryWrite}
	body := strings.Replace(chatBody, "%s", "", 1)
	for _, p := range paths {
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"} {
			resp, b := rawPost(t, w.URL()+p, ct, body)
			assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%s with Content-Type %q: %s", p, ct, b)
		}
	}
	assert.Len(t, w.Rejections(), len(paths)*4)
	assert.Zero(t, w.Model().Count())
	assert.Empty(t, w.Tools().Calls())

	// Parameters and case do not matter.
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		resp, b := rawPost(t, w.URL()+world.PathModel, ct, body)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%q: %s", ct, b)
	}
}

func TestOfficialShapeWithReferenceClient(t *testing.T) {
	// The reference's client reads the default answers, streamed and plain.
	w := start(t, world.Options{})
	for _, stream := range []bool{true, false} {
		resp, err := client(w, stream).Complete(bounded(t), model.Request{Messages: userMsgs("hello")}, nil)
		require.NoError(t, err)
		assert.Equal(t, model.Response{Content: "re: hello", FinishReason: "stop"}, resp)
	}
}

func TestModelScriptedStreamForms(t *testing.T) {
	chunks := []string{"Hel", "lo, ", `"you"`}
	calls := []world.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"a,b"}`}}
	streamed := strings.Replace(chatBody, "%s", `,"stream":true`, 1)
	forms := map[string]world.Reply{
		"keep-alive comments":     {Chunks: chunks, ToolCalls: calls, KeepAlive: true},
		"several data lines":      {Chunks: chunks, ToolCalls: calls, MultiLine: true},
		"a usage-only chunk":      {Chunks: chunks, ToolCalls: calls, UsageChunk: true},
		"a plain JSON answer":     {Chunks: chunks, ToolCalls: calls, Plain: true},
		"every form but plain":    {Chunks: chunks, ToolCalls: calls, KeepAlive: true, MultiLine: true, UsageChunk: true},
		"the default (reference)": {Chunks: chunks, ToolCalls: calls},
	}
	for name, reply := range forms {
		t.Run(name, func(t *testing.T) {
			w := start(t, world.Options{})
			require.NoError(t, w.Model().Enqueue(reply, reply))
			resp, body := rawPost(t, w.URL()+world.PathModel, "application/json", streamed)
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			if reply.Plain {
				assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
				var got wireAnswer
				require.NoError(t, json.Unmarshal(body, &got), string(body))
				assert.Equal(t, "chat.completion", got.Object)
				checkUsage(t, got.Usage, 13, 8) // `Hello, "you"` 3, "lookup" 2, its arguments 3
			} else {
				assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
				events, comments := sseEvents(t, body)
				assert.Equal(t, "[DONE]", events[len(events)-1])
				var usageChunks int
				for _, e := range events[:len(events)-1] {
					var ch wireAnswer
					require.NoError(t, json.Unmarshal([]byte(e), &ch), e)
					if len(ch.Choices) == 0 {
						usageChunks++
						checkUsage(t, ch.Usage, 13, 8)
					}
				}
				assert.Equal(t, map[bool]int{true: 1, false: 0}[reply.UsageChunk], usageChunks)
				if reply.KeepAlive {
					assert.Len(t, comments, len(events), "a comment before every event")
				} else {
					assert.Empty(t, comments)
				}
				multi := 0
				for _, l := range sseLines(t, body) {
					if strings.HasPrefix(l, "data: ") && !strings.HasSuffix(l, "}") && l != "data: [DONE]" {
						multi++
					}
				}
				if reply.MultiLine {
					assert.Greater(t, multi, len(events), "events spread over several data lines")
				} else {
					assert.Zero(t, multi, "one data line per event")
				}
			}
			// The reference's client reads every form as the same answer.
			var deltas []string
			got, err := client(w, true).Complete(bounded(t), model.Request{Messages: userMsgs("x")}, func(s string) { deltas = append(deltas, s) })
			require.NoError(t, err)
			assert.Equal(t, model.Response{Content: `Hello, "you"`, FinishReason: "tool_calls",
				ToolCalls: []model.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":"a,b"}`}}}, got)
			assert.Equal(t, `Hello, "you"`, strings.Join(deltas, ""))
		})
	}
}
