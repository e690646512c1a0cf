// Package model talks to language models for the reference engine. It defines the Provider
// interface the engine completes chats through, a Client for any server that speaks the OpenAI Chat
// Completions protocol (plain or streamed, with tool calls), and Builtin, a tiny deterministic
// model that needs no network.
//
// The JSON forms of Message, ToolCall and Tool are the OpenAI wire forms, so a transcript can be
// sent to a server as it is.
//
//	p := model.NewClient(model.ClientOptions{BaseURL: "http://127.0.0.1:9000/v1", Model: "m", Stream: true})
//	resp, err := p.Complete(ctx, model.Request{Messages: []model.Message{{Role: "user", Content: "hi"}}},
//		func(text string) { fmt.Print(text) })
package model

import (
	"context"
	"encoding/json"
)

// Roles of a chat message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons a model reports.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
)

// Message is one chat message in OpenAI form. An assistant message may carry ToolCalls; a tool
// message answers one of them and names it in ToolCallID.
//
//	m := model.Message{Role: model.RoleUser, Content: "What is the weather?"}
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is one function call a model asked for. Arguments is JSON text, exactly as the model
// produced it (it may be malformed: the caller decides what to do with it). Its JSON form is
// {"id", "type": "function", "function": {"name", "arguments"}}.
//
//	tc := model.ToolCall{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

type wireFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireFunctionCall `json:"function"`
}

// MarshalJSON writes the OpenAI form of the call.
func (tc ToolCall) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireToolCall{ID: tc.ID, Type: "function",
		Function: wireFunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
}

// UnmarshalJSON reads the OpenAI form of the call.
func (tc *ToolCall) UnmarshalJSON(b []byte) error {
	var w wireToolCall
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*tc = ToolCall{ID: w.ID, Name: w.Function.Name, Arguments: w.Function.Arguments}
	return nil
}

// Tool is a function offered to the model. Parameters is a JSON Schema object; nil offers a
// function without declared parameters. Its JSON form is
// {"type": "function", "function": {"name", "description", "parameters"}}.
//
//	t := model.Tool{Name: "lookup", Parameters: map[string]any{"type": "object"}}
type Tool struct {
	Name        string
	Description string
	Parameters  map[string]any
}

type wireFunction struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
}

type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

// MarshalJSON writes the OpenAI form of the tool.
func (t Tool) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireTool{Type: "function", Function: wireFunction(t)})
}

// UnmarshalJSON reads the OpenAI form of the tool.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var w wireTool
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = Tool{Name: w.Function.Name, Description: w.Function.Description, Parameters: w.Function.Parameters}
	return nil
}

// Request is one chat completion to make. An empty Model means the provider's configured model;
// MaxTokens zero means no limit is sent.
//
//	req := model.Request{Messages: msgs, Tools: tools, MaxTokens: 512}
type Request struct {
	Model     string
	Messages  []Message
	Tools     []Tool
	MaxTokens int
}

// Response is what a model answered: text, tool calls, or both. After an error it holds what was
// received before the failure (see Provider).
//
//	if len(resp.ToolCalls) > 0 { /* run the tools */ }
type Response struct {
	Content      string
	ToolCalls    []ToolCall
	FinishReason string
}

// Provider is anything that completes a chat.
//
// Complete sends req and returns the answer. onDelta, when not nil, is called with each piece of
// answer text as it arrives, in order, on the calling goroutine; a provider that does not stream
// calls it once with the whole text (or not at all for an empty text). When ctx ends before the
// answer is complete, Complete returns promptly with the Response received so far (Content is the
// text already passed to onDelta) and an error for which errors.Is(err, ctx.Err()) holds. A
// Provider is safe for concurrent use.
//
//	resp, err := p.Complete(ctx, req, nil)
//	if errors.Is(err, context.Canceled) { keep(resp.Content) }
type Provider interface {
	Complete(ctx context.Context, req Request, onDelta func(text string)) (Response, error)
}
