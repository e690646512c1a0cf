package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
)

// Limits the Client applies to every answer.
const (
	// DefaultMaxResponseBytes bounds the body of one answer when ClientOptions leaves it zero.
	DefaultMaxResponseBytes = 8 << 20
	// MaxLineBytes bounds one line of an event stream.
	MaxLineBytes = 1 << 20
	// MaxToolCalls bounds the tool calls of one answer.
	MaxToolCalls = 128
)

// ClientOptions configure a Client.
//
// BaseURL is the API root (for example "https://api.example.com/v1"); requests go to
// BaseURL + "/chat/completions". APIKey, when set, is sent as "Authorization: Bearer <APIKey>".
// Model is used when a Request names none. Stream asks for server-sent events. HTTPClient defaults
// to a client without an overall timeout, so that long streams are bounded by the caller's context
// only. MaxResponseBytes bounds one answer's body (DefaultMaxResponseBytes when zero).
//
//	opts := model.ClientOptions{BaseURL: url, APIKey: key, Model: "small", Stream: true}
type ClientOptions struct {
	BaseURL          string
	APIKey           string
	Model            string
	Stream           bool
	HTTPClient       *http.Client
	MaxResponseBytes int64
}

// Client is a Provider for an OpenAI-compatible Chat Completions server. It is safe for concurrent
// use.
//
// Errors from Complete: a non-2xx answer is a *ProviderError; a malformed answer is a
// *ProtocolError; an unreachable server is a *TransportError; a context that ends first yields an
// error wrapping ctx.Err(). In every case the returned Response holds the text received before the
// failure, and ToolCalls only when the answer completed.
//
// In streamed mode the Client also accepts a plain JSON answer (a server that ignores "stream") and
// then calls onDelta once with the whole text.
//
//	c := model.NewClient(model.ClientOptions{BaseURL: url, Stream: true})
//	resp, err := c.Complete(ctx, req, onDelta)
type Client struct {
	opts ClientOptions
	http *http.Client
}

// NewClient returns a Client for opts. It does not contact the server.
//
//	c := model.NewClient(model.ClientOptions{BaseURL: "http://127.0.0.1:8081/v1"})
func NewClient(opts ClientOptions) *Client {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	if opts.MaxResponseBytes <= 0 {
		opts.MaxResponseBytes = DefaultMaxResponseBytes
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	return &Client{opts: opts, http: hc}
}

type wireRequest struct {
	Model     string    `json:"model"`
	Messages  []Message `json:"messages"`
	Tools     []Tool    `json:"tools,omitempty"`
	MaxTokens int       `json:"max_tokens,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
}

type wireMessage struct {
	Content   *string    `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls"`
}

type wireCompletion struct {
	Choices []struct {
		Message      wireMessage `json:"message"`
		FinishReason *string     `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

type wireDeltaToolCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string             `json:"content"`
			ToolCalls []wireDeltaToolCall `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// errBodyTooLarge is returned by limitedBody past its limit.
var errBodyTooLarge = errors.New("answer exceeds the size limit")

// limitedBody reads at most n bytes and then fails with errBodyTooLarge.
type limitedBody struct {
	r io.Reader
	n int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// Complete sends req to the server and returns its answer; see Client and Provider for the
// contract.
//
//	resp, err := c.Complete(ctx, model.Request{Messages: msgs}, func(s string) { out.WriteString(s) })
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(text string)) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, fmt.Errorf("model: request interrupted: %w", err)
	}
	wr := wireRequest{Model: req.Model, Messages: req.Messages, Tools: req.Tools, MaxTokens: req.MaxTokens,
		Stream: c.opts.Stream}
	if wr.Model == "" {
		wr.Model = c.opts.Model
	}
	if wr.Messages == nil {
		wr.Messages = []Message{}
	}
	body, err := json.Marshal(wr)
	if err != nil {
		return Response{}, fmt.Errorf("model: encode request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return Response{}, &TransportError{Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.opts.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if c.opts.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		return Response{}, c.failure(ctx, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
		if rerr != nil && ctx.Err() != nil {
			return Response{}, c.failure(ctx, rerr)
		}
		return Response{}, &ProviderError{Status: resp.StatusCode, Body: string(b)}
	}
	lb := &limitedBody{r: resp.Body, n: c.opts.MaxResponseBytes}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if c.opts.Stream && mediaType != "application/json" {
		return c.readStream(ctx, resp.StatusCode, lb, onDelta)
	}
	out, err := c.readPlain(ctx, resp.StatusCode, lb)
	if err != nil {
		return Response{}, err
	}
	if onDelta != nil && out.Content != "" {
		onDelta(out.Content)
	}
	return out, nil
}

// failure classifies an error met while talking to the server.
func (c *Client) failure(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("model: request interrupted: %w", cerr)
	}
	if errors.Is(err, errBodyTooLarge) {
		return &ProtocolError{Reason: "answer too large"}
	}
	return &TransportError{Err: err}
}

func (c *Client) readPlain(ctx context.Context, status int, body io.Reader) (Response, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return Response{}, c.failure(ctx, err)
	}
	var wc wireCompletion
	if err := json.Unmarshal(b, &wc); err != nil {
		return Response{}, &ProtocolError{Reason: "answer is not a chat completion", Err: err}
	}
	if len(wc.Error) > 0 && string(wc.Error) != "null" {
		return Response{}, &ProviderError{Status: status, Body: clip(string(b), MaxErrorBody)}
	}
	if len(wc.Choices) == 0 {
		return Response{}, &ProtocolError{Reason: "answer has no choices"}
	}
	ch := wc.Choices[0]
	if len(ch.Message.ToolCalls) > MaxToolCalls {
		return Response{}, &ProtocolError{Reason: "too many tool calls"}
	}
	var out Response
	if ch.Message.Content != nil {
		out.Content = *ch.Message.Content
	}
	out.ToolCalls = ch.Message.ToolCalls
	if ch.FinishReason != nil {
		out.FinishReason = *ch.FinishReason
	}
	return out, nil
}

