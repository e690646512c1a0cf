package reference

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/budget"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// SpecVersion is the version of the requirement catalogue this engine implements.
const SpecVersion = sutconfig.Version

// Profiles are the profiles this engine claims.
var Profiles = []string{"core", "durability", "barge-in", "agent", "budget", "envelope", "gateway", "stream"}

// profiles are the profiles an engine with this configuration claims: shared mode needs a
// service principal.
func profiles(c sutconfig.SUTConfig) []string {
	out := append([]string{}, Profiles...)
	if c.Shared.ServicePrincipal != nil {
		out = append(out, "shared")
	}
	if len(c.Threads.Roles) > 0 {
		out = append(out, "threads")
	}
	return out
}

// FromConfig turns the kit's configuration document into engine options: every hook becomes an
// HTTP client of the endpoint the document names.
//
// Errors: loomtype.ErrConfig (wrapped) for a missing or bad signing key or data directory.
//
//	opt, err := reference.FromConfig(cfg)
//	eng, err := reference.Open(ctx, opt)
func FromConfig(c sutconfig.SUTConfig) (Options, error) {
	var opt Options
	if err := storageOptions(c, &opt); err != nil {
		return opt, err
	}
	keys, err := signingKeys(c.Signing)
	if err != nil {
		return opt, err
	}
	opt.Conversation = conversationConfig(c, keys, &opt)
	opt.ResponseCache = c.Model.ResponseCache
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	hook := worldDeps(c, hc, &opt)
	gatewayOptions(c, hook, &opt)
	if len(c.Identity.Principals) > 0 || c.Identity.URL != "" {
		grants, err := newGrantTable(c.Identity.Principals)
		if err != nil {
			return opt, err
		}
		ident := &hostio.Identity{Static: c.Identity.Principals, URL: c.Identity.URL, Client: hc}
		opt.Gateway.Authenticate = bearerAuth(ident, grants)
		opt.Deps.Allowed = grants.allowed
	}
	opt.RunMaxIterations = c.Runs.MaxIterations
	if len(c.Threads.Roles) > 0 {
		opt.Threads = threadsConfig(c.Threads, hc)
	}
	return opt, nil
}

// storageOptions sets where the state is kept: the data directory, a server database, the node
// of several, and how commits wait for the disk.
func storageOptions(c sutconfig.SUTConfig, opt *Options) error {
	if c.DataDir == "" {
		return fmt.Errorf("%w: dataDir is required", loomtype.ErrConfig)
	}
	opt.DataDir = c.DataDir
	opt.AllowEmpty = c.Storage.AllowEmpty
	if u := c.Storage.URL; u != "" {
		if !isServerURL(u) {
			return fmt.Errorf("%w: storage.url must be a postgres:// or postgresql:// URL", loomtype.ErrConfig)
		}
		opt.StoreURL = u
	}
	if n := c.Node; n.ID != "" {
		if opt.StoreURL == "" {
			return fmt.Errorf("%w: node needs storage.url, the database the nodes share", loomtype.ErrConfig)
		}
		opt.Node = NodeOptions{ID: n.ID, Advertise: n.Advertise, Lease: time.Duration(n.LeaseMs) * time.Millisecond, Partitions: n.Partitions}
		if opt.Node.Advertise == "" {
			opt.Node.Advertise = "http://" + c.Listen
		}
	}
	switch c.Storage.Sync {
	case "", "full":
	case "normal":
		opt.SyncNormal = true
	default:
		return fmt.Errorf("%w: storage.sync %q is neither \"full\" nor \"normal\"", loomtype.ErrConfig, c.Storage.Sync)
	}
	return nil
}

// signingKeys are the signing key, then the previous ones, decoded.
func signingKeys(s sutconfig.SigningConfig) ([][]byte, error) {
	key, err := decodeKey(s.Key)
	if err != nil {
		return nil, err
	}
	keys := [][]byte{key}
	for _, k := range s.PreviousKeys {
		pk, err := decodeKey(k)
		if err != nil {
			return nil, err
		}
		keys = append(keys, pk)
	}
	return keys, nil
}

