package world

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// sseWriter writes one streamed answer.
// With usage set, every chunk carries "usage": null and the stream ends with a usage-only chunk
// before [DONE], as a provider asked for stream_options.include_usage does.
type sseWriter struct {
	rw        http.ResponseWriter
	rc        *http.ResponseController
	id        string
	model     string
	created   int64
	keepAlive bool
	multiLine bool
	usage     *Usage
	err       error
}

func (s *sseWriter) event(data []byte) {
	if s.err != nil {
		return
	}
	var b strings.Builder
	if s.keepAlive {
		b.WriteString(": keep-alive\n\n")
	}
	lines := []string{string(data)}
	if s.multiLine {
		lines = splitJSONLines(data)
	}
	for _, l := range lines {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	if _, err := io.WriteString(s.rw, b.String()); err != nil {
		s.err = err
		return
	}
	if err := s.rc.Flush(); err != nil {
		s.err = err
	}
}

func (s *sseWriter) chunk(delta map[string]any, finish any) {
	c := map[string]any{
		"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}
	if s.usage != nil {
		c["usage"] = nil
	}
	b, _ := json.Marshal(c)
	s.event(b)
}

// done ends a stream that completed: the usage-only chunk when asked for, then [DONE].
func (s *sseWriter) done() {
	if s.usage != nil {
		b, _ := json.Marshal(map[string]any{
			"id": s.id, "object": "chat.completion.chunk", "created": s.created, "model": s.model,
			"choices": []any{}, "usage": s.usage,
		})
		s.event(b)
	}
	s.event([]byte("[DONE]"))
}

// splitJSONLines cuts JSON text after every comma outside strings, so that the pieces joined with
// "\n" are the same JSON value.
func splitJSONLines(data []byte) []string {
	var out []string
	start, inString, escaped := 0, false, false
	for i, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && c == ',':
			out = append(out, string(data[start:i+1]))
			start = i + 1
		}
	}
	return append(out, string(data[start:]))
}

func (s *sseWriter) text(pieces []string) {
	for _, p := range pieces {
		if p != "" {
			s.chunk(map[string]any{"content": p}, nil)
		}
	}
}

func (s *sseWriter) stream(r *http.Request, pieces []string, reply Reply, calls []ToolCall, finish string) (finished, aborted bool) {
	h := s.rw.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.rw.WriteHeader(http.StatusOK)
	s.chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if len(reply.Paced) > 0 {
		for i, p := range pieces {
			s.text([]string{p})
			if i < len(reply.Paced) {
				switch reply.Paced[i].wait(r.Context()) {
				case holdClientGone:
					return false, true
				case holdClosed:
					return false, false
				}
			}
		}
	} else {
		s.text(pieces)
	}
	if reply.KeepStreaming {
		return s.keepStreaming(r, reply, calls, finish)
	}
	if reply.Hold != nil {
		if s.err != nil {
			return false, true
		}
		switch reply.Hold.wait(r.Context()) {
		case holdClientGone:
			return false, true
		case holdClosed:
			return false, false
		}
	}
	s.text(reply.After)
	if reply.Fail != nil {
		_, body := modelFailureBody(reply.Fail)
		if !json.Valid(body) {
			body, _ = json.Marshal(map[string]any{"error": map[string]any{"message": string(body)}})
		}
		s.event(body)
		return s.err == nil, s.err != nil
	}
	for k, tc := range calls {
		s.chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": k, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil)
		for _, frag := range fragments(tc.Arguments) {
			if frag == "" {
				continue
			}
			s.chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": k, "function": map[string]any{"arguments": frag}}}}, nil)
		}
	}
	if reply.Drop {
		return s.err == nil, s.err != nil
	}
	// A client that left before the end is not counted as served, even if its socket still took
	// the bytes.
	if r.Context().Err() != nil {
		return false, true
	}
	s.chunk(map[string]any{}, finish)
	s.done()
	return s.err == nil, s.err != nil
}

// keepStreaming finishes a KeepStreaming answer: it ignores the client until the hold is released,
// then writes the rest as if someone were reading. aborted is whether the client had gone by then.
func (s *sseWriter) keepStreaming(r *http.Request, reply Reply, calls []ToolCall, finish string) (finished, aborted bool) {
	if reply.Hold != nil && reply.Hold.wait(context.WithoutCancel(r.Context())) == holdClosed {
		return false, false
	}
	s.text(reply.After)
	for k, tc := range calls {
		s.chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": k, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}}}, nil)
	}
	s.chunk(map[string]any{}, finish)
	s.done()
	gone := r.Context().Err() != nil || s.err != nil
	return !gone, gone
}
