// Package sutconfig is the configuration the kit hands a system under test (LOOM_CONFIG): what
// an engine needs to read it, apart from the kit's requirement catalogue and OpenAPI document.
package sutconfig

// SUTConfig is the one document through which the kit hands the world to a system under test.
// Its JSON form is described by schemas/sut-config.schema.json; a process SUT reads it from the
// file named by the LOOM_CONFIG environment variable.
//
// Every URL names an endpoint the kit serves (spec/world.md). A field left empty means "not
// configured": no model (the system may answer with a built-in one), no tools, no summarizer, and so
// on. Durations are milliseconds.
//
//	cfg := sutconfig.SUTConfig{Listen: "127.0.0.1:8080", DataDir: "/var/lib/loom"}
type SUTConfig struct {
	// Listen is the host:port the system must serve HTTP on.
	Listen string `json:"listen"`
	// DataDir is the directory the system keeps its durable state in. A restart reuses it. The
	// kit hands a system a directory that does not exist yet at its first start.
	DataDir string `json:"dataDir"`
	// Storage tunes how the system keeps its state (optional).
	Storage StorageConfig `json:"storage,omitzero"`
	// Node makes the system one of several nodes sharing the server database of Storage.URL
	// (optional; the kit's nodes driver sets it, spec/nodes.md).
	Node NodeConfig `json:"node,omitzero"`

	Model      ModelConfig    `json:"model"`
	Tools      ToolsConfig    `json:"tools,omitzero"`
	Summarizer EndpointConfig `json:"summarizer,omitzero"`
	Identity   IdentityConfig `json:"identity"`
	Clearance  EndpointConfig `json:"clearance,omitzero"`
	ErrorHook  EndpointConfig `json:"errorHook,omitzero"`
	// Memory is the agent memory service: recall at URL + "/memory/recall", write-back at
	// URL + "/memory/write" (spec/world.md).
	Memory       EndpointConfig     `json:"memory,omitzero"`
	Signing      SigningConfig      `json:"signing"`
	Conversation ConversationConfig `json:"conversation,omitzero"`
	Gateway      GatewayConfig      `json:"gateway,omitzero"`
	Shared       SharedConfig       `json:"shared,omitzero"`
	// Stream tunes the session streams (profile stream; spec/stream.md).
	Stream StreamConfig `json:"stream,omitzero"`
	// Threads configures the box's roles and its connections to peer boxes (profile threads;
	// spec/peer.md).
	Threads ThreadsConfig `json:"threads,omitzero"`
	// Runs bounds the work one agent run may ask for (profile agent; spec/http.md, Run limits).
	Runs RunsConfig `json:"runs,omitzero"`
}

// RunsConfig bounds what one request to start an agent run may ask for. Zero means the default.
//
//	cfg.Runs = sutconfig.RunsConfig{MaxIterations: 16}
type RunsConfig struct {
	// MaxIterations is the most model calls a run may ask for with its maxIterations option
	// (default 64); a larger value is refused with 400 naming maxIterations. A run that names
	// none gets 8, or this ceiling when it is lower.
	MaxIterations int `json:"maxIterations,omitempty"`
}

// ThreadsConfig gives the box its roles, its people and its connections to peer boxes
// (spec/peer.md, Configuration).
type ThreadsConfig struct {
	Roles []RoleConfig `json:"roles,omitempty"`
	// Members are the box's people: they read the agent conversations a peer started.
	Members     []Principal        `json:"members,omitempty"`
	Connections []ConnectionConfig `json:"connections,omitempty"`
}

// RoleConfig is one role of the box: a name (1 to 64 of a-z, 0-9 and -), the system prompt
// its runs are given (optional), and the principals the box issues to the role: a caller whose
// principal is exactly one of them (tenant, actor and onBehalfOf) is the role. Nothing else makes
// a caller a role, whatever its actor is spelled.
type RoleConfig struct {
	Name       string      `json:"name"`
	Prompt     string      `json:"prompt,omitempty"`
	Principals []Principal `json:"principals,omitempty"`
}

