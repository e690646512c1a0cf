package world

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/harness/oracle"
)

// DefaultReplyRunes is how much of the last user message the default reply repeats.
const DefaultReplyRunes = 60

// Reply is one scripted answer of the model.
//
// The answer text is Chunks joined (streamed one chunk per event), or, when Chunks is empty, Text
// (streamed as one piece: pieces sent back to back reach a system in one read or in several, and
// how many deltas it then shows is its own, so a scenario that counts deltas scripts Chunks and
// paces them). With Hold set, the model sends Chunks, then waits at the hold
// (see Hold), then sends After. ToolCalls follow the text, each streamed as a first fragment with
// id and name and then its arguments in up to three fragments. FinishReason defaults to
// "tool_calls" when there are tool calls and "stop" otherwise.
//
// Fail refuses the request: without Chunks, or for a request that is not streamed, the model
// answers Fail's status and body at once (after the hold, if any); with Chunks on a streamed
// request it streams the chunks and then an error event {"error": {...}} and ends without [DONE].
// Drop cuts the connection after the text and tool calls, with no finish reason and no [DONE] (for
// a request that is not streamed: without any answer).
//
// KeepStreaming plays a provider that does not notice its client going away: on a streamed
// request it waits at the hold until the hold is released whatever the client does, then writes
// After and the end of the answer anyway. The request is still recorded as Aborted when the
// client went away before the end.
//
// Paced, on a streamed request, waits at Paced[i] after sending chunk i (as many holds as
// chunks), so that each chunk is the only one in flight until the hold after it is released; the
// answer ends only after the last hold. Hold, After and KeepStreaming are not used with it.
//
// Fill grows the answer text to exactly Fill characters with FillText's filler (the text being
// Chunks joined, else Text); the filler is streamed in chunks of FillChunk characters after the
// text's own pieces. A ToolCall's Fill does the same for its arguments. So a reply over any size,
// such as a system's cap on what it records, is one line to script.
//
// A request that finds no scripted reply gets the default reply, whose text is
// "re: " + the first DefaultReplyRunes runes of the last user message.
//
// By default an answer has the shape a real provider gives it: a plain answer carries "usage"
// (see Usage), and a streamed one ends with a usage-only chunk (empty "choices") when the request
// asks for it with "stream_options": {"include_usage": true}. Four more forms spec/world.md allows
// can be scripted, each alone or together, so a scenario can check that a system reads them:
// KeepAlive sends a ": keep-alive" comment line before every event; MultiLine spreads every chunk's
// JSON over several "data:" lines (joined with "\n" they are the same JSON); UsageChunk sends the
// usage-only chunk even when the request did not ask for it; Plain answers a streamed request with
// a plain JSON completion (Content-Type application/json), as a server that ignores "stream" does.
//
//	w.Model().Enqueue(
//		world.Reply{ToolCalls: []world.ToolCall{{Name: "lookup", Arguments: `{"q":"x"}`}}},
//		world.Reply{Text: "Found it."})
type Reply struct {
	Text          string
	Chunks        []string
	Fill          int
	ToolCalls     []ToolCall
	FinishReason  string
	Fail          *Failure
	Hold          *Hold
	Paced         []*Hold
	After         []string
	Drop          bool
	KeepStreaming bool
	KeepAlive     bool
	MultiLine     bool
	UsageChunk    bool
	Plain         bool
}

