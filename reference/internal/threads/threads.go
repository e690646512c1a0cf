// Package threads is the box side of agent conversations between boxes (spec/peer.md, profile
// threads): the box's roles, the roots their runs work on (a person's conversation with a role,
// a task, an agent conversation), the agent conversations themselves, the connections to peer
// boxes, the outbox that delivers texts to them and the logic of the peer's door.
//
// Every record (agent conversation, person's conversation, task, task run, connection state) is
// kept in record tables of the kernel and changed in one kernel transaction per operation, so what a caller was
// told has happened has happened. Every turn (of an agent conversation, of a person's
// conversation, of a task run) is a durable kernel execution running the agent loop with the one
// tool peer.send: a crash resumes it by replay, and a send the loop had made is never queued
// twice, because its message id derives from the loop's idempotency key.
//
// A Service is safe for concurrent use once Prepare and Resume have been called.
//
//	svc, err := threads.New(threads.Config{Roles: roles, Connections: conns})
//	k, _ := kernel.Open(ctx, st, kernel.Options{Flows: svc.Flows(), Prepare: svc.Prepare})
//	if err := svc.Resume(ctx); err != nil { return err }
//	defer svc.Close()
package threads

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// DefaultQueue bounds the texts waiting to be sent on a connection whose configuration sets no
// queue; the same bound holds for the texts of the peer waiting for a turn.
const DefaultQueue = 64

// MaxText is the longest text, in bytes, on the wire.
const MaxText = 16384

// MaxQueuedTurns bounds the turns of one person's conversation waiting for the running one.
const MaxQueuedTurns = 16

// MaxTexts bounds the texts one agent conversation keeps; a text past it is refused as busy.
const MaxTexts = 4096

// DefaultBudget is the bytes of text one agent conversation stores, both ways, when its
// connection sets no budget (spec/peer.md, Configuration): 4 MiB.
const DefaultBudget = 4 << 20

// DefaultRate is the texts a peer may present on a connection per minute when the connection
// sets no rate.
const DefaultRate = 600

// Role is one role of the box. Principals are the identities the box issues to the role: a
// caller with exactly one of them (tenant, actor and onBehalfOf) is the role, whatever its actor
// is spelled; no other caller is.
type Role struct {
	Name       string
	Prompt     string
	Principals []loomtype.Identity
}

// Connection is one connection to a peer box (spec/peer.md, Configuration).
type Connection struct {
	ID     string
	URL    string
	Send   string
	Accept string
	Owner  loomtype.Identity
	Queue  int
	// Budget bounds the bytes of text one agent conversation of the connection stores, both
	// ways (0: DefaultBudget). Rate bounds the texts the peer presents on it per minute (0:
	// DefaultRate).
	Budget int64
	Rate   int
}

// Config configures a Service.
type Config struct {
	Roles       []Role
	Members     []loomtype.Identity
	Connections []Connection
	// Provider is the model every turn asks (nil: the built-in model); Model names it.
	Provider model.Provider
	Model    string
	// HTTPClient sends texts to peers (nil: a client with a 10 second timeout).
	HTTPClient *http.Client
	// MaxBackoff bounds the wait between two tries of a text (default 5 seconds).
	MaxBackoff time.Duration
	Logger     *slog.Logger
}

// Errors of the service. Every refusal of a caller who may not see a thing is ErrNotFound.
var (
	// ErrNotFound: no such thing, or not one the caller may read (the uniform 404).
	ErrNotFound = loomtype.ErrNotFound
	// ErrNoTopic: a role with no run has no topic to send in.
	ErrNoTopic = errors.New("threads: a role without a run has no topic")
	// ErrRevoked: the connection is revoked; it cannot be paused or unpaused.
	ErrRevoked = errors.New("threads: the connection is revoked")
	// ErrBusy: too many turns wait in the conversation.
	ErrBusy = errors.New("threads: too many turns waiting")
	// ErrConfig: the configuration is invalid.
	ErrConfig = loomtype.ErrConfig
)

// Rejection is a peer's final answer to a text, or this box's answer to one (spec/peer.md, The
// wire): Status is the HTTP status, Reason the body's reason and Detail its detail.
type Rejection struct {
	Status int
	Reason string
	Detail string
}

func (e *Rejection) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("threads: rejected %d %s (%s)", e.Status, e.Reason, e.Detail)
	}
	return fmt.Sprintf("threads: rejected %d %s", e.Status, e.Reason)
}

// token reports whether s is lo to hi bytes, each a lower-case letter or a digit, an upper-case
// letter if upper, and '-', or '_' if underscore.
func token(s string, lo, hi int, upper, underscore bool) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case upper && c >= 'A' && c <= 'Z', underscore && c == '_':
		default:
			return false
		}
	}
	return true
}

// validThread is a thread id: 16 to 64 of [A-Za-z0-9_-].
func validThread(s string) bool { return token(s, 16, 64, true, true) }

// validMessage is a peer message id: 1 to 64 of [A-Za-z0-9_-].
func validMessage(s string) bool { return token(s, 1, 64, true, true) }

// ValidName reports whether s may be a role name or a connection id.
//
//	threads.ValidName("field-lab") // true
func ValidName(s string) bool { return token(s, 1, 64, false, false) }

