package world_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

func userMsgs(text string) []model.Message {
	return []model.Message{{Role: model.RoleSystem, Content: "sys"}, {Role: model.RoleUser, Content: text}}
}

func client(w *world.World, stream bool) *model.Client {
	return model.NewClient(model.ClientOptions{BaseURL: w.Config(sutconfig.SUTConfig{}).Model.BaseURL, Model: "m", Stream: stream, APIKey: "k"})
}

type outcome struct {
	resp model.Response
	err  error
}

// completeAsync runs Complete in the background; deltas are passed on through the returned
// channel (buffered, so a slow test never blocks the client).
func completeAsync(ctx context.Context, c model.Provider, req model.Request) (<-chan outcome, <-chan string) {
	out := make(chan outcome, 1)
	deltas := make(chan string, 64)
	go func() {
		resp, err := c.Complete(ctx, req, func(s string) { deltas <- s })
		out <- outcome{resp, err}
	}()
	return out, deltas
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func TestModelDefaultReplyOverPlainHTTP(t *testing.T) {
	w := start(t, world.Options{})
	long := strings.Repeat("é", 70)
	status, body := post(t, w.URL()+"/v1/chat/completions", map[string]any{
		"model":      "gpt-x",
		"max_tokens": 100,
		"messages": []any{
			map[string]any{"role": "user", "content": "first"},
			map[string]any{"role": "assistant", "content": "ok"},
			map[string]any{"role": "user", "content": []any{map[string]string{"type": "text", "text": long}}},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}},
	})
	require.Equal(t, http.StatusOK, status, string(body))
	var got struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	assert.Equal(t, "chat.completion", got.Object)
	assert.Equal(t, "gpt-x", got.Model)
	require.Len(t, got.Choices, 1)
	assert.Equal(t, "re: "+strings.Repeat("é", world.DefaultReplyRunes), got.Choices[0].Message.Content)
	assert.Equal(t, "stop", got.Choices[0].FinishReason)

	r, err := w.Model().WaitDone(bounded(t), 0)
	require.NoError(t, err)
	assert.True(t, r.Finished)
	assert.False(t, r.Aborted)
	assert.True(t, r.Default)
	assert.False(t, r.Stream)
	assert.Empty(t, r.APIKey)
	assert.Equal(t, "gpt-x", r.Model)
	assert.Equal(t, 100, r.MaxTokens)
	require.Len(t, r.Messages, 3)
	assert.Equal(t, long, r.Messages[2].Content)
	require.Len(t, r.Tools, 1)
	assert.Equal(t, "lookup", r.Tools[0].Name)
}

func TestModelStreamedWithClient(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Model().Enqueue(
		world.Reply{Chunks: []string{"Hel", "lo", " there"}},
		world.Reply{Text: "one two three"},
	))
	c := client(w, true)
	var deltas []string
	resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("hi")}, func(s string) { deltas = append(deltas, s) })
	require.NoError(t, err)
	assert.Equal(t, []string{"Hel", "lo", " there"}, deltas)
	assert.Equal(t, model.Response{Content: "Hello there", FinishReason: "stop"}, resp)

	deltas = nil
	resp, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("again")}, func(s string) { deltas = append(deltas, s) })
	require.NoError(t, err)
	assert.Equal(t, []string{"one two three"}, deltas, "a Text reply is streamed as one piece")
	assert.Equal(t, "one two three", resp.Content)

	// Nothing left: the default reply, streamed.
	resp, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("third one")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "re: third one", resp.Content)

	reqs := w.Model().Requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		assert.Equal(t, i, r.Index)
		assert.True(t, r.Stream)
		assert.Equal(t, "m", r.Model)
		assert.Equal(t, "k", r.APIKey)
	}
	assert.Zero(t, w.Model().Pending())
}