// ConnectionConfig is one connection to a peer box. URL is the peer's base: texts go to URL +
// "/peer/v1/texts" with the bearer token Send; the peer presents Accept. Owner pauses, unpauses
// and revokes it. Queue bounds the texts waiting to be sent on it (default 64). Budget bounds
// the bytes of text each agent conversation of it stores (default 4194304); Rate the texts the
// peer may present on it per minute (default 600).
type ConnectionConfig struct {
	ID     string    `json:"id"`
	URL    string    `json:"url"`
	Send   string    `json:"send"`
	Accept string    `json:"accept"`
	Owner  Principal `json:"owner"`
	Queue  int       `json:"queue,omitempty"`
	Budget int64     `json:"budget,omitempty"`
	Rate   int       `json:"rate,omitempty"`
}

// StreamConfig tunes the session streams. Zero values take the system's defaults.
type StreamConfig struct {
	// MaxFrames and MaxBytes bound each session's frame log (the oldest frames go first, so
	// the log has a floor).
	MaxFrames int `json:"maxFrames,omitempty"`
	MaxBytes  int `json:"maxBytes,omitempty"`
	// RetainMs is how long assistant text deltas and terminal output are served in full; after
	// it they are served empty and marked expired.
	RetainMs int64 `json:"retainMs,omitempty"`
	// TicketMs is how long a stream ticket waits for its upgrade: at most 15000 (the default),
	// a system may be asked for less.
	TicketMs int64 `json:"ticketMs,omitempty"`
	// HeartbeatMs is how often an idle stream sends a heartbeat frame.
	HeartbeatMs int64 `json:"heartbeatMs,omitempty"`
	// ResumeWaitMs is how long a reply left waiting by a restart may take once the system is up
	// again (60000 by default); past it the turn is given up with status {state: "failed",
	// note: "couldn't resume, ask again"} and nothing more of it is shown.
	ResumeWaitMs int64 `json:"resumeWaitMs,omitempty"`
	// PrincipalTickets bounds the tickets one caller may have waiting at once (made, not yet
	// presented, not expired): 64 by default. An open past it is 429 with reason "tickets".
	PrincipalTickets int `json:"principalTickets,omitempty"`
	// ResidentBytes bounds the frame logs a system holds in memory at once, each counted at the
	// most it may hold (maxBytes): 2 GiB by default. PrincipalResidentBytes is one caller's
	// share of it (64 MiB by default): a caller may hold at least one session's stream, and
	// an open past the share is 429 with reason "resident" (spec/stream.md, Limits).
	ResidentBytes          int64 `json:"residentBytes,omitempty"`
	PrincipalResidentBytes int64 `json:"principalResidentBytes,omitempty"`
}

// ModelConfig points at an OpenAI-compatible Chat Completions server.
type ModelConfig struct {
	// BaseURL is the API root; requests go to BaseURL + "/chat/completions".
	BaseURL string `json:"baseURL,omitempty"`
	Name    string `json:"name,omitempty"`
	APIKey  string `json:"apiKey,omitempty"`
	// Stream asks for streamed responses (the default when omitted is true).
	Stream *bool `json:"stream,omitempty"`
	// ResponseCache asks the system to keep the model's responses to agent runs and answer a
	// request as written from them, partitioned by the run's principal and its cacheScope (a
	// run must then name its cacheScope; spec/http.md, Run response cache).
	ResponseCache bool `json:"responseCache,omitempty"`
}

// EndpointConfig names one world endpoint.
type EndpointConfig struct {
	URL string `json:"url,omitempty"`
}

// ToolsConfig declares the tools a turn may call and where they run.
type ToolsConfig struct {
	// BaseURL: a call to tool T is POST BaseURL + "/" + T.
	BaseURL     string    `json:"baseURL,omitempty"`
	Definitions []ToolDef `json:"definitions,omitempty"`
}

// ToolDef is one tool as the model sees it, plus its data class for shared mode.
type ToolDef struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty"`
	Class       string         `json:"class,omitempty"`
	// NeedsApproval marks a tool whose calls must be approved by a person.
	NeedsApproval bool `json:"needsApproval,omitempty"`
	// Idempotent false declares a tool whose effect is not safe to repeat; absent means not
	// declared either way.
	Idempotent *bool `json:"idempotent,omitempty"`
	// Kind "human" declares a tool a person answers (through the system's human-answer route);
	// empty is an ordinary tool.
	Kind string `json:"kind,omitempty"`
}

