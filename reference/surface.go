package reference

import (
	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
)

// The engine's parts live under reference/internal, where a program outside this module cannot
// import them. The names below are the ones such a program has to write: the types of the
// Options fields and of what they hold, the hooks it implements, the clients Engine returns and
// the options of their calls. Each is an alias, so a value is the engine's own type; nothing else
// of the internal packages is named here, and nothing should be without an embedder needing it.

// Options and what their fields hold.
type (
	// ConversationConfig configures the dialogue (Options.Conversation).
	ConversationConfig = conversation.Config
	// ConversationBudget turns on token-aware context fitting (ConversationConfig.Budget).
	ConversationBudget = conversation.Budget
	// ConversationDeps connect conversations to the world (Options.Deps).
	ConversationDeps = conversation.Deps
	// GatewayConfig configures the HTTP surface (Options.Gateway).
	GatewayConfig = gateway.Config
	// Edge sets how Serve serves the surface: deadlines and the connection cap (Options.Edge).
	Edge = gateway.Edge
	// StreamConfig configures the session streams (Options.Stream).
	StreamConfig = sessions.Config
	// ThreadsConfig gives the box its roles and its connections to peer boxes (Options.Threads).
	ThreadsConfig = threads.Config
	// ThreadRole is one role of the box (ThreadsConfig.Roles).
	ThreadRole = threads.Role
	// ThreadConnection is one connection to a peer box (ThreadsConfig.Connections).
	ThreadConnection = threads.Connection
)

// Hooks an embedding program implements or fills.
type (
	// Authenticator derives the caller of a request (GatewayConfig.Authenticate).
	Authenticator = gateway.Authenticator
	// BearerIdentity resolves bearer tokens to principals, for BearerAuth.
	BearerIdentity = hostio.Identity
	// ErrorReport is what ConversationDeps.OnError receives.
	ErrorReport = hostio.ErrorReport
	// SummaryMessage is one evicted message a ConversationDeps.Summarizer folds.
	SummaryMessage = hostio.SummaryMessage
	// MemoryEntry is one entry a ConversationDeps.Memory recalls or writes.
	MemoryEntry = hostio.MemoryEntry
	// ToolError is a failure a ConversationDeps.Tools runner reports for the model to read.
	ToolError = agent.ToolError
)

// ErrUnauthenticated is what an Authenticator returns for a missing or unknown credential.
var ErrUnauthenticated = gateway.ErrUnauthenticated

// ErrDenied is matched (errors.Is) by the error a hook is told of an authority denial: a tool
// call, or a run's write-back through a tool, that the principal is not granted.
var ErrDenied = agent.ErrDenied

// DeniedError names the tool of an authority denial (errors.As).
type DeniedError = agent.DeniedError

// The clients Engine returns and the options of their calls.
type (
	// Conversations is the conversation client (Engine.Conversations).
	Conversations = conversation.Conversations
	// StartOptions are the options of Conversations.Start.
	StartOptions = conversation.StartOptions
	// SendOptions are the options of Conversations.SendTurn.
	SendOptions = conversation.SendOptions
	// HistoryOptions are the options of Conversations.History.
	HistoryOptions = conversation.HistoryOptions
	// Runs is the agent run client (Engine.Runs).
	Runs = run.Runs
	// RunOptions are what Runs.Start starts a run with.
	RunOptions = run.Options
	// RunHistoryEntry is one message before a run's prompt (RunOptions.History).
	RunHistoryEntry = run.HistoryEntry
	// RunWriteBack is a run's write-back of its answer (RunOptions.WriteBack).
	RunWriteBack = run.WriteBack
	// RunApproval is a run's approval rule (RunOptions.Approval).
	RunApproval = run.ApprovalRule
	// Sessions is the session stream service (Engine.Sessions).
	Sessions = sessions.Service
	// FrameSpec is one frame Sessions.Append logs.
	FrameSpec = stream.Spec
	// Threads is the service of agent conversations between boxes (Engine.Threads).
	Threads = threads.Service
)