func TestModelToolCalls(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "streamed", false: "plain"}[stream], func(t *testing.T) {
			w := start(t, world.Options{})
			require.NoError(t, w.Model().Enqueue(world.Reply{
				Text: "Checking.",
				ToolCalls: []world.ToolCall{
					{Name: "weather", Arguments: `{"city":"Oslo","unit":"C"}`},
					{ID: "mine", Name: "clock", Arguments: `{}`},
				},
			}, world.Reply{Text: "Done."}))
			c := client(w, stream)
			resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("weather?"),
				Tools: []model.Tool{{Name: "weather"}, {Name: "clock"}}}, nil)
			require.NoError(t, err)
			assert.Equal(t, "Checking.", resp.Content)
			assert.Equal(t, "tool_calls", resp.FinishReason)
			assert.Equal(t, []model.ToolCall{
				{ID: "call_1_1", Name: "weather", Arguments: `{"city":"Oslo","unit":"C"}`},
				{ID: "mine", Name: "clock", Arguments: `{}`},
			}, resp.ToolCalls)

			msgs := append(userMsgs("weather?"),
				model.Message{Role: model.RoleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls},
				model.Message{Role: model.RoleTool, ToolCallID: "call_1_1", Content: `{"temp":3}`},
				model.Message{Role: model.RoleTool, ToolCallID: "mine", Content: `{"now":"noon"}`})
			resp, err = c.Complete(bounded(t), model.Request{Messages: msgs}, nil)
			require.NoError(t, err)
			assert.Equal(t, "Done.", resp.Content)

			reqs := w.Model().Requests()
			require.Len(t, reqs, 2)
			got := reqs[1].Messages
			require.Len(t, got, 5)
			assert.Equal(t, []world.ToolCall{
				{ID: "call_1_1", Name: "weather", Arguments: `{"city":"Oslo","unit":"C"}`},
				{ID: "mine", Name: "clock", Arguments: `{}`},
			}, got[2].ToolCalls)
			assert.Equal(t, "call_1_1", got[3].ToolCallID)
			assert.Equal(t, `{"now":"noon"}`, got[4].Content)
		})
	}
}

func TestModelRefusesDanglingToolCalls(t *testing.T) {
	w := start(t, world.Options{})
	c := client(w, false)
	dangling := append(userMsgs("x"),
		model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "a", Name: "f", Arguments: "{}"}}},
		model.Message{Role: model.RoleUser, Content: "next"})
	_, err := c.Complete(bounded(t), model.Request{Messages: dangling}, nil)
	var pe *model.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, http.StatusBadRequest, pe.Status)

	orphan := append(userMsgs("x"), model.Message{Role: model.RoleTool, ToolCallID: "nobody", Content: "{}"})
	_, err = c.Complete(bounded(t), model.Request{Messages: orphan}, nil)
	require.ErrorAs(t, err, &pe)
	assert.Len(t, w.Rejections(), 2)
	assert.Zero(t, w.Model().Count())
}

func TestModelEnqueueForMatchesConcurrentConversations(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Model().Enqueue(world.Reply{Text: "plain"}))
	require.NoError(t, w.Model().EnqueueFor("alpha", world.Reply{Text: "A1"}, world.Reply{Text: "A2"}))
	require.NoError(t, w.Model().EnqueueFor("beta", world.Reply{Text: "B1"}))
	require.NoError(t, w.Model().EnqueueFor("alpha", world.Reply{Text: "A3"}))
	assert.Equal(t, 5, w.Model().Pending())

	c := client(w, true)
	var wg sync.WaitGroup
	results := map[string][]string{}
	var mu sync.Mutex
	for _, conv := range []string{"alpha", "beta"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := map[string]int{"alpha": 3, "beta": 1}[conv]
			for i := 0; i < n; i++ {
				// A tool result after the user message still belongs to the same conversation.
				msgs := []model.Message{{Role: model.RoleUser, Content: "talk about " + conv}}
				if i > 0 {
					msgs = append(msgs,
						model.Message{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "t", Name: "f", Arguments: "{}"}}},
						model.Message{Role: model.RoleTool, ToolCallID: "t", Content: "{}"})
				}
				resp, err := c.Complete(bounded(t), model.Request{Messages: msgs}, nil)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				results[conv] = append(results[conv], resp.Content)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, []string{"A1", "A2", "A3"}, results["alpha"])
	assert.Equal(t, []string{"B1"}, results["beta"])

	resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("gamma")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "plain", resp.Content)
	assert.Zero(t, w.Model().Pending())
	for _, r := range w.Model().Requests()[:4] {
		assert.Contains(t, []string{"alpha", "beta"}, r.Matched)
	}
}