// Usage is the token usage the model reports with an answer: PromptTokens counts the request's
// messages and CompletionTokens the answer (its text and its tool calls' names and arguments),
// each text with the heuristic of spec/token-counting.md §2 and each message adding 4; TotalTokens
// is their sum.
//
//	u := world.UsageOf(msgs, "Hello!", nil) // world.Usage{PromptTokens: ..., CompletionTokens: 2, ...}
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// UsageOf computes the Usage of an answer with text and calls to a request holding msgs.
//
//	u := world.UsageOf([]world.Message{{Role: "user", Content: "hi"}}, "re: hi", nil)
func UsageOf(msgs []Message, text string, calls []ToolCall) Usage {
	var u Usage
	for _, m := range msgs {
		u.PromptTokens += 4 + oracle.Tokens(m.Content)
		for _, tc := range m.ToolCalls {
			u.PromptTokens += oracle.Tokens(tc.Name) + oracle.Tokens(tc.Arguments)
		}
	}
	u.CompletionTokens = oracle.Tokens(text)
	for _, tc := range calls {
		u.CompletionTokens += oracle.Tokens(tc.Name) + oracle.Tokens(tc.Arguments)
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// ModelRequest is one recorded request to the model. Index is its 0-based arrival number since the
// last Reset. Finished is set once the whole answer was written, Aborted once the client went away
// before that; both are set when the request ends (see WaitDone).
//
//	r, _ := w.Model().WaitDone(ctx, 0)
//	if r.Aborted { /* the system hung up on the model */ }
type ModelRequest struct {
	Index    int
	Model    string
	Messages []Message
	Tools    []ToolSpec
	Stream   bool
	// IncludeUsage is stream_options.include_usage of the request.
	IncludeUsage bool
	MaxTokens    int
	// APIKey is the bearer token the request carried in Authorization, or "".
	APIKey  string
	Arrived time.Time
	// Matched is the EnqueueFor match whose reply answered the request, or "".
	Matched string
	// Default is true when no scripted reply was left and the default reply was sent.
	Default bool
	// Shape is ShapeOf the request: requests with equal shapes ask the same question.
	Shape    string
	Finished bool
	Aborted  bool
}

type matcher struct {
	match   string
	replies []Reply
	// every, when set, answers each request the matcher matches once replies run out.
	every *Reply
}

// Model is the scripted Chat Completions server at POST /v1/chat/completions. Replies are taken
// for each request in arrival order: first from the oldest EnqueueFor matcher whose text the last
// user message contains, then from the Enqueue queue, else the default reply. A request about a
// tool call the model answered with before the last Reset, and not since, belongs to an earlier
// scenario of a system that serves scenario after scenario: it gets the default reply and is
// neither recorded nor counted. It is safe for concurrent use.
//
//	_ = w.Model().Enqueue(world.Reply{Text: "Hello!"})
//	err := w.Model().WaitRequests(ctx, 1)
type Model struct {
	w *World

	mu       sync.Mutex
	sig      signal
	queue    []Reply
	matchers []matcher
	scripted int
	log      *journal[ModelRequest]
	shapes   map[string]int
	// calls are the ids of the tool calls answered, since the last reset and before it.
	calls callIDs
}

func newModel(w *World) *Model {
	return &Model{w: w, log: newJournal[ModelRequest](w.opts), shapes: map[string]int{}}
}

// ShapeOf is the shape of a model request: the hex SHA-256 of the JSON of its model name, its
// messages and its tools (in that order, as the world decodes them: a message's content is its
// text, parts joined). Two requests with the same shape ask the model the same question; streaming,
// usage and token bounds are not part of it.
//
//	s := world.ShapeOf("", []world.Message{{Role: "user", Content: "hi"}}, nil)
func ShapeOf(model string, msgs []Message, tools []ToolSpec) string {
	b, _ := json.Marshal(struct {
		Model    string
		Messages []Message
		Tools    []ToolSpec
	}{model, msgs, tools})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// CountShape returns how many requests of the given shape (ShapeOf, ModelRequest.Shape) have
// arrived since the last Reset, whatever their answer, kept in Requests or not (distinct shapes
// past Options.MaxRecords are not counted). A system that answers a repeated question from a
// cache makes this stay at 1.
//
//	n := w.Model().CountShape(w.Model().Requests()[0].Shape)
func (m *Model) CountShape(shape string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shapes[shape]
}

func (m *Model) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue, m.matchers, m.scripted = nil, nil, 0
	m.log = newJournal[ModelRequest](m.w.opts)
	m.shapes = map[string]int{}
	m.calls.reset()
	m.sig.fire()
}

// Enqueue appends replies to the plain queue; each request takes the next one. It fails with
// ErrScriptFull when the scripted replies would exceed Options.MaxScript (then nothing is added).
//
//	err := w.Model().Enqueue(world.Reply{Text: "one"}, world.Reply{Text: "two"})
func (m *Model) Enqueue(replies ...Reply) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scripted+len(replies) > m.w.opts.MaxScript {
		return ErrScriptFull
	}
	m.queue = append(m.queue, replies...)
	m.scripted += len(replies)
	return nil
}

// EnqueueFor appends replies for requests whose last user message contains match (an empty match
// matches every request). Such replies are taken before the plain queue, from the matcher
// registered first that has replies left. It fails like Enqueue.
//
//	_ = w.Model().EnqueueFor("alpha", world.Reply{Text: "for alpha"})
//	_ = w.Model().EnqueueFor("beta", world.Reply{Text: "for beta"})
func (m *Model) EnqueueFor(match string, replies ...Reply) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scripted+len(replies) > m.w.opts.MaxScript {
		return ErrScriptFull
	}
	for i := range m.matchers {
		if m.matchers[i].match == match {
			m.matchers[i].replies = append(m.matchers[i].replies, replies...)
			m.scripted += len(replies)
			return nil
		}
	}
	m.matchers = append(m.matchers, matcher{match: match, replies: replies})
	m.scripted += len(replies)
	return nil
}

