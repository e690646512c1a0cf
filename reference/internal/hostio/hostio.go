// Package hostio talks to the host's hooks over HTTP, as spec/world.md describes them: tools, the
// summarizer, identity introspection, clearance and the error hook. A program that embeds the
// reference engine may implement the same interfaces in Go instead.
package hostio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// MaxBody bounds every answer read from a hook.
const MaxBody = 4 << 20

// ErrHook is a hook that could not be reached or answered out of contract.
var ErrHook = errors.New("hostio: hook failed")

// HookError is a hook's failure: Status 0 for a transport failure.
type HookError struct {
	Hook   string
	Status int
	Err    error
}

func (e *HookError) Error() string {
	return fmt.Sprintf("hostio: %s hook failed (status %d): %v", e.Hook, e.Status, e.Err)
}
func (e *HookError) Unwrap() error        { return e.Err }
func (e *HookError) Is(target error) bool { return target == ErrHook }

func post(ctx context.Context, hc *http.Client, hook, url string, body any, hdr map[string]string) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, &HookError{Hook: hook, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, &HookError{Hook: hook, Err: err}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return resp.StatusCode, nil, &HookError{Hook: hook, Status: resp.StatusCode, Err: err}
	}
	return resp.StatusCode, out, nil
}

// Tools calls tools at BaseURL + "/" + name. It implements agent.ToolRunner.
//
//	runner := &hostio.Tools{BaseURL: cfg.Tools.BaseURL, Timeout: 30 * time.Second}
type Tools struct {
	BaseURL string
	Client  *http.Client
	// Timeout bounds one call (default 30 s).
	Timeout time.Duration
}

// Call implements agent.ToolRunner. A non-2xx answer is an *agent.ToolError carrying the tool's
// {"error": ...} message (or its body); 202 {"pending": "human"} is agent.ErrPendingHuman (the
// result will come from a person), never a result.
func (t *Tools) Call(ctx context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	to := t.Timeout
	if to <= 0 {
		to = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	status, body, err := post(ctx, client(t.Client), "tool", strings.TrimRight(t.BaseURL, "/")+"/"+name, args,
		toolHeaders(ctx, key))
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &agent.ToolError{Message: "timed out"}
		}
		return nil, err
	}
	if status < 200 || status > 299 {
		var e struct {
			Error   string         `json:"error"`
			Failure *agent.Failure `json:"failure"`
		}
		msg := string(body)
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, &agent.ToolError{Status: status, Message: msg, Failure: typedFailure(e.Failure)}
	}
	if !json.Valid(body) {
		return nil, &agent.ToolError{Status: status, Message: "tool answered with something that is not JSON"}
	}
	if pendingHuman(status, body) {
		return nil, agent.ErrPendingHuman
	}
	return body, nil
}

// SummaryMessage is one message handed to the summarizer.
type SummaryMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Summarizer folds evicted turns into a rolling summary.
type Summarizer interface {
	Summarize(ctx context.Context, previous string, messages []SummaryMessage) (string, error)
}

// HTTPSummarizer calls POST URL with {"messages", "previous"} and reads {"summary"}.
type HTTPSummarizer struct {
	URL    string
	Client *http.Client
}

// Summarize implements Summarizer.
func (s *HTTPSummarizer) Summarize(ctx context.Context, previous string, msgs []SummaryMessage) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	status, body, err := post(ctx, client(s.Client), "summarizer", s.URL,
		map[string]any{"messages": msgs, "previous": previous}, nil)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", &HookError{Hook: "summarizer", Status: status, Err: errors.New("non-200 answer")}
	}
	var out struct {
		Summary *string `json:"summary"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Summary == nil {
		return "", &HookError{Hook: "summarizer", Status: status, Err: errors.New("answer has no summary")}
	}
	return *out.Summary, nil
}

// ErrorReport is what the error hook receives.
type ErrorReport struct {
	ErrorID        string `json:"errorId"`
	Error          string `json:"error"`
	ConversationID string `json:"conversationId"`
	Turn           int64  `json:"turn"`
}

// ErrorHook posts error reports. Delivery is best effort and never blocks the caller for long.
type ErrorHook struct {
	URL    string
	Client *http.Client
}

// Report sends one report (at most 5 s).
func (h *ErrorHook) Report(r ErrorReport) {
	if h == nil || h.URL == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, _ = post(ctx, client(h.Client), "error", h.URL, r, nil)
}

// OrderedReports delivers reports to an ErrorHook one at a time, in the order Add was called,
// without blocking the caller: a report waits only for the reports added before it. A delivery
// goroutine runs while reports are queued and ends when the queue is empty. The queue is bounded
// (MaxQueuedReports): a report added while it is full is dropped and counted (Dropped), so a slow
// or dead hook costs bounded memory; every report is also in the engine's log. Safe for concurrent
// use; the zero value is not usable, make one with NewOrderedReports.
//
//	q := hostio.NewOrderedReports(&hostio.ErrorHook{URL: hookURL})
//	q.Add(hostio.ErrorReport{ErrorID: id, Error: err.Error()})
type OrderedReports struct {
	hook    *ErrorHook
	mu      sync.Mutex
	queue   []ErrorReport
	running bool
	dropped int64
}

// MaxQueuedReports bounds the reports an OrderedReports holds while its hook is slow.
const MaxQueuedReports = 1024

// NewOrderedReports returns a queue that delivers to hook in order.
func NewOrderedReports(hook *ErrorHook) *OrderedReports { return &OrderedReports{hook: hook} }

// Add queues r for delivery after every report added before it; when MaxQueuedReports are already
// waiting, r is dropped and counted instead.
func (q *OrderedReports) Add(r ErrorReport) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) >= MaxQueuedReports {
		q.dropped++
		return
	}
	q.queue = append(q.queue, r)
	if !q.running {
		q.running = true
		go q.drain()
	}
}

func (q *OrderedReports) drain() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		r := q.queue[0]
		q.queue = q.queue[1:]
		q.mu.Unlock()
		q.hook.Report(r)
	}
}

// Dropped returns how many reports were dropped because the queue was full.
func (q *OrderedReports) Dropped() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}

// Identity resolves bearer tokens to principals: first the static table, then the introspection
// endpoint (asked on every call, so a revocation takes effect at once).
type Identity struct {
	Static map[string]sutconfig.Principal
	URL    string
	Client *http.Client
}

// ErrUnknownToken: the token resolves to no principal.
var ErrUnknownToken = errors.New("hostio: unknown token")

// Resolve returns the principal of token, or ErrUnknownToken.
func (id *Identity) Resolve(ctx context.Context, token string) (sutconfig.Principal, error) {
	if token == "" {
		return sutconfig.Principal{}, ErrUnknownToken
	}
	if p, ok := id.Static[token]; ok {
		return p, nil
	}
	if id.URL == "" {
		return sutconfig.Principal{}, ErrUnknownToken
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, body, err := post(ctx, client(id.Client), "identity", id.URL, map[string]string{"token": token}, nil)
	if err != nil {
		return sutconfig.Principal{}, err
	}
	if status == http.StatusUnauthorized || status == http.StatusNotFound {
		return sutconfig.Principal{}, ErrUnknownToken
	}
	if status != http.StatusOK {
		return sutconfig.Principal{}, &HookError{Hook: "identity", Status: status, Err: fmt.Errorf("unexpected answer: %s", bound(body, 1024))}
	}
	var p sutconfig.Principal
	if err := json.Unmarshal(body, &p); err != nil {
		return sutconfig.Principal{}, &HookError{Hook: "identity", Status: status, Err: err}
	}
	return p, nil
}

// Clearance asks the host whether a viewer may see entries of some classes. Only a JSON true
// answer clears; anything else, including an unreachable hook, does not (fail closed).
type Clearance struct {
	URL    string
	Client *http.Client
}

// Viewer is the identity a clearance question is about.
type Viewer struct {
	Tenant     string `json:"tenant,omitempty"`
	Actor      string `json:"actor"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
}