// TestModelEveryForAnswersEveryAsking: after the matcher's own replies, every request about the
// text gets the EveryFor reply, however often it is asked; other requests are not touched, and
// the reply is not counted as scripted.
func TestModelEveryForAnswersEveryAsking(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Model().EnqueueFor("pumps", world.Reply{Text: "first"}))
	w.Model().EveryFor("pumps", world.Reply{Fail: &world.Failure{Status: 502, Message: "down"}})
	assert.Equal(t, 1, w.Model().Pending())
	c := client(w, true)
	resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("check the pumps")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "first", resp.Content)
	for range 3 {
		_, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("check the pumps")}, nil)
		var pe *model.ProviderError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, 502, pe.Status)
	}
	resp, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("thanks")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "re: thanks", resp.Content)
	assert.Zero(t, w.Model().Pending())
	assert.Equal(t, 5, w.Model().Count())
}

func TestModelHoldReleased(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "streamed", false: "plain"}[stream], func(t *testing.T) {
			w := start(t, world.Options{})
			h := w.NewHold()
			require.NoError(t, w.Model().Enqueue(world.Reply{Chunks: []string{"Let me"}, Hold: h, After: []string{" check."}}))
			out, deltas := completeAsync(bounded(t), client(w, stream), model.Request{Messages: userMsgs("q")})

			require.NoError(t, w.Model().WaitRequests(bounded(t), 1))
			require.NoError(t, h.WaitReached(bounded(t)))
			assert.True(t, h.Reached())
			if stream {
				assert.Equal(t, "Let me", await(t, deltas, "the chunk before the hold"))
			}
			select {
			case o := <-out:
				t.Fatalf("answer finished before release: %+v", o)
			default:
			}
			h.Release()
			o := await(t, out, "the answer")
			require.NoError(t, o.err)
			assert.Equal(t, "Let me check.", o.resp.Content)
			r, err := w.Model().WaitDone(bounded(t), 0)
			require.NoError(t, err)
			assert.True(t, r.Finished)
			assert.False(t, r.Aborted)
		})
	}
}

func TestModelHoldAbortedByClient(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "streamed", false: "plain"}[stream], func(t *testing.T) {
			w := start(t, world.Options{})
			h := w.NewHold()
			require.NoError(t, w.Model().Enqueue(world.Reply{Chunks: []string{"Let me"}, Hold: h, After: []string{" check."}}))
			ctx, cancel := context.WithCancel(bounded(t))
			defer cancel()
			out, deltas := completeAsync(ctx, client(w, stream), model.Request{Messages: userMsgs("q")})
			require.NoError(t, h.WaitReached(bounded(t)))
			if stream {
				assert.Equal(t, "Let me", await(t, deltas, "the chunk before the hold"))
			}
			cancel()
			o := await(t, out, "the interrupted answer")
			require.ErrorIs(t, o.err, context.Canceled)
			if stream {
				assert.Equal(t, "Let me", o.resp.Content)
			}
			require.NoError(t, w.Model().WaitAborted(bounded(t), 0))
			r, err := w.Model().WaitDone(bounded(t), 0)
			require.NoError(t, err)
			assert.True(t, r.Aborted)
			assert.False(t, r.Finished)
		})
	}
}

