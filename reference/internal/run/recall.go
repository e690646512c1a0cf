package run

import (
	"encoding/json"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/turn"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// idRecall is the journal id of a run's recall, after the run's loop id: the entries recalled
// are a recorded decision, so a resumed run serves them and never recalls again.
const idRecall = "#recall"

// checkRecall refuses a recall the system cannot honour, naming the option "recall": no memory
// is configured.
func (rs *Runs) checkRecall(opt Options) error {
	if opt.Recall && rs.deps.Memory == nil {
		return loomtype.BadRequest("recall", "") // no memory is configured
	}
	return nil
}

// recall is the run option Recall: once, before the run's first model call, the owner's memory
// scope (the whole identity) is asked with the prompt as the query, and what it answers is
// recorded as a decision; the entries then precede the prompt inside its user message, fenced
// as data exactly as a conversation's turn puts them (spec/prompt.md), a tainted entry among
// them like any other, never in a message of its own. A recall that fails degrades to no
// entries (recorded as such). Without Recall, msgs is returned as it is. Only a kernel error is
// returned.
//
//	msgs, err := rs.recall(c, owner, opt, msgs)
func (rs *Runs) recall(c *kernel.Context, owner loomtype.Identity, opt Options, msgs []model.Message) ([]model.Message, error) {
	if !opt.Recall || rs.deps.Memory == nil {
		return msgs, nil
	}
	scope := owner.Key()
	raw, err := c.Decide(loopID+idRecall, func() (json.RawMessage, error) {
		entries, err := rs.deps.Memory.Recall(c.Ctx(), scope, opt.Prompt)
		if err != nil {
			entries = nil // a memory that cannot be reached degrades to none
		}
		if entries == nil {
			entries = []hostio.MemoryEntry{}
		}
		return json.Marshal(entries)
	})
	if err != nil {
		return nil, err
	}
	var entries []hostio.MemoryEntry
	_ = json.Unmarshal(raw, &entries)
	return turn.WithMemory(msgs, entries), nil
}
