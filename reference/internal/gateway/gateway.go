// Package gateway is the HTTP surface of the reference engine (spec/http.md): the conversation
// routes, the agent runs (profile agent), the event stream (SSE), participants, discovery and
// the optional runtime door.
//
// The order of checks is fixed and fails closed: Host and Origin, then authentication (from
// connection facts only), then authorization (every refusal is the one 404), then limits (429),
// then the body. The gateway holds no ACL of its own; it maps the conversation layer's refusals.
package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/threads"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Defaults of Config.
const (
	DefaultMaxStreams             = 256
	DefaultMaxStreamsPerPrincipal = 8
	DefaultMaxBodyBytes           = 64 << 10
	DefaultStreamLifetime         = 15 * time.Minute
	DefaultMaxPendingBytes        = 1 << 20
	DefaultPostsPerMinute         = 120
	DefaultReauth                 = 30 * time.Second
	DefaultPoll                   = time.Second
)

// Authenticator derives the caller from connection facts (the request's headers and TLS state),
// never from the body. It returns ErrUnauthenticated for a missing or unknown credential.
type Authenticator func(r *http.Request) (loomtype.Identity, error)

// ErrUnauthenticated is what an Authenticator returns for an unknown caller.
var ErrUnauthenticated = loomtype.ErrUnauthenticated

// ErrInsecure: a gateway without an Authenticator must be explicitly insecure.
var ErrInsecure = errors.New("gateway: no authenticator; set Insecure to run without authentication")

// Discovery is what GET /.well-known/loom answers.
type Discovery struct {
	SpecVersion    string         `json:"specVersion"`
	Profiles       []string       `json:"profiles"`
	Implementation Implementation `json:"implementation"`
	RuntimeDoor    bool           `json:"runtimeDoor"`
	// Extensions lists the optional behaviours of the HTTP surface the system offers
	// (spec/http.md, Discovery): "chosen-id" for caller-chosen conversation ids.
	Extensions []string `json:"extensions,omitempty"`
}

// Implementation names the system.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Config configures a Gateway. Zero values mean the documented defaults.
type Config struct {
	Authenticate Authenticator
	// Insecure allows running without authentication; every caller is then "anonymous" and only
	// loopback Host names are answered.
	Insecure               bool
	AllowedOrigins         []string
	AllowedHosts           []string
	AllowCredentials       bool
	MaxStreams             int
	MaxStreamsPerPrincipal int
	// Quotas counts each principal's open streams against MaxStreamsPerPrincipal and its POSTs
	// against PostsPerMinute, on every engine that shares it (nil: this gateway's memory alone).
	Quotas quota.Counter
	// MaxSubscribers bounds the live subscribers of one conversation (the engine sizes the hub
	// with it; default 64).
	MaxSubscribers  int
	MaxBodyBytes    int64
	StreamLifetime  time.Duration
	MaxPendingBytes int
	PostsPerMinute  int
	Reauth          time.Duration
	// Poll is how often an idle stream reads the log even without a notification, so a missed
	// wake-up costs at most this long, never a message.
	Poll        time.Duration
	Discovery   Discovery
	RuntimeDoor bool
	// Runs serves the agent runs (spec/http.md, Runs); nil: no runs surface (every run route
	// is the uniform 404).
	Runs *run.Runs
	// Sessions serves the session streams (spec/stream.md, profile stream); nil: none (their
	// routes are the uniform 404).
	Sessions *sessions.Service
	// Threads serves the agent conversations between boxes (spec/peer.md, profile threads);
	// nil: none (their routes are the uniform 404).
	Threads *threads.Service
	// Heartbeat is how often an idle session stream sends a heartbeat frame (DefaultHeartbeat).
	Heartbeat time.Duration
	// OnError receives the real error behind every 500, with the errorId the caller saw.
	OnError func(errorID string, err error)
	Logger  *slog.Logger
}