// Cleared reports whether viewer is cleared for every class.
func (c *Clearance) Cleared(ctx context.Context, viewer Viewer, classes []string) bool {
	if c == nil || c.URL == "" || len(classes) == 0 {
		return len(classes) == 0
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, body, err := post(ctx, client(c.Client), "clearance", c.URL, map[string]any{"viewer": viewer, "classes": classes}, nil)
	if err != nil || status != http.StatusOK {
		return false
	}
	var out struct {
		Cleared json.RawMessage `json:"cleared"`
	}
	if json.Unmarshal(body, &out) != nil {
		return false
	}
	return bytes.Equal(bytes.TrimSpace(out.Cleared), []byte("true"))
}

// bound cuts a hook's answer for an error message.
func bound(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "?")
}

var defaultClient = &http.Client{Transport: &http.Transport{
	MaxIdleConnsPerHost: 32,
	IdleConnTimeout:     30 * time.Second,
}}

func client(c *http.Client) *http.Client {
	if c != nil {
		return c
	}
	return defaultClient
}

// MemoryEntry is one remembered text.
type MemoryEntry struct {
	ID   string `json:"id,omitempty"`
	Role string `json:"role,omitempty"`
	Text string `json:"text"`
	// Tainted marks text a run produced after it saw untrusted output (a failing tool's text).
	Tainted bool `json:"tainted,omitempty"`
}

// Memory recalls what an asker's scope remembers and writes new entries back.
type Memory interface {
	Recall(ctx context.Context, scope, query string) ([]MemoryEntry, error)
	Write(ctx context.Context, scope string, entries []MemoryEntry) error
}

// HTTPMemory is the memory service of spec/world.md at URL.
type HTTPMemory struct {
	URL    string
	Client *http.Client
}

// Recall implements Memory: POST URL/memory/recall {"scope","query"} → {"entries"}.
func (m *HTTPMemory) Recall(ctx context.Context, scope, query string) ([]MemoryEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, body, err := post(ctx, client(m.Client), "memory", strings.TrimRight(m.URL, "/")+"/memory/recall",
		map[string]string{"scope": scope, "query": query}, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, &HookError{Hook: "memory", Status: status, Err: fmt.Errorf("unexpected answer: %s", bound(body, 512))}
	}
	var out struct {
		Entries []MemoryEntry `json:"entries"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, &HookError{Hook: "memory", Status: status, Err: err}
	}
	if len(out.Entries) > 50 {
		out.Entries = out.Entries[len(out.Entries)-50:]
	}
	return out.Entries, nil
}

// Write implements Memory: POST URL/memory/write {"scope","entries"}.
func (m *HTTPMemory) Write(ctx context.Context, scope string, entries []MemoryEntry) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	status, body, err := post(ctx, client(m.Client), "memory", strings.TrimRight(m.URL, "/")+"/memory/write",
		map[string]any{"scope": scope, "entries": entries}, nil)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return &HookError{Hook: "memory", Status: status, Err: fmt.Errorf("unexpected answer: %s", bound(body, 512))}
	}
	return nil
}

// pendingHuman reports whether a tool's answer is 202 {"pending": "human"}.
func pendingHuman(status int, body []byte) bool {
	var p struct {
		Pending string `json:"pending"`
	}
	return status == http.StatusAccepted && json.Unmarshal(body, &p) == nil && p.Pending == "human"
}
