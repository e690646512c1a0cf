// Package gateway is the HTTP surface of the reference engine (spec/http.md): the conversation
// routes, the event stream (SSE), participants, discovery and the optional runtime door.
//
// The order of checks is fixed and fails closed: Host and Origin, then authentication (from
// connection facts only), then authorization (every refusal is the one 404), then limits (429),
// then the body. The gateway holds no ACL of its own; it maps the conversation layer's refusals.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/strictjson"
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
	streams    int
	perPrinc   map[loomtype.Identity]int
	buckets    map[loomtype.Identity]*bucket
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
	g := &Gateway{cfg: cfg, cv: cv, mux: http.NewServeMux(), log: cfg.Logger,
		perPrinc: map[loomtype.Identity]int{}, buckets: map[loomtype.Identity]*bucket{}, shutdownCh: make(chan struct{})}
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

// fail maps an error of the conversation layer to its response.
func (g *Gateway) fail(w http.ResponseWriter, err error) {
	var le *loomtype.LimitError
	switch {
	case errors.Is(err, loomtype.ErrNotFound):
		writeNotFound(w)
	case errors.Is(err, loomtype.ErrInvalidCursor):
		writeError(w, http.StatusBadRequest, "invalid cursor", "")
	case errors.Is(err, loomtype.ErrInvalidID):
		writeError(w, http.StatusBadRequest, "invalid id", "")
	case errors.Is(err, loomtype.ErrBadRequest):
		writeError(w, http.StatusBadRequest, "bad request", detail(err))
	case errors.Is(err, loomtype.ErrConflict), errors.Is(err, loomtype.ErrClosed):
		writeError(w, http.StatusConflict, "conflict", "")
	case errors.As(err, &le):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many requests", "")
	case errors.Is(err, conversation.ErrDelegation):
		writeError(w, http.StatusForbidden, "delegation refused", "")
	case errors.Is(err, loomtype.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="loom"`)
		writeError(w, http.StatusUnauthorized, "unauthenticated", "")
	case errors.Is(err, loomtype.ErrCorrupt):
		g.report(w, "storage damaged", err)
	default:
		g.internal(w, err)
	}
}

func detail(err error) string {
	_, d, ok := strings.Cut(err.Error(), "bad request: ")
	if !ok {
		return ""
	}
	return d
}

// internal answers a fixed 500 body with an errorId; the real error goes only to OnError. An
// error that is the request's own cancellation (its client went away) is no internal error: the
// request is abandoned (http.ErrAbortHandler: the connection is closed without an answer) and
// nothing is reported or logged.
func (g *Gateway) internal(w http.ResponseWriter, err error) { g.report(w, "internal", err) }

// report answers a 500 with the error code and an errorId; the real error goes only to OnError.
// A read or write that met damaged storage is "storage damaged": the system refuses rather than
// serving less or other data. A request whose client went away is abandoned, as by internal.
func (g *Gateway) report(w http.ResponseWriter, code string, err error) {
	if clientGone(w, err) {
		panic(http.ErrAbortHandler)
	}
	id := loomtype.NewErrorID()
	if g.cfg.OnError != nil {
		g.cfg.OnError(id, err)
	} else {
		g.log.Error("gateway: "+code, "errorId", id, "err", err)
	}
	writeJSON(w, http.StatusInternalServerError, map[string]string{"error": code, "errorId": id})
}

// clientGone says whether err comes from the request's own context being cancelled, as it is
// when the client goes away (or its request deadline cut the body short).
func clientGone(w http.ResponseWriter, err error) bool {
	nw, ok := w.(*notFoundWriter)
	if !ok || nw.ctx == nil || nw.ctx.Err() == nil {
		return false
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// limitPost applies the per-principal POST rate (a token bucket refilled over a minute).
func (g *Gateway) limitPost(w http.ResponseWriter, who loomtype.Identity) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	b := g.buckets[who]
	if b == nil {
		if len(g.buckets) > 10_000 {
			for k, v := range g.buckets {
				if v.full(now, g.cfg.PostsPerMinute) {
					delete(g.buckets, k)
				}
			}
		}
		b = &bucket{tokens: float64(g.cfg.PostsPerMinute), at: now}
		g.buckets[who] = b
	}
	if !b.take(now, g.cfg.PostsPerMinute) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many requests", "")
		return false
	}
	return true
}

type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) refill(now time.Time, perMinute int) {
	b.tokens = min(float64(perMinute), b.tokens+now.Sub(b.at).Minutes()*float64(perMinute))
	b.at = now
}

func (b *bucket) take(now time.Time, perMinute int) bool {
	b.refill(now, perMinute)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) full(now time.Time, perMinute int) bool {
	b.refill(now, perMinute)
	return b.tokens >= float64(perMinute)
}

// readBody enforces the JSON content type (a charset, if given, must be utf-8) and the size
// limit, then decodes with the one strict decoder of every body (strictjson.Decode): members
// named exactly, once each, required ones present, never null, valid UTF-8 only, nothing after
// the value. A refusal is a 400 naming the member ("body" for the body as a whole). An empty
// body (zero bytes) decodes as {} when allowEmpty; white space alone is a bad request.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) bool {
	if r.ContentLength > g.cfg.MaxBodyBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "payload too large", "")
		return false
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" && allowEmpty && r.ContentLength == 0 {
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if cs, ok := params["charset"]; err != nil || mt != "application/json" || ok && !strings.EqualFold(cs, "utf-8") {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported media type", "")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "payload too large", "")
			return false
		}
		writeError(w, http.StatusBadRequest, "bad request", "body")
		return false
	}
	if len(body) == 0 && allowEmpty { // no body at all; white space alone is no JSON
		return true
	}
	if err := strictjson.Decode(body, v); err != nil {
		f := "body"
		var se *strictjson.Error
		if errors.As(err, &se) && se.Field != "" {
			f = se.Field
		}
		writeError(w, http.StatusBadRequest, "bad request", f)
		return false
	}
	return true
}

type startBody struct {
	ID           *string             `json:"id,omitempty"`
	Mode         *string             `json:"mode,omitempty"`
	Participants []loomtype.Identity `json:"participants,omitempty"`
}

func (g *Gateway) start(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if !g.limitPost(w, who) {
		return
	}
	var b startBody
	if !g.readBody(w, r, &b, true) {
		return
	}
	// An empty id or mode is not an absent one: the contract gives both a non-empty form.
	if b.ID != nil && *b.ID == "" {
		writeError(w, http.StatusBadRequest, "invalid id", "")
		return
	}
	if b.Mode != nil && *b.Mode == "" {
		writeError(w, http.StatusBadRequest, "bad request", "mode")
		return
	}
	st, created, err := g.cv.Start(r.Context(), who, conversation.StartOptions{ID: deref(b.ID), Mode: deref(b.Mode), Participants: b.Participants})
	if err != nil {
		g.fail(w, err)
		return
	}
	code := http.StatusCreated
	if !created {
		code = http.StatusOK
	}
	w.Header().Set("Location", "/conversations/"+st.ID)
	writeJSON(w, code, st)
}

func (g *Gateway) status(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	st, err := g.cv.Status(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// admitPost runs the checks of a POST on a conversation in their fixed order: authorization (the
// one 404), then the rate limit, then the body. It answers the request itself when one fails.
func (g *Gateway) admitPost(w http.ResponseWriter, r *http.Request, who loomtype.Identity, body any, allowEmpty bool) (string, bool) {
	id := r.PathValue("id")
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return "", false
	}
	if !g.limitPost(w, who) {
		return "", false
	}
	if !g.readBody(w, r, body, allowEmpty) {
		return "", false
	}
	return id, true
}

type turnBody struct {
	Text      *string         `json:"text"`
	MessageID *string         `json:"messageId,omitempty"`
	EditOf    json.RawMessage `json:"editOf,omitempty"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// emptyMessageID answers 400 for a messageId that is present but empty (absent, the server
// makes one; empty, it is outside the contract's 1 to 128 characters).
func emptyMessageID(w http.ResponseWriter, id *string) bool {
	if id != nil && *id == "" {
		writeError(w, http.StatusBadRequest, "bad request", "messageId")
		return true
	}
	return false
}

func (g *Gateway) turns(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b turnBody
	id, ok := g.admitPost(w, r, who, &b, false)
	if !ok {
		return
	}
	if b.Text == nil {
		writeError(w, http.StatusBadRequest, "bad request", "text")
		return
	}
	if emptyMessageID(w, b.MessageID) {
		return
	}
	var editOf int64
	if len(b.EditOf) > 0 {
		n, err := strconv.ParseInt(string(b.EditOf), 10, 64)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "bad request", "editOf")
			return
		}
		editOf = n
	}
	res, err := g.cv.SendTurn(r.Context(), who, id, *b.Text, conversation.SendOptions{MessageID: deref(b.MessageID), EditOf: editOf})
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

// closeBody is the contract's close body: an empty object (the server makes the messageId).
type closeBody struct{}

func (g *Gateway) close(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b closeBody
	id, ok := g.admitPost(w, r, who, &b, true)
	if !ok {
		return
	}
	res, err := g.cv.Close(r.Context(), who, id, "")
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

func (g *Gateway) history(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	q := r.URL.Query()
	opt := conversation.HistoryOptions{Cursor: q.Get("cursor"), Direction: q.Get("direction")}
	if opt.Direction != "" && opt.Direction != conversation.Forward && opt.Direction != conversation.Backward {
		writeError(w, http.StatusBadRequest, "bad request", "direction")
		return
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, "bad request", "limit")
			return
		}
		opt.Limit = n
	}
	page, err := g.cv.History(r.Context(), who, id, opt)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (g *Gateway) participants(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	ps, err := g.cv.Participants(r.Context(), who, r.PathValue("id"))
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ps)
}

type participantsBody struct {
	Op       string            `json:"op"`
	Identity loomtype.Identity `json:"identity"`
}

func (g *Gateway) changeParticipants(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	var b participantsBody
	id, ok := g.admitPost(w, r, who, &b, false)
	if !ok {
		return
	}
	ps, err := g.cv.ChangeParticipants(r.Context(), who, id, b.Op, b.Identity)
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ps)
}