// Gateway serves the HTTP surface. Safe for concurrent use.
type Gateway struct {
	cfg Config
	cv  *conversation.Conversations
	mux *http.ServeMux
	log *slog.Logger

	mu         sync.Mutex
	streams    int // the streams this gateway serves now (Memory); the bounds are Config.Quotas'
	shutdownCh chan struct{}
	closeOnce  sync.Once
}

// New returns a Gateway over cv.
//
// Errors: ErrInsecure when cfg has no Authenticator and is not Insecure.
//
//	gw, err := gateway.New(cv, gateway.Config{Authenticate: bearer})
//	http.ListenAndServe("127.0.0.1:8080", gw)
func New(cv *conversation.Conversations, cfg Config) (*Gateway, error) {
	if cfg.Authenticate == nil && !cfg.Insecure {
		return nil, ErrInsecure
	}
	setInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setInt(&cfg.MaxStreams, DefaultMaxStreams)
	setInt(&cfg.MaxStreamsPerPrincipal, DefaultMaxStreamsPerPrincipal)
	setInt(&cfg.MaxPendingBytes, DefaultMaxPendingBytes)
	setInt(&cfg.PostsPerMinute, DefaultPostsPerMinute)
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.StreamLifetime <= 0 {
		cfg.StreamLifetime = DefaultStreamLifetime
	}
	if cfg.Reauth <= 0 {
		cfg.Reauth = DefaultReauth
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Quotas == nil {
		cfg.Quotas = &quota.Memory{}
	}
	g := &Gateway{cfg: cfg, cv: cv, mux: http.NewServeMux(), log: cfg.Logger,
		shutdownCh: make(chan struct{})}
	g.routes()
	return g, nil
}

// Shutdown ends every open stream with a reconnect event.
func (g *Gateway) Shutdown() { g.closeOnce.Do(func() { close(g.shutdownCh) }) }

func (g *Gateway) routes() {
	g.mux.HandleFunc("GET /.well-known/loom", g.discovery)
	g.mux.HandleFunc("POST /conversations", g.authed(g.start))
	g.mux.HandleFunc("GET /conversations/{id}", g.authed(g.status))
	g.mux.HandleFunc("POST /conversations/{id}/turns", g.authed(g.turns))
	g.mux.HandleFunc("POST /conversations/{id}/close", g.authed(g.close))
	g.mux.HandleFunc("GET /conversations/{id}/history", g.authed(g.history))
	g.mux.HandleFunc("GET /conversations/{id}/events", g.authed(g.events))
	g.mux.HandleFunc("GET /conversations/{id}/participants", g.authed(g.participants))
	g.mux.HandleFunc("POST /conversations/{id}/participants", g.authed(g.changeParticipants))
	if g.cfg.Sessions != nil {
		g.mux.HandleFunc("POST /sessions/{id}/stream/open", g.authed(g.openStream))
		g.mux.HandleFunc("GET /sessions/{id}/stream", g.authed(g.sessionStream))
		g.mux.HandleFunc("POST /sessions/{id}/messages", g.authed(g.steer))
		g.mux.HandleFunc("POST /sessions/{id}/stop", g.authed(g.stopTurn))
		g.mux.HandleFunc("POST /sessions/{id}/terminal", g.authed(g.termCommand))
		g.mux.HandleFunc("POST /sessions/{id}/reactions", g.authed(g.react(false)))
		g.mux.HandleFunc("POST /sessions/{id}/pins", g.authed(g.react(true)))
		g.mux.HandleFunc("POST /sessions/{id}/presence", g.authed(g.presence))
		g.mux.HandleFunc("POST /sessions/{id}/read", g.authed(g.markRead))
		g.mux.HandleFunc("POST /sessions/{id}/messages/{message}/cancel", g.authed(g.unqueue))
		g.mux.HandleFunc("POST /sessions/{id}/messages/{message}/edit", g.authed(g.editMessage(false)))
		g.mux.HandleFunc("POST /sessions/{id}/messages/{message}/retry", g.authed(g.editMessage(true)))
		g.mux.HandleFunc("POST /sessions/{id}/messages/{message}/branch", g.authed(g.branchMessage))
	}
	if g.cfg.Runs != nil {
		g.mux.HandleFunc("POST /runs", g.authed(g.startRun))
		g.mux.HandleFunc("GET /runs/{id}", g.authed(g.getRun))
		g.mux.HandleFunc("POST /runs/{id}/abort", g.authed(g.steerRun(abortOp)))
		g.mux.HandleFunc("POST /runs/{id}/cancel", g.authed(g.steerRun(cancelOp)))
		g.mux.HandleFunc("POST /runs/{id}/approvals/{gate}", g.authed(g.answerRun(false)))
		g.mux.HandleFunc("POST /runs/{id}/human/{call}", g.authed(g.answerRun(true)))
	}
	if g.cfg.Threads != nil {
		g.threadRoutes()
	}
	if g.cfg.RuntimeDoor {
		g.mux.HandleFunc("POST /runtime/executions", g.authed(g.rawStart))
		g.mux.HandleFunc("POST /runtime/executions/{id}/messages", g.authed(g.rawSend))
		g.mux.HandleFunc("GET /runtime/executions/{id}/log", g.authed(g.rawLog))
	}
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if !g.hostAllowed(r) {
		writeError(w, http.StatusForbidden, "forbidden host", "")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		if !slices.Contains(g.cfg.AllowedOrigins, origin) {
			writeError(w, http.StatusForbidden, "forbidden origin", "")
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if g.cfg.AllowCredentials {
			h.Set("Access-Control-Allow-Credentials", "true")
		}
		h.Set("Access-Control-Expose-Headers", "Retry-After")
	}
	if r.Method == http.MethodOptions {
		if r.Header.Get("Origin") == "" {
			writeError(w, http.StatusForbidden, "forbidden origin", "")
			return
		}
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			g.internal(w, fmt.Errorf("panic: %v", v))
		}
	}()
	g.mux.ServeHTTP(&notFoundWriter{ResponseWriter: w, ctx: r.Context()}, r)
}

// hostAllowed guards against DNS rebinding: an insecure server answers loopback names only, and
// AllowedHosts restricts an authenticated one.
func (g *Gateway) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(strings.ToLower(host), "[]")
	if len(g.cfg.AllowedHosts) > 0 {
		return slices.Contains(g.cfg.AllowedHosts, host) || slices.Contains(g.cfg.AllowedHosts, strings.ToLower(r.Host))
	}
	if g.cfg.Authenticate == nil {
		if host == "localhost" {
			return true
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	return true
}

// authed authenticates the request before the handler runs.
func (g *Gateway) authed(h func(w http.ResponseWriter, r *http.Request, who loomtype.Identity)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		who, err := g.authenticate(r)
		if err != nil {
			if errors.Is(err, ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="loom"`)
				writeError(w, http.StatusUnauthorized, "unauthenticated", "")
				return
			}
			g.internal(w, err)
			return
		}
		h(w, r, who)
	}
}

func (g *Gateway) authenticate(r *http.Request) (loomtype.Identity, error) {
	if g.cfg.Authenticate == nil {
		return loomtype.Identity{Actor: "anonymous"}, nil
	}
	id, err := g.cfg.Authenticate(r)
	if err != nil {
		return loomtype.Identity{}, err
	}
	if !id.Valid() {
		return loomtype.Identity{}, ErrUnauthenticated
	}
	return id, nil
}

func (g *Gateway) discovery(w http.ResponseWriter, r *http.Request) {
	d := g.cfg.Discovery
	d.RuntimeDoor = g.cfg.RuntimeDoor
	if d.Profiles == nil {
		d.Profiles = []string{}
	}
	writeJSON(w, http.StatusOK, d)
}
