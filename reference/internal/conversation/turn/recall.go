package turn

import (
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/model"
)

// WithMemory returns msgs with the recalled entries fenced as data at the head of the last
// message (the prompt's user message), one line per entry, oldest first, exactly as a turn of a
// conversation puts them (spec/prompt.md); msgs itself is not changed, and no entries leave it as
// it was. Every entry, a tainted one included, travels only inside that fence: never as a
// message of its own. It is a pure function, safe for concurrent use.
//
//	msgs = turn.WithMemory([]model.Message{{Role: model.RoleUser, Content: "check pump 7"}}, entries)
func WithMemory(msgs []model.Message, entries []hostio.MemoryEntry) []model.Message {
	if len(entries) == 0 || len(msgs) == 0 {
		return msgs
	}
	return withMemory(msgs, entries)
}
