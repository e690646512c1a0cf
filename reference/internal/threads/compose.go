package threads

import (
	"fmt"

	"github.com/loomcheck/loomcheck/reference/model"
)

// PeerSend is the built-in tool every run of a role has (spec/peer.md, Sending).
var PeerSend = model.Tool{Name: "peer.send", Parameters: map[string]any{
	"type":     "object",
	"required": []any{"to", "text"},
	"properties": map[string]any{
		"to":   map[string]any{"type": "string", "description": "connection/role"},
		"text": map[string]any{"type": "string"},
	},
}}

// Earlier is one earlier turn of an agent conversation as the next request shows it: the texts
// it took and, when it completed, its final answer.
type Earlier struct {
	Texts  []string
	Output *string
}

// AgentTurn is what the request of a turn in an agent conversation is made of.
type AgentTurn struct {
	Prompt     string // the role's prompt ("" for none)
	Role       string
	ID         string // the agent conversation's id
	Connection string
	PeerRole   string
	// Root is the description of the root: "the conversation of <actor>", "task <id>: <title>"
	// or "itself".
	Root string
	// Left is how many earlier turns the request leaves out (the first ones); Earlier are
	// the turns after them.
	Left    int
	Earlier []Earlier
	// Stopped: the turn before was stopped. Failed: the texts that failed since the last turn,
	// each "message: reason" is given as Failure.
	Stopped bool
	Failed  []Failure
	Texts   []string
}

// Failure is one text of this box that failed.
type Failure struct {
	Message, Reason string
}

// AgentRequest composes the messages of a turn in an agent conversation, exactly as spec/peer.md
// (Receiving) lists them. Pure.
//
//	msgs := threads.AgentRequest(threads.AgentTurn{Role: "planner", ID: "ac_1", Connection: "lab",
//		PeerRole: "scout", Root: "itself", Texts: []string{"hello"}})
func AgentRequest(t AgentTurn) []model.Message {
	var out []model.Message
	if t.Prompt != "" {
		out = append(out, model.Message{Role: model.RoleSystem, Content: t.Prompt})
	}
	out = append(out, model.Message{Role: model.RoleSystem, Content: fmt.Sprintf(
		"You are %s, in agent conversation %s with %s/%s. It answers for %s.", t.Role, t.ID, t.Connection, t.PeerRole, t.Root)})
	if t.Left > 0 {
		out = append(out, leftOut(t.Left))
	}
	for _, e := range t.Earlier {
		for _, x := range e.Texts {
			out = append(out, model.Message{Role: model.RoleUser, Content: x})
		}
		if e.Output != nil {
			out = append(out, model.Message{Role: model.RoleAssistant, Content: *e.Output})
		}
	}
	if t.Stopped {
		out = append(out, model.Message{Role: model.RoleSystem, Content: "A person stopped your last turn."})
	}
	for _, f := range t.Failed {
		out = append(out, model.Message{Role: model.RoleSystem, Content: fmt.Sprintf("Your text %s failed: %s.", f.Message, f.Reason)})
	}
	for _, x := range t.Texts {
		out = append(out, model.Message{Role: model.RoleUser, Content: x})
	}
	return out
}

// Exchange is one earlier turn of a person's conversation with a role.
type Exchange struct {
	Text   string
	Output *string
}

// PersonRequest composes the messages of a turn in a person's conversation with a role: the
// role's prompt, each earlier turn's text and answer, then the new text. Pure.
//
//	msgs := threads.PersonRequest("You plan the work.", nil, "plan the move")
func PersonRequest(prompt string, earlier []Exchange, text string) []model.Message {
	var out []model.Message
	if prompt != "" {
		out = append(out, model.Message{Role: model.RoleSystem, Content: prompt})
	}
	for _, e := range earlier {
		out = append(out, model.Message{Role: model.RoleUser, Content: e.Text})
		if e.Output != nil {
			out = append(out, model.Message{Role: model.RoleAssistant, Content: *e.Output})
		}
	}
	return append(out, model.Message{Role: model.RoleUser, Content: text})
}

// TaskRequest composes the messages of a task run. Pure.
//
//	msgs := threads.TaskRequest("You plan the work.", "tk_1", "Move the lab", "find a van")
func TaskRequest(prompt, taskID, title, text string) []model.Message {
	var out []model.Message
	if prompt != "" {
		out = append(out, model.Message{Role: model.RoleSystem, Content: prompt})
	}
	out = append(out, model.Message{Role: model.RoleSystem, Content: fmt.Sprintf("You work on task %s: %s.", taskID, title)})
	return append(out, model.Message{Role: model.RoleUser, Content: text})
}