// conversationConfig is the dialogue's configuration: its settings, its tools (the tools that
// are not idempotent and those a person answers also go to opt), its budget and shared mode.
func conversationConfig(c sutconfig.SUTConfig, keys [][]byte, opt *Options) conversation.Config {
	cc := c.Conversation
	conv := conversation.Config{
		Keys: keys, SystemPrompt: cc.SystemPrompt, BargeIn: cc.BargeIn != nil && *cc.BargeIn,
		RotateEveryTurns: cc.RotateEveryTurns, MaxTurnChars: cc.MaxTurnChars, MaxScan: cc.MaxScan,
		MaxCarryBytes: cc.MaxCarryBytes, MaxWindowTurns: cc.MaxWindowTurns, MaxEnvelopeAgeMs: cc.MaxEnvelopeAgeMs,
		MaxInvalidRecords: cc.MaxInvalidRecords, ReplaySetSize: cc.ReplaySetSize, MaxIterations: cc.MaxIterations, ParallelTools: cc.ParallelTools,
		Model: c.Model.Name, ToolClasses: map[string]string{},
	}
	for _, t := range c.Tools.Definitions {
		conv.Tools = append(conv.Tools, model.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		if t.Class != "" {
			conv.ToolClasses[t.Name] = t.Class
		}
		if t.NeedsApproval {
			conv.NeedsApproval = append(conv.NeedsApproval, t.Name)
		}
		if t.Idempotent != nil && !*t.Idempotent {
			opt.NotIdempotentTools = append(opt.NotIdempotentTools, t.Name)
			conv.NotIdempotent = append(conv.NotIdempotent, t.Name)
		}
		if t.Kind == "human" {
			opt.HumanTools = append(opt.HumanTools, t.Name)
		}
	}
	if b := cc.Budget; b != nil {
		conv.Budget = &conversation.Budget{ContextWindow: b.ContextWindow, ReserveOutputTokens: b.ReserveOutputTokens,
			MaxSummaryTokens: b.MaxSummaryTokens, Counter: budget.Heuristic{PerMessageOverhead: b.PerMessage}}
	}
	if sp := c.Shared.ServicePrincipal; sp != nil {
		svc := loomtype.Identity{Tenant: sp.Tenant, Actor: sp.Actor, OnBehalfOf: sp.OnBehalfOf}
		conv.Shared.Service = &svc
	}
	conv.Shared.MaxParticipants, conv.Shared.MaxQueuedPerAsker = c.Shared.MaxParticipants, c.Shared.MaxQueuedPerAsker
	conv.Shared.Grants, conv.Shared.Narrowed = c.Shared.Grants, c.Shared.Narrowed
	return conv
}

// worldDeps connects the engine to the world the configuration names (the model, tools,
// summarizer, memory, clearance and error hook), each over hc, and returns the error hook.
func worldDeps(c sutconfig.SUTConfig, hc *http.Client, opt *Options) *hostio.OrderedReports {
	if c.Model.BaseURL != "" {
		stream := c.Model.Stream == nil || *c.Model.Stream
		opt.Deps.Provider = model.NewClient(model.ClientOptions{BaseURL: c.Model.BaseURL, APIKey: c.Model.APIKey,
			Model: c.Model.Name, Stream: stream, HTTPClient: hc})
	}
	if c.Tools.BaseURL != "" {
		to := time.Duration(c.Conversation.ToolTimeoutMs) * time.Millisecond
		opt.Deps.Tools = &hostio.Tools{BaseURL: c.Tools.BaseURL, Client: hc, Timeout: to}
	}
	if c.Summarizer.URL != "" {
		opt.Deps.Summarizer = &hostio.HTTPSummarizer{URL: c.Summarizer.URL, Client: hc}
	}
	if c.Memory.URL != "" {
		opt.Deps.Memory = &hostio.HTTPMemory{URL: c.Memory.URL, Client: hc}
	}
	if c.Clearance.URL != "" {
		cl := &hostio.Clearance{URL: c.Clearance.URL, Client: hc}
		opt.Deps.Cleared = func(ctx context.Context, viewer loomtype.Identity, classes []string) bool {
			return cl.Cleared(ctx, hostio.Viewer(viewer), classes)
		}
	}
	// Reports reach the hook in the order they were made (spec/world.md).
	hook := hostio.NewOrderedReports(&hostio.ErrorHook{URL: c.ErrorHook.URL, Client: hc})
	opt.Deps.OnError = hook.Add
	return hook
}

// gatewayOptions sets the HTTP surface, the session streams and the edge; errors the gateway
// hides behind an errorId go to hook.
func gatewayOptions(c sutconfig.SUTConfig, hook *hostio.OrderedReports, opt *Options) {
	gw := c.Gateway
	opt.Gateway = gateway.Config{
		Insecure: c.Identity.Insecure, AllowedOrigins: gw.AllowedOrigins, AllowedHosts: lower(gw.AllowedHosts),
		AllowCredentials: gw.AllowCredentials, MaxStreams: gw.MaxStreams, MaxStreamsPerPrincipal: gw.MaxStreamsPerPrincipal,
		MaxSubscribers: gw.MaxSubscribers,
		MaxBodyBytes:   int64(gw.MaxBodyBytes), StreamLifetime: ms(gw.StreamLifetimeMs), MaxPendingBytes: gw.MaxPendingBytes,
		PostsPerMinute: gw.PostsPerMinute, Reauth: ms(gw.ReauthMs), Poll: ms(gw.PollMs), RuntimeDoor: true,
		Discovery: gateway.Discovery{SpecVersion: SpecVersion, Profiles: profiles(c),
			Implementation: gateway.Implementation{Name: "loom-reference", Version: Version},
			Extensions:     []string{"chosen-id"}},
		OnError: func(id string, err error) {
			hook.Add(hostio.ErrorReport{ErrorID: id, Error: err.Error()})
		},
	}
	opt.Gateway.Heartbeat = ms(c.Stream.HeartbeatMs)
	opt.Stream = sessions.Config{Limits: stream.Limits{MaxFrames: c.Stream.MaxFrames, MaxBytes: c.Stream.MaxBytes},
		Retain: ms(c.Stream.RetainMs), ResumeWait: ms(c.Stream.ResumeWaitMs), TicketTTL: min(ms(c.Stream.TicketMs), sessions.DefaultTicketTTL),
		PrincipalTickets: c.Stream.PrincipalTickets, ResidentBytes: c.Stream.ResidentBytes, PrincipalResidentBytes: c.Stream.PrincipalResidentBytes}
	opt.Edge = gateway.Edge{RequestTimeout: ms(gw.RequestTimeoutMs), HeadersTimeout: ms(gw.HeadersTimeoutMs),
		MaxConnections: gw.MaxConnections}
}

// threadsConfig maps the configuration's threads into the options of reference/internal/threads; the
// service checks them when the engine opens.
func threadsConfig(t sutconfig.ThreadsConfig, hc *http.Client) *threads.Config {
	tc := &threads.Config{HTTPClient: &http.Client{Transport: hc.Transport, Timeout: 15 * time.Second}}
	for _, r := range t.Roles {
		role := threads.Role{Name: r.Name, Prompt: r.Prompt}
		for _, p := range r.Principals {
			role.Principals = append(role.Principals, loomtype.Identity{Tenant: p.Tenant, Actor: p.Actor, OnBehalfOf: p.OnBehalfOf})
		}
		tc.Roles = append(tc.Roles, role)
	}
	for _, m := range t.Members {
		tc.Members = append(tc.Members, loomtype.Identity{Tenant: m.Tenant, Actor: m.Actor, OnBehalfOf: m.OnBehalfOf})
	}
	for _, c := range t.Connections {
		tc.Connections = append(tc.Connections, threads.Connection{ID: c.ID, URL: c.URL, Send: c.Send, Accept: c.Accept,
			Owner: loomtype.Identity{Tenant: c.Owner.Tenant, Actor: c.Owner.Actor, OnBehalfOf: c.Owner.OnBehalfOf}, Queue: c.Queue,
			Budget: c.Budget, Rate: c.Rate})
	}
	return tc
}

// TokenCookie is the cookie a browser's EventSource, which cannot set headers, may carry the
// bearer token in.
const TokenCookie = "loom_token"

// BearerAuth authenticates "Authorization: Bearer <token>" (or the TokenCookie cookie) through
// id. The scheme is matched in any case ("bearer", "BEARER"), as RFC 9110 §11.1 says; the token is
// exact. A token anywhere else, in the URL for instance, is not a credential.
//
//	opt.Gateway.Authenticate = reference.BearerAuth(&reference.BearerIdentity{Static: principals})
func BearerAuth(id *BearerIdentity) Authenticator { return bearerAuth(id, nil) }

// bearerAuth is BearerAuth that also keeps, in grants (if set), the tools each principal it
// resolves is granted.
func bearerAuth(id *hostio.Identity, grants *grantTable) gateway.Authenticator {
	return func(r *http.Request) (loomtype.Identity, error) {
		h := r.Header.Get("Authorization")
		tok, ok := cutScheme(h, "Bearer")
		if h == "" {
			if c, err := r.Cookie(TokenCookie); err == nil {
				tok, ok = c.Value, true
			}
		}
		if !ok || tok == "" {
			return loomtype.Identity{}, gateway.ErrUnauthenticated
		}
		p, err := id.Resolve(r.Context(), strings.TrimSpace(tok))
		if err != nil {
			if err == hostio.ErrUnknownToken {
				return loomtype.Identity{}, gateway.ErrUnauthenticated
			}
			return loomtype.Identity{}, err
		}
		if grants != nil {
			grants.learn(p)
		}
		return identityOf(p), nil
	}
}

// cutScheme returns the credentials of an Authorization header value whose scheme is scheme, in
// any case, followed by at least one space.
func cutScheme(h, scheme string) (string, bool) {
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) || h[len(scheme)] != ' ' {
		return "", false
	}
	return strings.TrimLeft(h[len(scheme):], " "), true
}

func decodeKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(k) < 32 {
		return nil, fmt.Errorf("%w: signing keys are standard base64 of at least 32 bytes", loomtype.ErrConfig)
	}
	return k, nil
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}
