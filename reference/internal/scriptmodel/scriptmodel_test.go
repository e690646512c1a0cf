package scriptmodel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/model"
)

func ask(texts ...string) model.Request {
	var req model.Request
	for _, s := range texts {
		req.Messages = append(req.Messages, model.Message{Role: model.RoleUser, Content: s})
	}
	return req
}

// complete calls m and returns what it said, its response and its error.
func complete(ctx context.Context, m model.Provider, req model.Request) ([]string, model.Response, error) {
	var said []string
	resp, err := m.Complete(ctx, req, func(s string) { said = append(said, s) })
	return said, resp, err
}

func TestEchoAndFixedSayTheirAnswerWhole(t *testing.T) {
	m := scriptmodel.Echo("You asked: ")
	said, resp, err := complete(context.Background(), m, ask("one", "two"))
	require.NoError(t, err)
	require.Equal(t, []string{"You asked: two"}, said)
	require.Equal(t, model.Response{Content: "You asked: two", FinishReason: model.FinishStop}, resp)
	said, resp, err = complete(context.Background(), scriptmodel.Fixed("ok"), ask("x"))
	require.NoError(t, err)
	require.Equal(t, []string{"ok"}, said)
	require.Equal(t, "ok", resp.Content)
	require.Equal(t, 1, m.Calls())
	require.Equal(t, []model.Request{ask("one", "two")}, m.Requests())
	require.Equal(t, [][]model.Message{ask("one", "two").Messages}, m.Messages())
}

func TestByTextAnswersByTheLastUserMessage(t *testing.T) {
	m := scriptmodel.ByText(func(text string, req model.Request) scriptmodel.Reply {
		if text == "call" && len(scriptmodel.ToolResults(req)) == 0 {
			return scriptmodel.Calls(model.ToolCall{ID: "c1", Name: "lookup", Arguments: `{}`})
		}
		return scriptmodel.Text("re: " + text)
	})
	_, resp, err := complete(context.Background(), m, ask("call"))
	require.NoError(t, err)
	require.Equal(t, model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{}`}}, FinishReason: model.FinishToolCalls}, resp)
	req := ask("call")
	req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, ToolCalls: resp.ToolCalls},
		model.Message{Role: model.RoleTool, ToolCallID: "c1", Content: "sunny"})
	_, resp, err = complete(context.Background(), m, req)
	require.NoError(t, err)
	require.Equal(t, "re: call", resp.Content, "the last user message, not the tool's")
}

func TestGatedWaitsForEachRelease(t *testing.T) {
	m := scriptmodel.Gated()
	type result struct {
		said []string
		resp model.Response
		err  error
	}
	done := make(chan result, 2)
	for _, text := range []string{"a", "b"} {
		go func() {
			said, resp, err := complete(context.Background(), m, ask(text))
			done <- result{said, resp, err}
		}()
	}
	m.Release() // returns once a call has taken it
	first := <-done
	require.NoError(t, first.err)
	require.Equal(t, []string{"working"}, first.said)
	require.Contains(t, []string{"done: a", "done: b"}, first.resp.Content)
	select {
	case r := <-done:
		t.Fatalf("a second call answered without a release: %+v", r)
	default:
	}
	m.ReleaseAll()
	require.NoError(t, (<-done).err)
	require.Equal(t, 2, m.Waited())

	ahead := scriptmodel.Gated()
	ahead.ReleaseAhead(1)
	_, resp, err := complete(context.Background(), ahead, ask("c"))
	require.NoError(t, err)
	require.Equal(t, "done: c", resp.Content, "a release given ahead is taken by the next call")
}

func TestAStoppedCallReturnsWhatItSaid(t *testing.T) {
	for name, m := range map[string]*scriptmodel.Model{"gated": scriptmodel.Gated(), "held": scriptmodel.Held()} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			var resp model.Response
			go func() {
				var err error
				_, resp, err = complete(ctx, m, ask("x"))
				done <- err
			}()
			require.Eventually(t, func() bool { return m.Waited() == 1 }, 10*time.Second, time.Millisecond, "the call begins to wait")
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			if name == "gated" {
				require.Equal(t, "working", resp.Content)
			} else {
				require.Empty(t, resp.Content)
			}
		})
	}
}

func TestPacedFailingSequenceToolsAndFunc(t *testing.T) {
	said, resp, err := complete(context.Background(), scriptmodel.Paced(time.Millisecond, "a", "b", "c"), ask("x"))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, said)
	require.Equal(t, "abc", resp.Content)

	boom := errors.New("boom")
	_, _, err = complete(context.Background(), scriptmodel.Failing(boom), ask("x"))
	require.ErrorIs(t, err, boom)

	seq := scriptmodel.Sequence(model.Response{Content: "1"}, model.Response{Content: "2"})
	var got []string
	for range 3 {
		said, resp, err := complete(context.Background(), seq, ask("x"))
		require.NoError(t, err)
		require.Empty(t, said)
		got = append(got, resp.Content)
	}
	require.Equal(t, []string{"1", "2", "2"}, got)

	calls := []model.ToolCall{{ID: "c1", Name: "a"}, {ID: "c2", Name: "b"}}
	tm := scriptmodel.Tools(calls, func(results []model.Message) string { return results[0].Content + "|" + results[1].Content })
	_, resp, err = complete(context.Background(), tm, ask("go"))
	require.NoError(t, err)
	require.Equal(t, calls, resp.ToolCalls)
	req := ask("go")
	req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, ToolCalls: calls},
		model.Message{Role: model.RoleTool, ToolCallID: "c1", Content: "x"}, model.Message{Role: model.RoleTool, ToolCallID: "c2", Content: "y"})
	said, resp, err = complete(context.Background(), tm, req)
	require.NoError(t, err)
	require.Empty(t, said)
	require.Equal(t, "x|y", resp.Content)

	fm := scriptmodel.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
		return model.Response{Content: scriptmodel.LastUser(req)}, nil
	})
	said, resp, err = complete(context.Background(), fm, ask("a", "b"))
	require.NoError(t, err)
	require.Empty(t, said)
	require.Equal(t, "b", resp.Content)
	require.Equal(t, 1, fm.Calls())
}
