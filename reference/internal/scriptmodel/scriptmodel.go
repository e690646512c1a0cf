// Package scriptmodel holds the scripted language models of the reference's tests: each is a
// model.Provider that answers by a script, with no network, in one of the shapes the tests need.
//
//   - Echo answers the last message's text after a prefix; Fixed answers one text.
//   - ByText answers by the text of the last user message.
//   - Gated says "working" and waits for the test's Release before it answers.
//   - Held waits until its call is stopped (its context ends).
//   - Paced says its pieces one a tick apart.
//   - Failing fails every call.
//   - Tools asks for tool calls, then answers from their results; Sequence gives its responses in
//     order.
//   - Script and Func take any rule: a Reply for each request, or a whole Complete.
//
// Every Model records the requests it was sent and counts its calls and the calls that waited, so
// that a test can wait on them and compare them.
//
//	m := scriptmodel.Gated()
//	eng := reftest.Open(t, reftest.Provider(m))
//	... // send a turn: it streams "working" and waits
//	m.Release() // the turn answers "done: <its text>"
package scriptmodel

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/model"
)

// Wait says where a call waits once it has said its pieces.
type Wait int

const (
	// NoWait: the call answers at once.
	NoWait Wait = iota
	// UntilRelease: the call waits for the model's Release or ReleaseAll, or for its context to
	// end.
	UntilRelease
	// UntilStopped: the call waits for its context to end.
	UntilStopped
)

// Reply is what one call does: it passes each piece of Say to onDelta (Every apart, when Every is
// set), waits as Wait says, then returns Response, or Err with it. A call whose context ends first
// returns the text it said so far with an error wrapping the context's.
type Reply struct {
	Say      []string
	Every    time.Duration
	Wait     Wait
	Response model.Response
	Err      error
}

// Text is the reply that says s whole, in one piece (none for an empty s), and answers it with
// finish reason stop.
func Text(s string) Reply {
	r := Reply{Response: model.Response{Content: s, FinishReason: model.FinishStop}}
	if s != "" {
		r.Say = []string{s}
	}
	return r
}

// Calls is the reply that asks for the tool calls, with finish reason tool_calls, saying nothing.
func Calls(calls ...model.ToolCall) Reply {
	return Reply{Response: model.Response{ToolCalls: calls, FinishReason: model.FinishToolCalls}}
}

// Hold is the reply that waits until its call is stopped.
func Hold() Reply { return Reply{Wait: UntilStopped} }

// ReleaseWait is how long Release waits for a call to take its release before it panics, naming
// what it waited for.
const ReleaseWait = 30 * time.Second

// Model is a scripted model.Provider. Its methods are safe for concurrent use.
type Model struct {
	// complete answers the n-th call (from 1).
	complete func(ctx context.Context, m *Model, n int, req model.Request, onDelta func(string)) (model.Response, error)

	release chan struct{} // Release: one waiting call goes on
	ahead   chan struct{} // ReleaseAhead: releases given before any call waits
	all     chan struct{} // closed by ReleaseAll
	allOnce sync.Once

	calls  atomic.Int64
	waited atomic.Int64
	mu     sync.Mutex
	reqs   []model.Request
}

// maxAhead bounds the releases given ahead of the calls that take them.
const maxAhead = 64

func newModel(complete func(ctx context.Context, m *Model, n int, req model.Request, onDelta func(string)) (model.Response, error)) *Model {
	return &Model{complete: complete, release: make(chan struct{}), ahead: make(chan struct{}, maxAhead), all: make(chan struct{})}
}

// Script is the model that answers each request with reply(req).
func Script(reply func(req model.Request) Reply) *Model {
	return newModel(func(ctx context.Context, m *Model, _ int, req model.Request, onDelta func(string)) (model.Response, error) {
		return m.play(ctx, reply(req), onDelta)
	})
}

// Func is the model whose every call is fn; onDelta is never called. It is for a script that needs
// the call's context itself (to learn that it was stopped, say).
func Func(fn func(ctx context.Context, req model.Request) (model.Response, error)) *Model {
	return newModel(func(ctx context.Context, _ *Model, _ int, req model.Request, _ func(string)) (model.Response, error) {
		return fn(ctx, req)
	})
}

// Echo is the model that answers prefix followed by the text of the request's last message, said
// whole in one piece.
//
//	scriptmodel.Echo("You asked: ") // "hi" is answered "You asked: hi"
func Echo(prefix string) *Model {
	return Script(func(req model.Request) Reply { return Text(prefix + Last(req)) })
}

// Fixed is the model that answers text to every request, said whole in one piece.
func Fixed(text string) *Model {
	return Script(func(model.Request) Reply { return Text(text) })
}

// ByText is the model that answers each request with reply(text, req), text being the request's
// last user message (LastUser).
func ByText(reply func(text string, req model.Request) Reply) *Model {
	return Script(func(req model.Request) Reply { return reply(LastUser(req), req) })
}