// IdentityConfig maps bearer tokens to principals: statically, through an introspection endpoint
// (asked on every request, so a revocation takes effect at once), or both (static first).
type IdentityConfig struct {
	URL        string               `json:"url,omitempty"`
	Principals map[string]Principal `json:"principals,omitempty"`
	// Insecure lets a server run with no authentication at all (loopback Host names only).
	Insecure bool `json:"insecure,omitempty"`
}

// Principal is who a bearer token speaks for.
type Principal struct {
	Tenant     string `json:"tenant,omitempty"`
	Actor      string `json:"actor,omitempty"`
	OnBehalfOf string `json:"onBehalfOf,omitempty"`
	// Grants lists the tools this principal may call: absent (nil) means every tool, a list (an
	// empty one included) exactly the tools it names. A run or turn that calls another is
	// denied (spec/world.md, Identity). omitzero keeps an empty list apart from an absent one.
	Grants []string `json:"grants,omitzero"`
	// NarrowedFrom, set on a delegated principal, says the host maps the delegation to this
	// narrowed principal (shared mode refuses an unmapped delegate).
	Narrowed bool `json:"narrowed,omitempty"`
}

// SigningConfig holds the host key envelopes are signed with (base64, at least 32 bytes decoded)
// and the previous keys that still verify.
type SigningConfig struct {
	Key          string   `json:"key"`
	PreviousKeys []string `json:"previousKeys,omitempty"`
}

// ConversationConfig sets the dialogue's limits. Zero means the default schemas/sut-config.schema.json writes beside each setting.
type ConversationConfig struct {
	SystemPrompt      string        `json:"systemPrompt,omitempty"`
	BargeIn           *bool         `json:"bargeIn,omitempty"`
	RotateEveryTurns  int           `json:"rotateEveryTurns,omitempty"`
	MaxTurnChars      int           `json:"maxTurnChars,omitempty"`
	MaxScan           int           `json:"maxScan,omitempty"`
	MaxCarryBytes     int           `json:"maxCarryBytes,omitempty"`
	MaxWindowTurns    int           `json:"maxWindowTurns,omitempty"`
	MaxEnvelopeAgeMs  int64         `json:"maxEnvelopeAgeMs,omitempty"`
	MaxInvalidRecords int           `json:"maxInvalidRecords,omitempty"` // invalid messages recorded in all, empty and oversized ones included (default 100)
	ReplaySetSize     int           `json:"replaySetSize,omitempty"`
	MaxIterations     int           `json:"maxIterations,omitempty"` // model calls per turn at most (default 8)
	ParallelTools     bool          `json:"parallelTools,omitempty"`
	ToolTimeoutMs     int64         `json:"toolTimeoutMs,omitempty"`
	Budget            *BudgetConfig `json:"budget,omitempty"`
}

// BudgetConfig turns on token-aware context fitting.
type BudgetConfig struct {
	ContextWindow       int `json:"contextWindow"`
	ReserveOutputTokens int `json:"reserveOutputTokens,omitempty"`
	MaxSummaryTokens    int `json:"maxSummaryTokens,omitempty"`
	PerMessage          int `json:"perMessage,omitempty"`
}

