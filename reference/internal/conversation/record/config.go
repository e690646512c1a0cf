package record

import (
	"context"
	"fmt"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/budget"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Modes (loomtype.Mode).
const (
	ModeOwner  = loomtype.ModeOwner
	ModeShared = loomtype.ModeShared
)

// Defaults of Config.
const (
	DefaultRotateEveryTurns  = 100
	DefaultMaxTurnChars      = 32000
	DefaultMaxScan           = 2000
	DefaultMaxCarryBytes     = 256 << 10
	DefaultMaxWindowTurns    = 64
	DefaultMaxEnvelopeAgeMs  = 600_000
	DefaultMaxInvalidRecords = 100
	DefaultMaxIterations     = 8
	RecentKeys               = 256
	ReplayCapacity           = 1024
)

// Placeholders sent to the model for a turn with no reply text, so that roles alternate.
const (
	PlaceholderInterrupted = "(interrupted)"
	PlaceholderFailed      = "(no reply: the request failed)"
	SummaryAck             = "(summary noted)"
)

// Config configures conversations. Zero values mean the documented defaults.
type Config struct {
	// Keys signs and verifies envelopes: the current key first, then previous keys that still
	// verify. At least one key of at least 32 bytes is required.
	Keys             [][]byte
	SystemPrompt     string
	BargeIn          bool
	RotateEveryTurns int
	MaxTurnChars     int
	MaxScan          int
	MaxCarryBytes    int
	MaxWindowTurns   int
	MaxEnvelopeAgeMs int64
	// MaxInvalidRecords is how many invalid messages (failed verification, empty or over
	// MaxTurnChars) are recorded as rejected records in all; past it they are only counted.
	MaxInvalidRecords int
	// ReplaySetSize is how many consumed envelope ids the replay set keeps (default 1024).
	ReplaySetSize int
	MaxIterations int
	ParallelTools bool
	Model         string
	Tools         []model.Tool
	// ToolClasses maps a tool to its data class (shared mode).
	ToolClasses map[string]string
	// NeedsApproval lists tools whose calls need a person's approval. The dialogue cannot hold
	// a parked approval gate, so New refuses any.
	NeedsApproval []string
	// NotIdempotent lists tools declared idempotent: false: a call of one that a crash cut off
	// is in doubt and ends its turn instead of running again.
	NotIdempotent []string
	Budget        *Budget
	Shared        Shared
}

// Budget turns on token-aware context fitting.
type Budget struct {
	ContextWindow       int
	ReserveOutputTokens int
	// MaxSummaryTokens bounds the rolling summary (default a quarter of the window).
	MaxSummaryTokens int
	Counter          budget.Counter
}

// Deps are the conversation's connections to the world.
type Deps struct {
	Provider   model.Provider
	Tools      agent.ToolRunner
	Summarizer hostio.Summarizer
	// OnError receives the real error behind a failed turn, once.
	OnError func(hostio.ErrorReport)
	// Allowed reports whether asker may call tool (nil: every tool).
	Allowed func(asker loomtype.Identity, tool string) bool
	// Cleared reports whether viewer is cleared for every class (shared mode; fail closed).
	Cleared func(ctx context.Context, viewer loomtype.Identity, classes []string) bool
	// Memory is the agent memory, recalled and written back per asker (nil: none).
	Memory hostio.Memory
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Defaults of shared mode.
const (
	DefaultMaxParticipants   = 100
	DefaultMaxQueuedPerAsker = 8
	// Unclassified is the class of a tool the host declared no class for.
	Unclassified = "unclassified"
)

// Shared configures shared mode: a conversation with explicit participants, each turn run as its
// asker, every answer classified and every entry filtered per viewer.
type Shared struct {
	// Service is the host principal the coordinating execution runs as. No end-user identity
	// may equal it. Without it, shared conversations cannot start.
	Service           *loomtype.Identity
	MaxParticipants   int
	MaxQueuedPerAsker int
	// Grants lists, per asker (IdentityKey), the tools their turns may call; an asker not listed
	// may call every tool.
	Grants map[string][]string
	// Narrowed lists the delegated identities (IdentityKey) the host maps to a narrowed
	// principal; other delegated askers are refused.
	Narrowed []string
}

// Validate refuses a service principal without an actor (loomtype.ErrConfig, wrapped).
func (s Shared) Validate() error {
	if s.Service != nil && !s.Service.Valid() {
		return fmt.Errorf("%w: the service principal needs an actor", loomtype.ErrConfig)
	}
	return nil
}
