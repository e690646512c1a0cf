// Package dialogue is the conversation's flow: a conversation is one durable execution whose body
// takes signed messages from its inbox, verifies each, runs each accepted user turn (package
// turn) and records every transcript entry exactly once as a decision (package record). It
// carries its state across generations, fits a turn's context to the budget and folds evicted
// turns into a rolling summary. It holds no kernel: a flow reaches the one running it through its
// Context, so an execution the kernel recovers while it opens needs nothing set up after it.
package dialogue

import (
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/participants"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/turn"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// Names the flow reads from the shared vocabulary.
const (
	ModeOwner              = record.ModeOwner
	ModeShared             = record.ModeShared
	RecentKeys             = record.RecentKeys
	PlaceholderInterrupted = record.PlaceholderInterrupted
	PlaceholderFailed      = record.PlaceholderFailed
	SummaryAck             = record.SummaryAck
	Unclassified           = record.Unclassified
)

// Dialogue holds the conversation flows under one configuration. Safe for concurrent use.
type Dialogue struct {
	cfg   record.Config
	deps  record.Deps
	hub   *live.Hub
	book  *participants.Book
	turns *turn.Runner
}

// New returns the flows of conversations under cfg and deps (defaults already applied): live
// output goes to hub, and shared conversations read their participants from book, the client's.
//
//	d := dialogue.New(cfg, deps, hub, &book)
//	k, err := kernel.Open(ctx, st, kernel.Options{Flows: d.Flows()})
func New(cfg record.Config, deps record.Deps, hub *live.Hub, book *participants.Book) *Dialogue {
	return &Dialogue{cfg: cfg, deps: deps, hub: hub, book: book, turns: turn.New(cfg, deps, hub)}
}

// Flows returns the kernel flows conversations need: the dialogue (record.FlowName) and a
// shared-mode turn (record.TurnFlowName).
func (cv *Dialogue) Flows() map[string]kernel.Flow {
	return map[string]kernel.Flow{record.FlowName: cv.flow, record.TurnFlowName: cv.turns.Flow}
}