// streamState accumulates a streamed answer.
type streamState struct {
	content  strings.Builder
	calls    map[int]*ToolCall
	finish   string
	finished bool
}

func (c *Client) readStream(ctx context.Context, status int, body io.Reader, onDelta func(string)) (Response, error) {
	st := &streamState{calls: map[int]*ToolCall{}}
	partial := func() Response { return Response{Content: st.content.String()} }

	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes)
	var data []string
	dataBytes := 0
	done := false
	dispatch := func() error {
		if len(data) == 0 {
			return nil
		}
		payload := strings.Join(data, "\n")
		data, dataBytes = data[:0], 0
		if strings.TrimSpace(payload) == "[DONE]" {
			done = true
			return nil
		}
		return c.applyChunk(st, status, payload, onDelta)
	}
	for !done && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if err := dispatch(); err != nil {
				return partial(), err
			}
		case strings.HasPrefix(line, ":"):
			// A comment (keep-alive).
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			if field == "data" {
				dataBytes += len(value)
				if dataBytes > MaxLineBytes {
					return partial(), &ProtocolError{Reason: "event too large"}
				}
				data = append(data, value)
			}
		}
	}
	if !done {
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return partial(), &ProtocolError{Reason: "event stream line too long"}
			}
			return partial(), c.failure(ctx, err)
		}
		if cerr := ctx.Err(); cerr != nil {
			return partial(), fmt.Errorf("model: request interrupted: %w", cerr)
		}
		// End of the body: a last event without its blank line still counts.
		if err := dispatch(); err != nil {
			return partial(), err
		}
		if !done && !st.finished {
			return partial(), &ProtocolError{Reason: "event stream ended before [DONE]"}
		}
	}
	out := Response{Content: st.content.String(), FinishReason: st.finish}
	if len(st.calls) > 0 {
		idx := make([]int, 0, len(st.calls))
		for i := range st.calls {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, i := range idx {
			out.ToolCalls = append(out.ToolCalls, *st.calls[i])
		}
	}
	return out, nil
}

func (c *Client) applyChunk(st *streamState, status int, payload string, onDelta func(string)) error {
	var ch wireChunk
	if err := json.Unmarshal([]byte(payload), &ch); err != nil {
		return &ProtocolError{Reason: "event is not a completion chunk", Err: err}
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return &ProviderError{Status: status, Body: clip(payload, MaxErrorBody)}
	}
	if len(ch.Choices) == 0 {
		return nil // for example a usage-only chunk
	}
	choice := ch.Choices[0]
	if d := choice.Delta.Content; d != nil && *d != "" {
		if int64(st.content.Len()+len(*d)) > c.opts.MaxResponseBytes {
			return &ProtocolError{Reason: "answer too large"}
		}
		st.content.WriteString(*d)
		if onDelta != nil {
			onDelta(*d)
		}
	}
	for pos, tc := range choice.Delta.ToolCalls {
		i := pos
		if tc.Index != nil {
			i = *tc.Index
		}
		if i < 0 || i >= MaxToolCalls {
			return &ProtocolError{Reason: "tool call index out of range"}
		}
		call, ok := st.calls[i]
		if !ok {
			call = &ToolCall{}
			st.calls[i] = call
		}
		if tc.ID != "" {
			call.ID = tc.ID
		}
		call.Name += tc.Function.Name
		call.Arguments += tc.Function.Arguments
	}
	if choice.FinishReason != nil && *choice.FinishReason != "" {
		st.finish = *choice.FinishReason
		st.finished = true
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