// Gated is the model that says "working", waits for a release (Release, ReleaseAhead or
// ReleaseAll), then answers "done: " followed by the text of the request's last message.
func Gated() *Model {
	return Script(func(req model.Request) Reply {
		return Reply{Say: []string{"working"}, Wait: UntilRelease,
			Response: model.Response{Content: "done: " + Last(req), FinishReason: model.FinishStop}}
	})
}

// Held is the model whose every call waits until it is stopped (its context ends); Waited counts
// the calls that began to wait.
func Held() *Model { return Script(func(model.Request) Reply { return Hold() }) }

// Failing is the model whose every call fails with err at once.
func Failing(err error) *Model {
	return Script(func(model.Request) Reply { return Reply{Err: err} })
}

// Paced is the model that says the pieces one every tick, then answers them joined.
func Paced(every time.Duration, pieces ...string) *Model {
	return Script(func(model.Request) Reply {
		return Reply{Say: pieces, Every: every, Response: model.Response{Content: strings.Join(pieces, ""), FinishReason: model.FinishStop}}
	})
}

// Sequence is the model that answers its n-th call with responses[n-1] (the last one again after
// them), saying nothing.
func Sequence(responses ...model.Response) *Model {
	return newModel(func(_ context.Context, _ *Model, n int, _ model.Request, _ func(string)) (model.Response, error) {
		return responses[min(n, len(responses))-1], nil
	})
}

// Tools is the model that asks for calls, all at once, while the request holds no tool result
// after its last user message, and then answers answer(results), results being those tool
// messages in order; it says nothing.
func Tools(calls []model.ToolCall, answer func(results []model.Message) string) *Model {
	return Script(func(req model.Request) Reply {
		results := ToolResults(req)
		if len(results) == 0 {
			return Calls(calls...)
		}
		return Reply{Response: model.Response{Content: answer(results), FinishReason: model.FinishStop}}
	})
}

// Complete implements model.Provider: it records req and answers by the model's script.
func (m *Model) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	n := len(m.reqs)
	m.mu.Unlock()
	m.calls.Add(1)
	return m.complete(ctx, m, n, req, onDelta)
}

// play does what r says.
func (m *Model) play(ctx context.Context, r Reply, onDelta func(string)) (model.Response, error) {
	var said strings.Builder
	stopped := func() (model.Response, error) {
		return model.Response{Content: said.String()}, fmt.Errorf("scriptmodel: call stopped: %w", ctx.Err())
	}
	for i, piece := range r.Say {
		if i > 0 && r.Every > 0 {
			t := time.NewTimer(r.Every)
			select {
			case <-ctx.Done():
				t.Stop()
				return stopped()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return stopped()
		}
		said.WriteString(piece)
		if onDelta != nil {
			onDelta(piece)
		}
	}
	switch r.Wait {
	case UntilRelease:
		m.waited.Add(1)
		select {
		case <-m.release:
		case <-m.ahead:
		case <-m.all:
		case <-ctx.Done():
			return stopped()
		}
	case UntilStopped:
		m.waited.Add(1)
		<-ctx.Done()
		return stopped()
	}
	return r.Response, r.Err
}

// Release lets one call that waits for a release go on, and returns once one has taken it; it
// panics when no call takes it within ReleaseWait.
func (m *Model) Release() {
	t := time.NewTimer(ReleaseWait)
	defer t.Stop()
	select {
	case m.release <- struct{}{}:
	case <-t.C:
		panic(fmt.Sprintf("scriptmodel: no call waited for a release within %s", ReleaseWait))
	}
}

// ReleaseAhead gives n releases that calls take as they come to wait, without waiting for them.
func (m *Model) ReleaseAhead(n int) {
	for range n {
		m.ahead <- struct{}{}
	}
}

// ReleaseAll lets every call that waits for a release, now or later, go on at once.
func (m *Model) ReleaseAll() { m.allOnce.Do(func() { close(m.all) }) }

// Requests is every request the model was sent, as it was sent, in the order the calls began.
func (m *Model) Requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]model.Request(nil), m.reqs...)
}

// Messages is the messages of every request the model was sent, in the order the calls began.
func (m *Model) Messages() [][]model.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([][]model.Message, len(m.reqs))
	for i, r := range m.reqs {
		out[i] = r.Messages
	}
	return out
}

// Calls is the number of calls made.
func (m *Model) Calls() int { return int(m.calls.Load()) }

// Waited is the number of calls that began to wait (for a release, or until stopped).
func (m *Model) Waited() int { return int(m.waited.Load()) }

// Last is the text of the request's last message ("" for none).
func Last(req model.Request) string {
	if len(req.Messages) == 0 {
		return ""
	}
	return req.Messages[len(req.Messages)-1].Content
}

// LastUser is the text of the request's last user message ("" for none).
func LastUser(req model.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == model.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

// ToolResults are the tool messages after the request's last user message, in order.
func ToolResults(req model.Request) []model.Message {
	var out []model.Message
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != model.RoleUser; i-- {
		if req.Messages[i].Role == model.RoleTool {
			out = append([]model.Message{req.Messages[i]}, out...)
		}
	}
	return out
}