func TestModelCloseEndsHolds(t *testing.T) {
	w := world.New(world.Options{})
	_, err := w.Start("")
	require.NoError(t, err)
	h := w.NewHold()
	require.NoError(t, w.Model().Enqueue(world.Reply{Chunks: []string{"wait"}, Hold: h}))
	out, _ := completeAsync(bounded(t), client(w, true), model.Request{Messages: userMsgs("q")})
	require.NoError(t, h.WaitReached(bounded(t)))

	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	require.NoError(t, await(t, closed, "Close"))
	o := await(t, out, "the answer cut by Close")
	assert.Error(t, o.err)
	assert.NoError(t, h.WaitReached(context.Background()), "a reached hold stays reached")
}

func TestModelResetReleasesHoldsAndClears(t *testing.T) {
	w := start(t, world.Options{})
	h := w.NewHold()
	require.NoError(t, w.Model().Enqueue(world.Reply{Chunks: []string{"a"}, Hold: h, After: []string{"b"}}, world.Reply{Text: "left over"}))
	require.NoError(t, w.Model().EnqueueFor("x", world.Reply{Text: "left"}))
	out, _ := completeAsync(bounded(t), client(w, true), model.Request{Messages: userMsgs("q")})
	require.NoError(t, h.WaitReached(bounded(t)))

	w.Reset()
	o := await(t, out, "the answer released by Reset")
	require.NoError(t, o.err)
	assert.Equal(t, "ab", o.resp.Content)
	assert.Empty(t, w.Model().Requests())
	assert.Zero(t, w.Model().Pending())

	// A hold made before the reset no longer holds anything.
	require.NoError(t, w.Model().Enqueue(world.Reply{Chunks: []string{"c"}, Hold: h}))
	resp, err := client(w, true).Complete(bounded(t), model.Request{Messages: userMsgs("x")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "c", resp.Content)
	assert.Equal(t, 1, w.Model().Count())
}

func TestModelFailures(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Model().Enqueue(
		world.Reply{Fail: &world.Failure{Status: http.StatusTooManyRequests, Message: "slow down"}},
		world.Reply{Fail: &world.Failure{Status: http.StatusBadGateway, Body: `upstream gone`}},
		world.Reply{Chunks: []string{"part"}, Fail: &world.Failure{Message: "overloaded"}},
		world.Reply{Chunks: []string{"cut"}, Drop: true},
		world.Reply{Fail: &world.Failure{}},
	))
	c := client(w, true)
	var pe *model.ProviderError
	_, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("1")}, nil)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, http.StatusTooManyRequests, pe.Status)
	assert.JSONEq(t, `{"error":{"message":"slow down","type":"server_error"}}`, pe.Body)

	_, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("2")}, nil)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, http.StatusBadGateway, pe.Status)
	assert.Equal(t, "upstream gone", pe.Body)

	resp, err := c.Complete(bounded(t), model.Request{Messages: userMsgs("3")}, nil)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, http.StatusOK, pe.Status)
	assert.Equal(t, "part", resp.Content)

	resp, err = c.Complete(bounded(t), model.Request{Messages: userMsgs("4")}, nil)
	// A cut stream reaches the client as a broken body or as a stream without [DONE].
	var proto *model.ProtocolError
	var te *model.TransportError
	assert.True(t, errors.As(err, &proto) || errors.As(err, &te), "got %v", err)
	assert.Equal(t, "cut", resp.Content)

	_, err = client(w, false).Complete(bounded(t), model.Request{Messages: userMsgs("5")}, nil)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, http.StatusInternalServerError, pe.Status)
}

func TestModelDropPlain(t *testing.T) {
	w := start(t, world.Options{})
	require.NoError(t, w.Model().Enqueue(world.Reply{Text: "never", Drop: true}))
	_, err := client(w, false).Complete(bounded(t), model.Request{Messages: userMsgs("1")}, nil)
	var te *model.TransportError
	require.ErrorAs(t, err, &te)
	// The world survives the cut.
	resp, err := client(w, false).Complete(bounded(t), model.Request{Messages: userMsgs("2")}, nil)
	require.NoError(t, err)
	assert.Equal(t, "re: 2", resp.Content)
}