// EveryFor answers every request whose last user message contains match with r, once the
// replies EnqueueFor gave match have been taken: a provider that fails whatever it is asked about
// one thing, however often a system asks again.
//
//	w.Model().EveryFor("check the pumps", world.Reply{Fail: &world.Failure{Status: 502}})
func (m *Model) EveryFor(match string, r Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.matchers {
		if m.matchers[i].match == match {
			m.matchers[i].every = &r
			return
		}
	}
	m.matchers = append(m.matchers, matcher{match: match, every: &r})
}

// Pending returns how many scripted replies no request has taken yet.
//
//	require.Zero(t, w.Model().Pending())
func (m *Model) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.scripted
}

// Requests returns a copy of the recorded requests, oldest first.
//
//	last := w.Model().Requests()[n-1].Messages
func (m *Model) Requests() []ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log.snapshot()
}

// Count returns how many requests have arrived since the last Reset, kept or not.
//
//	assert.Equal(t, 2, w.Model().Count())
func (m *Model) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.log.total
}

// WaitRequests blocks until at least n requests have arrived. It returns a *WaitError wrapping
// ctx.Err() (or ErrClosed) when ctx ends (or the World closes) first.
//
//	if err := w.Model().WaitRequests(ctx, 1); err != nil { t.Fatal(err) }
func (m *Model) WaitRequests(ctx context.Context, n int) error {
	return waitUntil(ctx, &m.mu, &m.sig, m.w.closing, fmt.Sprintf("%d model request(s)", n),
		func() bool { return m.log.total >= n })
}

// WaitAborted blocks until the client of request i (0-based) went away before its answer was
// complete. It fails like WaitRequests.
//
//	err := w.Model().WaitAborted(ctx, 0)
func (m *Model) WaitAborted(ctx context.Context, i int) error {
	return waitUntil(ctx, &m.mu, &m.sig, m.w.closing, fmt.Sprintf("model request %d to be aborted", i),
		func() bool { r := m.log.at(i); return r != nil && r.Aborted })
}

// WaitDone blocks until request i (0-based) has ended, finished or aborted, and returns its record.
// It fails like WaitRequests.
//
//	r, err := w.Model().WaitDone(ctx, 0)
func (m *Model) WaitDone(ctx context.Context, i int) (ModelRequest, error) {
	var out ModelRequest
	err := waitUntil(ctx, &m.mu, &m.sig, m.w.closing, fmt.Sprintf("model request %d to end", i),
		func() bool {
			r := m.log.at(i)
			if r != nil && (r.Finished || r.Aborted) {
				out = *r
				return true
			}
			return false
		})
	return out, err
}

// take picks the reply for a request and records it. A request about a tool call answered
// before the last reset (callIDs) belongs to an earlier scenario: it gets the default reply and is
// neither recorded nor counted, and then the journal is nil and the index -1.
func (m *Model) take(req *chatRequest, apiKey string, size int64) (Reply, *journal[ModelRequest], int) {
	rec := ModelRequest{APIKey: apiKey, Model: req.Model, Messages: req.Messages, Tools: req.Tools, Stream: req.Stream,
		IncludeUsage: req.includeUsage(), Arrived: time.Now(), Shape: ShapeOf(req.Model, req.Messages, req.Tools)}
	if req.MaxTokens != nil {
		rec.MaxTokens = *req.MaxTokens
	} else if req.MaxCompletionTokens != nil {
		rec.MaxTokens = *req.MaxCompletionTokens
	}
	last := lastUserText(req.Messages)

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls.fromEarlier(req.Messages) {
		return Reply{Text: "re: " + firstRunes(last, DefaultReplyRunes)}, nil, -1
	}
	var reply Reply
	found, every := false, false
	for i := range m.matchers {
		mt := &m.matchers[i]
		if len(mt.replies) > 0 && strings.Contains(last, mt.match) {
			reply, mt.replies = mt.replies[0], mt.replies[1:]
			rec.Matched = mt.match
			found = true
			break
		}
		if mt.every != nil && strings.Contains(last, mt.match) {
			reply, rec.Matched = *mt.every, mt.match
			every = true
			break
		}
	}
	if !found && !every && len(m.queue) > 0 {
		reply, m.queue = m.queue[0], m.queue[1:]
		found = true
	}
	switch {
	case found:
		m.scripted--
	case every:
	default:
		reply = Reply{Text: "re: " + firstRunes(last, DefaultReplyRunes)}
		rec.Default = true
	}
	if _, seen := m.shapes[rec.Shape]; seen || len(m.shapes) < m.w.opts.MaxRecords {
		m.shapes[rec.Shape]++
	}
	log := m.log
	rec.Index = log.total
	i, _ := log.add(rec, size)
	reply.ToolCalls = m.calls.serve(reply.ToolCalls, i, m.w.opts.MaxRecords)
	m.sig.fire()
	return reply, log, i
}

