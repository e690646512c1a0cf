package world

import (
	"encoding/json"
	"errors"
	"strings"
)

// Message is one chat message as the world decoded it from a model request. Content is the text;
// a content given as an array of parts is read as the concatenation of its text parts.
//
//	last := w.Model().Requests()[0].Messages[1] // world.Message{Role: "user", Content: "hi"}
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// UnmarshalJSON accepts a content that is a string, null, or an array of {"type":"text","text"}
// parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []ToolCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		Name       string          `json:"name"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	text, err := decodeContent(raw.Content)
	if err != nil {
		return err
	}
	*m = Message{Role: raw.Role, Content: text, ToolCalls: raw.ToolCalls, ToolCallID: raw.ToolCallID, Name: raw.Name}
	return nil
}

var errContent = errors.New("content is neither a string nor an array of text parts")

func decodeContent(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errContent
	}
	var sb strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			sb.WriteString(p.Text)
		}
	}
	return sb.String(), nil
}

// ToolCall is one function call: in a Reply, a call the scripted model makes (an empty ID is
// filled in as "call_<request number>_<call number>"); in a recorded Message, a call an assistant
// message carries. Arguments is JSON text. Fill, in a Reply, grows the arguments to exactly that
// many characters when they are shorter (FillArguments; arguments that cannot be filled are sent
// as they are); it is not part of the wire form.
//
//	world.ToolCall{Name: "lookup", Arguments: `{"q":"x"}`}
//	world.ToolCall{Name: "store", Arguments: `{}`, Fill: 300000}
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
	Fill      int
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

// MarshalJSON writes {"id", "type": "function", "function": {"name", "arguments"}}.
func (tc ToolCall) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments}})
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (tc *ToolCall) UnmarshalJSON(b []byte) error {
	var w wireToolCall
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*tc = ToolCall{ID: w.ID, Name: w.Function.Name, Arguments: w.Function.Arguments}
	return nil
}

// ToolSpec is a tool offered to the model in a request; its JSON form is
// {"type": "function", "function": {"name", "description", "parameters"}}.
//
//	name := w.Model().Requests()[0].Tools[0].Name
type ToolSpec struct {
	Name        string
	Description string
	Parameters  map[string]any
}

// UnmarshalJSON reads {"type": "function", "function": {"name", "description", "parameters"}}.
func (t *ToolSpec) UnmarshalJSON(b []byte) error {
	var w struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = ToolSpec{Name: w.Function.Name, Description: w.Function.Description, Parameters: w.Function.Parameters}
	return nil
}

// MarshalJSON writes the form UnmarshalJSON reads.
func (t ToolSpec) MarshalJSON() ([]byte, error) {
	type fn struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters,omitempty"`
	}
	return json.Marshal(struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}{"function", fn(t)})
}

// chatRequest is the part of a Chat Completions request the world reads.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []ToolSpec      `json:"tools"`
	Stream              bool            `json:"stream"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// includeUsage reports whether a streamed request asked for the usage-only chunk.
func (c *chatRequest) includeUsage() bool {
	return c.Stream && c.StreamOptions != nil && c.StreamOptions.IncludeUsage
}

// knownRoles are the message roles a request may use.
var knownRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// validate applies the rules a real provider enforces on a conversation; it returns the reason
// for refusing the request, or "".
func (c *chatRequest) validate() string {
	if len(c.Messages) == 0 {
		return "no messages"
	}
	open := map[string]bool{} // tool calls not yet answered
	for _, m := range c.Messages {
		if !knownRoles[m.Role] {
			return "unknown message role"
		}
		if m.Role != "tool" && len(open) > 0 {
			return "an assistant tool call is not followed by its tool result"
		}
		switch m.Role {
		case "assistant":
			for _, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Name == "" {
					return "a tool call without id or name"
				}
				open[tc.ID] = true
			}
		case "tool":
			if !open[m.ToolCallID] {
				return "a tool result that answers no pending tool call"
			}
			delete(open, m.ToolCallID)
		}
	}
	if len(open) > 0 {
		return "an assistant tool call is not followed by its tool result"
	}
	return ""
}

// lastUserText is the content of the last user message, or "".
func lastUserText(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// firstRunes returns at most n runes of s.
func firstRunes(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i]
		}
		count++
	}
	return s
}

// fragments cuts s into up to three pieces of about equal length on rune boundaries.
func fragments(s string) []string {
	runes := []rune(s)
	if len(runes) < 3 {
		return []string{s}
	}
	a, b := len(runes)/3, 2*len(runes)/3
	return []string{string(runes[:a]), string(runes[a:b]), string(runes[b:])}
}