type rawStartBody struct {
	ID    string          `json:"id"`
	Flow  string          `json:"flow"`
	Input json.RawMessage `json:"input"`
}

func (g *Gateway) rawStart(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	if !g.limitPost(w, who) {
		return
	}
	var b rawStartBody
	if !g.readBody(w, r, &b, false) {
		return
	}
	if b.ID == "" || b.Flow == "" || len(b.Input) == 0 {
		writeError(w, http.StatusBadRequest, "bad request", "id, flow and input are required")
		return
	}
	if err := g.cv.StartRaw(r.Context(), who, b.ID, b.Flow, b.Input); err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": b.ID})
}

type rawSendBody struct {
	MessageID string          `json:"messageId"`
	Payload   json.RawMessage `json:"payload"`
}

func (g *Gateway) rawSend(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	if _, err := g.cv.AuthorizeRuntime(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	if !g.limitPost(w, who) {
		return
	}
	var b rawSendBody
	if !g.readBody(w, r, &b, false) {
		return
	}
	if len(b.Payload) == 0 || b.Payload[0] != '{' { // the contract's payload is an object
		writeError(w, http.StatusBadRequest, "bad request", "payload")
		return
	}
	ok, err := g.cv.SendRaw(r.Context(), who, id, b.MessageID, b.Payload)
	if err != nil {
		g.fail(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"delivered": ok})
}

func (g *Gateway) rawLog(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	q := r.URL.Query()
	var after loomtype.Cursor
	id := r.PathValue("id")
	if _, err := g.cv.AuthorizeRuntime(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	if c := q.Get("cursor"); c != "" {
		var err error
		if after, err = loomtype.ParseCursor(c); err != nil {
			g.fail(w, err)
			return
		}
	}
	limit := 100
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "bad request", "limit")
			return
		}
		limit = n
	}
	evs, next, done, err := g.cv.RawLog(r.Context(), who, id, after, limit)
	if err != nil {
		g.fail(w, err)
		return
	}
	if evs == nil {
		evs = []conversation.RawEvent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs, "nextCursor": next.String(), "done": done})
}