// end records how request i ended.
func (m *Model) end(log *journal[ModelRequest], i int, finished, aborted bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := log.at(i); r != nil {
		r.Finished = r.Finished || finished
		r.Aborted = r.Aborted || aborted
	}
	m.sig.fire()
}

func (m *Model) serve(rw http.ResponseWriter, r *http.Request) {
	var req chatRequest
	body, ok := m.w.readBody(rw, r, &req)
	if !ok {
		return
	}
	if reason := req.validate(); reason != "" {
		m.w.reject(rw, r, http.StatusBadRequest, reason)
		return
	}
	apiKey := bearerToken(r.Header.Get("Authorization"))
	reply, log, i := m.take(&req, apiKey, int64(len(body)))
	finished, aborted := m.answer(rw, r, &req, reply, i)
	if log != nil {
		m.end(log, i, finished, aborted)
	}
	if reply.Drop && finished {
		panic(http.ErrAbortHandler)
	}
}

// answer writes the reply. finished means the whole answer was written (for a dropped reply: up
// to the cut); aborted means the client went away first.
func (m *Model) answer(rw http.ResponseWriter, r *http.Request, req *chatRequest, reply Reply, index int) (finished, aborted bool) {
	id := fmt.Sprintf("chatcmpl-world-%d", index+1)
	calls := make([]ToolCall, len(reply.ToolCalls))
	for k, tc := range reply.ToolCalls { // ids filled in by take
		if tc.Fill > 0 {
			if args, err := FillArguments(tc.Arguments, tc.Fill); err == nil {
				tc.Arguments = args
			}
		}
		calls[k] = tc
	}
	pieces := reply.Chunks
	if len(pieces) == 0 && reply.Text != "" {
		pieces = []string{reply.Text}
	}
	if reply.Fill > 0 {
		text := strings.Join(pieces, "")
		pieces = append(append([]string(nil), pieces...), chunked(FillText(text, reply.Fill)[len(text):], FillChunk)...)
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	usage := UsageOf(req.Messages, strings.Join(pieces, "")+strings.Join(reply.After, ""), calls)
	if req.Stream && !reply.Plain && !(reply.Fail != nil && len(reply.Chunks) == 0) {
		s := &sseWriter{rw: rw, rc: http.NewResponseController(rw), id: id, model: req.Model, created: time.Now().Unix(),
			keepAlive: reply.KeepAlive, multiLine: reply.MultiLine}
		if req.includeUsage() || reply.UsageChunk {
			s.usage = &usage
		}
		return s.stream(r, pieces, reply, calls, finish)
	}
	return m.answerPlain(rw, r, id, req.Model, pieces, reply, calls, finish, usage)
}

func (m *Model) answerPlain(rw http.ResponseWriter, r *http.Request, id, model string, pieces []string, reply Reply, calls []ToolCall, finish string, usage Usage) (finished, aborted bool) {
	if reply.Hold != nil {
		switch reply.Hold.wait(r.Context()) {
		case holdClientGone:
			return false, true
		case holdClosed:
			return false, false
		}
	}
	if r.Context().Err() != nil {
		return false, true
	}
	if reply.Fail != nil {
		status, body := modelFailureBody(reply.Fail)
		if err := writeRaw(rw, status, body); err != nil {
			return false, true
		}
		return true, false
	}
	if reply.Drop {
		return true, false
	}
	text := strings.Join(pieces, "") + strings.Join(reply.After, "")
	msg := map[string]any{"role": "assistant", "content": text}
	if text == "" && len(calls) > 0 {
		msg["content"] = nil
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	if err := writeJSON(rw, http.StatusOK, map[string]any{
		"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   usage,
	}); err != nil {
		return false, true
	}
	return true, false
}

func modelFailureBody(f *Failure) (int, []byte) {
	if f.Body != "" {
		return failureBody(f)
	}
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	msg := f.Message
	if msg == "" {
		msg = "scripted failure"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "server_error"}})
	return status, b
}

// bearerToken is the token of an Authorization header of the Bearer scheme, read in any case as
// RFC 9110 §11.1 says ("bearer k" and "BEARER k" carry k), or "" for any other header.
func bearerToken(h string) string {
	const scheme = "bearer"
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) || h[len(scheme)] != ' ' {
		return ""
	}
	return strings.TrimLeft(h[len(scheme):], " ")
}