// GatewayConfig sets the HTTP edge's browser rules and limits. Zero means the default schemas/sut-config.schema.json writes beside each setting.
type GatewayConfig struct {
	AllowedOrigins         []string `json:"allowedOrigins,omitempty"`
	AllowedHosts           []string `json:"allowedHosts,omitempty"`
	AllowCredentials       bool     `json:"allowCredentials,omitempty"`
	MaxStreams             int      `json:"maxStreams,omitempty"`
	MaxStreamsPerPrincipal int      `json:"maxStreamsPerPrincipal,omitempty"`
	MaxSubscribers         int      `json:"maxSubscribers,omitempty"`
	MaxBodyBytes           int      `json:"maxBodyBytes,omitempty"`
	StreamLifetimeMs       int64    `json:"streamLifetimeMs,omitempty"`
	MaxPendingBytes        int      `json:"maxPendingBytes,omitempty"`
	PostsPerMinute         int      `json:"postsPerMinute,omitempty"`
	ReauthMs               int64    `json:"reauthMs,omitempty"`
	PollMs                 int64    `json:"pollMs,omitempty"`
	// RequestTimeoutMs bounds how long a request may take to arrive in full, headers and body
	// (default 30 000); a body still incomplete then is answered 408 and its connection closed.
	// A request without a body (an event stream) is exempt once its headers are in.
	RequestTimeoutMs int64 `json:"requestTimeoutMs,omitempty"`
	// HeadersTimeoutMs bounds how long a request's headers may take to arrive (default 10 000,
	// never more than RequestTimeoutMs); then the connection is closed.
	HeadersTimeoutMs int64 `json:"headersTimeoutMs,omitempty"`
	// MaxConnections caps the open connections, event streams and idle keep-alive ones included
	// (default 512); a connection over the cap is closed at once, unanswered.
	MaxConnections int `json:"maxConnections,omitempty"`
}

// SharedConfig configures shared mode.
type SharedConfig struct {
	// ServicePrincipal is the host identity a shared conversation's coordinator runs as; no
	// end-user identity may equal it. Shared mode is off without it.
	ServicePrincipal  *Principal `json:"servicePrincipal,omitempty"`
	MaxParticipants   int        `json:"maxParticipants,omitempty"`
	MaxQueuedPerAsker int        `json:"maxQueuedPerAsker,omitempty"`
	// Grants lists, per asker (its identity key, spec/http.md: "tenant/actor", or
	// "tenant/actor~onBehalfOf", each field with %, / and ~ escaped), the tools their turns may
	// call. An asker not listed may call every tool.
	Grants map[string][]string `json:"grants,omitempty"`
	// Narrowed lists the delegated identities (their identity keys, "tenant/actor~onBehalfOf"
	// with each field escaped) the host maps to a narrowed principal; any other delegated asker
	// is refused.
	Narrowed []string `json:"narrowed,omitempty"`
}

// Version is the version of the requirement catalogue and of the surface it describes.
const Version = "0.1.0"

// StorageConfig tunes how a system keeps its durable state.
//
//	cfg.Storage = sutconfig.StorageConfig{AllowEmpty: true}
type StorageConfig struct {
	// AllowEmpty lets the system start on a data directory that exists and holds nothing, or
	// whose stored data is gone. Without it a system refuses to start there: it is what deleted
	// data or a volume that did not mount looks like (ADR0122-D3-21).
	AllowEmpty bool `json:"allowEmpty,omitempty"`
	// Sync is "full" (the default: a commit is acknowledged only once it is on the disk, so a
	// power loss loses nothing acknowledged) or "normal" (faster; a power loss may roll back the
	// newest acknowledged commits, a process crash never does).
	Sync string `json:"sync,omitempty"`
	// URL names a server database the system keeps its durable state in, in place of the data
	// directory (a postgres:// URL for the reference engine). Empty: the data directory holds
	// everything. The kit sets it when a run gives every scenario a database of its own
	// (loomcheck run --store); a system without such a backend ignores it.
	URL string `json:"url,omitempty"`
}

// NodeConfig makes a system one of several nodes on one shared database (spec/nodes.md): every
// node serves the whole surface at its own address, one of them at a time runs the executions,
// and the others forward to it.
//
//	cfg.Node = sutconfig.NodeConfig{ID: "node-1", Advertise: "http://10.0.0.7:8080", LeaseMs: 2000}
type NodeConfig struct {
	// ID names the node, unique among the nodes of one database.
	ID string `json:"id"`
	// Advertise is the base URL the other nodes forward requests to (default: http://listen).
	Advertise string `json:"advertise,omitempty"`
	// LeaseMs is how long a node's hold on the executions lasts unless renewed: a node that dies
	// has its executions taken over by another this long after its last renewal (0: the
	// system's default).
	LeaseMs int `json:"leaseMs,omitempty"`
	// Partitions is how many partitions the executions are shared out in, each held by one node
	// through a lease of its own (default 1: one lease for them all). It is fixed when the
	// database is made: a node configured with another count than the database's refuses to
	// start.
	Partitions int `json:"partitions,omitempty"`
}