// notFoundWriter turns the mux's own 404 and 405 pages into the uniform JSON bodies.
type notFoundWriter struct {
	http.ResponseWriter
	// ctx is the request's context: when it is done, the client went away.
	ctx   context.Context
	wrote bool
	skip  bool
}

func (n *notFoundWriter) WriteHeader(code int) {
	if !n.wrote && (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) &&
		n.Header().Get("Content-Type") == "text/plain; charset=utf-8" {
		n.wrote, n.skip = true, true
		n.Header().Del("Allow")
		writeNotFound(n.ResponseWriter)
		return
	}
	n.wrote = true
	n.ResponseWriter.WriteHeader(code)
}

func (n *notFoundWriter) Write(b []byte) (int, error) {
	if n.skip {
		return len(b), nil
	}
	if !n.wrote {
		n.wrote = true
	}
	return n.ResponseWriter.Write(b)
}

func (n *notFoundWriter) Unwrap() http.ResponseWriter { return n.ResponseWriter }

// Flush lets the stream handler flush through the wrapper.
func (n *notFoundWriter) Flush() {
	if f, ok := n.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

var notFoundBody = []byte(`{"error":"not found"}`)

// writeNotFound writes the one 404 every refusal shares, byte for byte.
func writeNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(notFoundBody)))
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(notFoundBody)
}

func writeError(w http.ResponseWriter, status int, code, detail string) {
	body := map[string]string{"error": code}
	if detail != "" {
		body["detail"] = detail
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