// Service is the threads side of one box. Safe for concurrent use.
type Service struct {
	cfg     Config
	roles   map[string]Role
	conns   map[string]*Connection
	byToken map[string]string
	members []loomtype.Identity
	hc      *http.Client

	k *kernel.Kernel

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu serialises every read-modify-write of the records.
	mu       sync.Mutex
	pumps    map[string]bool // agent conversations whose outbox is being delivered
	awaiting map[string]bool // turn executions a finisher waits for
	queued   map[string]int  // texts waiting to be sent, per connection
	waiting  map[string]int  // texts of the peer waiting for a turn, per connection
	closed   bool

	// rmu guards rates, the peer's texts each connection may still present now.
	rmu   sync.Mutex
	rates map[string]*bucket
}

// New checks cfg and returns the service; register its Flows on the kernel with Prepare as the
// kernel's Options.Prepare, then Resume. It reads and writes nothing.
//
// Errors: ErrConfig (wrapped) naming what is wrong.
//
//	svc, err := threads.New(threads.Config{Roles: []threads.Role{{Name: "planner"}}})
func New(cfg Config) (*Service, error) {
	s := &Service{cfg: cfg, roles: map[string]Role{}, conns: map[string]*Connection{}, byToken: map[string]string{},
		members: cfg.Members, pumps: map[string]bool{}, awaiting: map[string]bool{}, queued: map[string]int{}, waiting: map[string]int{}}
	for _, r := range cfg.Roles {
		if !ValidName(r.Name) {
			return nil, fmt.Errorf("%w: threads: role name %q", ErrConfig, r.Name)
		}
		if _, dup := s.roles[r.Name]; dup {
			return nil, fmt.Errorf("%w: threads: role %q twice", ErrConfig, r.Name)
		}
		s.roles[r.Name] = r
	}
	for i := range cfg.Connections {
		c := cfg.Connections[i]
		if !ValidName(c.ID) {
			return nil, fmt.Errorf("%w: threads: connection id %q", ErrConfig, c.ID)
		}
		if _, dup := s.conns[c.ID]; dup {
			return nil, fmt.Errorf("%w: threads: connection %q twice", ErrConfig, c.ID)
		}
		if c.Accept == "" || c.Send == "" || c.URL == "" {
			return nil, fmt.Errorf("%w: threads: connection %q needs url, send and accept", ErrConfig, c.ID)
		}
		if _, dup := s.byToken[c.Accept]; dup {
			return nil, fmt.Errorf("%w: threads: connection %q shares its accept token", ErrConfig, c.ID)
		}
		if c.Queue <= 0 {
			c.Queue = DefaultQueue
		}
		s.conns[c.ID] = &c
		s.byToken[c.Accept] = c.ID
	}
	if cfg.Provider == nil {
		s.cfg.Provider = model.Builtin()
	}
	s.hc = cfg.HTTPClient
	if s.hc == nil {
		s.hc = &http.Client{Timeout: 10 * time.Second}
	}
	if s.cfg.MaxBackoff <= 0 {
		s.cfg.MaxBackoff = 5 * time.Second
	}
	if s.cfg.Logger == nil {
		s.cfg.Logger = slog.Default()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Prepare gives the service its kernel and readies its records there, before the kernel recovers
// any turn: it brings records an earlier engine stored in the old layout into the tables, opens
// the tables, counts what the bounds count and stores the stand-ins. Give it to kernel.Open as
// Options.Prepare, once.
//
// Errors: kernel.ErrTableNewer (the records were written by a newer engine), store errors.
//
//	k, err := kernel.Open(ctx, st, kernel.Options{Flows: svc.Flows(), Prepare: svc.Prepare})
func (s *Service) Prepare(ctx context.Context, k *kernel.Kernel) error {
	s.k = k
	for _, t := range tables {
		if err := t.Open(ctx, k); err != nil {
			return err
		}
	}
	if err := s.migrate(ctx); err != nil {
		return err
	}
	if err := s.count(ctx); err != nil {
		return err
	}
	return s.writeStandIns(ctx)
}

// Flows returns the kernel flow of a turn.
//
//	k, err := kernel.Open(ctx, st, kernel.Options{Flows: svc.Flows(), Prepare: svc.Prepare})
func (s *Service) Flows() map[string]kernel.Flow { return map[string]kernel.Flow{FlowName: s.flow} }

// Roles names the box's roles, in configuration order.
//
//	for _, r := range svc.Roles() { fmt.Println(r) }
func (s *Service) Roles() []string {
	out := make([]string, 0, len(s.cfg.Roles))
	for _, r := range s.cfg.Roles {
		out = append(out, r.Name)
	}
	return out
}

// Close stops delivering and waiting for turns (what is left resumes on the next Resume);
// executions stop with the kernel, so close the service first. Safe to call twice.
//
//	svc.Close()
//	k.Close()
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// identityKey is a key of an identity that differs when any field differs. For an identity with
// no NUL in its fields it is the digest of the fields each ended by a NUL, as stores already hold
// it; with a NUL that list could run two identities together, so it is the digest of the
// identity's loomtype key ended by 0x01 instead, which no list ending in a NUL equals.
func identityKey(who loomtype.Identity) string {
	if !strings.ContainsRune(who.Tenant+who.Actor+who.OnBehalfOf, 0) {
		return digest(who.Tenant, who.Actor, who.OnBehalfOf)[:32]
	}
	sum := sha256.Sum256([]byte(who.Key() + "\x01"))
	return hex.EncodeToString(sum[:16])
}
