package dialogue

import (
	"github.com/loomcheck/loomcheck/reference/model"
)

// Fences of the rolling summary (spec/prompt.md).
const (
	SummaryOpen  = "<conversation-summary>\n"
	SummaryClose = "\n</conversation-summary>"
)

// fenceSummary renders the summary message: model output over untrusted text, fenced and sent as
// a user message, never in the system prompt.
func fenceSummary(s string) string { return SummaryOpen + s + SummaryClose }

// composeMessages builds a turn's request: the operator's system prompt, the summary and its
// acknowledgement, the window's turns oldest first (each a user and an assistant message, so that
// roles alternate), and the prompt. A user's words only ever travel as user messages.
func composeMessages(system, summary string, window []turnMem, prompt string) []model.Message {
	msgs := make([]model.Message, 0, 4+2*len(window))
	if system != "" {
		msgs = append(msgs, model.Message{Role: model.RoleSystem, Content: system})
	}
	if summary != "" {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Content: fenceSummary(summary)},
			model.Message{Role: model.RoleAssistant, Content: SummaryAck})
	}
	for _, t := range window {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Content: t.modelUser()},
			model.Message{Role: model.RoleAssistant, Content: t.modelReply()})
	}
	return append(msgs, model.Message{Role: model.RoleUser, Content: prompt})
}
