// Package conversation is the client of durable conversations: it decides who may do what
// (owner-only by default), signs what it sends, and reads history back with bounded range reads.
// A conversation is one durable execution whose body (package dialogue) takes signed messages from
// its inbox, runs each user turn as an agent loop (package turn), and records every transcript
// entry exactly once as a decision in the vocabulary of package record. Its configuration types
// are record's, under the names callers have always used.
package conversation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/budget"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/dialogue"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/participants"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// Modes (loomtype.Mode).
const (
	ModeOwner  = record.ModeOwner
	ModeShared = record.ModeShared
)

// Defaults of Config (package record holds them).
const (
	DefaultRotateEveryTurns  = record.DefaultRotateEveryTurns
	DefaultMaxTurnChars      = record.DefaultMaxTurnChars
	DefaultMaxScan           = record.DefaultMaxScan
	DefaultMaxCarryBytes     = record.DefaultMaxCarryBytes
	DefaultMaxWindowTurns    = record.DefaultMaxWindowTurns
	DefaultMaxEnvelopeAgeMs  = record.DefaultMaxEnvelopeAgeMs
	DefaultMaxInvalidRecords = record.DefaultMaxInvalidRecords
	DefaultMaxIterations     = record.DefaultMaxIterations
	RecentKeys               = record.RecentKeys
	ReplayCapacity           = record.ReplayCapacity
)

// Placeholders sent to the model for a turn with no reply text, so that roles alternate.
const (
	PlaceholderInterrupted = record.PlaceholderInterrupted
	PlaceholderFailed      = record.PlaceholderFailed
	SummaryAck             = record.SummaryAck
)

// Fences of the rolling summary (spec/prompt.md).
const (
	SummaryOpen  = dialogue.SummaryOpen
	SummaryClose = dialogue.SummaryClose
)

// The kernel flows of a conversation and of a shared-mode turn.
const (
	FlowName     = record.FlowName
	TurnFlowName = record.TurnFlowName
)

// Config configures conversations (record.Config). Zero values mean the documented defaults.
type Config = record.Config

// Budget turns on token-aware context fitting (record.Budget).
type Budget = record.Budget

// Deps are the conversation's connections to the world (record.Deps).
type Deps = record.Deps

// ErrInvalidCarry is matched (errors.Is) by every refusal of a generation's input
// (dialogue.ErrInvalidCarry).
var ErrInvalidCarry = dialogue.ErrInvalidCarry

// ErrApproval: a configuration asked for tool approvals, which a dialogue with barge-in cannot
// hold.
var ErrApproval = errors.New("conversation: tools that need approval are not supported")

// Dialogue holds the conversation flows: register Flows on the kernel, then make the client on
// that kernel with Client. A flow reaches the kernel only through its own kernel.Context, so an
// execution the kernel recovers while it opens needs nothing set up after it.
type Dialogue struct {
	*core
	flows *dialogue.Dialogue
}

// Conversations is the client: who may do what, signing and sending, reading back. It is made on
// an open kernel (Dialogue.Client) and never changes kernel. Safe for concurrent use.
type Conversations struct {
	*core
	k *kernel.Kernel
}

// core is what the flows and the client share: the configuration, the world and the caches.
type core struct {
	cfg  Config
	deps Deps
	hub  *live.Hub

	mu    sync.Mutex
	metas map[string]meta
	// absent holds ids meta found no conversation at (see meta).
	absent map[string]struct{}

	// book holds the participant sets of shared conversations; the flows read the same one.
	book *participants.Book
}

type meta struct {
	owner loomtype.Identity
	mode  loomtype.Mode
	ok    bool // the stamped owner agrees with the recorded principal
}

// ValidID reports whether id may name a conversation: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$ (spec/http.md).
func ValidID(id string) bool { return loomtype.ValidName(id, 128) }

// New validates cfg and returns the Dialogue: register its Flows on the kernel, open the kernel
// (which recovers every open conversation at once), then make the client with Client.
//
// Errors: loomtype.ErrConfig (wrapped) for a missing or short key; ErrApproval.
//
//	dl, err := conversation.New(cfg, deps, live.NewHub(64))
//	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
//	cv := dl.Client(k)
func New(cfg Config, deps Deps, hub *live.Hub) (*Dialogue, error) {
	if len(cfg.Keys) == 0 || len(cfg.Keys[0]) < 32 {
		return nil, fmt.Errorf("%w: a signing key of at least 32 bytes is required", loomtype.ErrConfig)
	}
	if len(cfg.NeedsApproval) > 0 {
		return nil, ErrApproval
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.RotateEveryTurns, DefaultRotateEveryTurns)
	def(&cfg.MaxTurnChars, DefaultMaxTurnChars)
	def(&cfg.MaxScan, DefaultMaxScan)
	def(&cfg.MaxCarryBytes, DefaultMaxCarryBytes)
	def(&cfg.MaxWindowTurns, DefaultMaxWindowTurns)
	def(&cfg.MaxInvalidRecords, DefaultMaxInvalidRecords)
	def(&cfg.MaxIterations, DefaultMaxIterations)
	def(&cfg.ReplaySetSize, ReplayCapacity)
	if cfg.MaxEnvelopeAgeMs <= 0 {
		cfg.MaxEnvelopeAgeMs = DefaultMaxEnvelopeAgeMs
	}
	if cfg.Budget != nil {
		b := *cfg.Budget
		if b.Counter == nil {
			b.Counter = budget.Heuristic{}
		}
		if b.MaxSummaryTokens <= 0 {
			b.MaxSummaryTokens = b.ContextWindow / 4
		}
		cfg.Budget = &b
	}
	if deps.Provider == nil {
		deps.Provider = model.Builtin()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if hub == nil {
		hub = live.NewHub(0)
	}
	if err := cfg.Shared.Validate(); err != nil {
		return nil, err
	}
	book := new(participants.Book)
	co := &core{cfg: cfg, deps: deps, hub: hub, metas: map[string]meta{}, absent: map[string]struct{}{}, book: book}
	return &Dialogue{core: co, flows: dialogue.New(cfg, deps, hub, book)}, nil
}

// Flows returns the kernel flows conversations need. They hold no kernel: each reaches the one
// running it through its Context.
func (d *Dialogue) Flows() map[string]kernel.Flow {
	return d.flows.Flows()
}

// Client returns the conversation client on k, the kernel the flows are registered on.
//
//	cv := dl.Client(k)
//	st, created, err := cv.Start(ctx, alice, conversation.StartOptions{})
func (d *Dialogue) Client(k *kernel.Kernel) *Conversations { return &Conversations{core: d.core, k: k} }

// Hub is the live channel of these conversations.
func (cv *core) Hub() *live.Hub { return cv.hub }

// Config returns the effective configuration (defaults applied).
func (cv *core) Config() Config { return cv.cfg }

// Live makes sure the execution of conversation id runs live: after a restart one that was open
// is replayed now if the background has not reached it yet, so that what only a running flow
// holds in memory (the stopper of its running turn, its live output) is there. The caller has
// authorized the principal for id.
//
// Errors: ctx's, kernel.ErrStopped.
//
//	if err := cv.Live(ctx, id); err != nil { return err }
func (cv *Conversations) Live(ctx context.Context, id string) error { return cv.k.Recover(ctx, id) }

// kernel is the client's kernel; a flow has none here (it uses its Context's).
func (cv *Conversations) kernel() *kernel.Kernel { return cv.k }

// StartOptions choose the conversation's id and mode.
type StartOptions struct {
	ID           string
	Mode         loomtype.Mode
	Participants []loomtype.Identity
	// Seed are exchanges an owner-mode conversation starts with, recorded before its first
	// message (a branch); a start that finds the conversation started already records none.
	Seed []record.SeedTurn
}

// Start starts a conversation owned by principal. A chosen id (opt.ID) names a conversation
// within principal's own ids: the conversation's id is ChosenID(principal, opt.ID), so the same
// identity choosing it again gets the same conversation (created == false), and anyone else
// choosing it starts a conversation of their own, exactly as with an id nobody took: no answer
// tells them whether someone else chose it too.
//
// Errors: loomtype.ErrInvalidID, loomtype.ErrUnauthenticated (a principal without an actor),
// loomtype.ErrConflict (the id is held by an execution that is not principal's conversation),
// loomtype.ErrBadRequest (a bad mode or participant list).
//
//	st, created, err := cv.Start(ctx, alice, conversation.StartOptions{ID: "plan-1"})
func (cv *Conversations) Start(ctx context.Context, principal loomtype.Identity, opt StartOptions) (loomtype.Status, bool, error) {
	if !principal.Valid() {
		return loomtype.Status{}, false, loomtype.ErrUnauthenticated
	}
	if opt.ID == "" {
		opt.ID = cv.kernel().Mint(newID) // an id of this engine's partition
	} else if !ValidID(opt.ID) {
		return loomtype.Status{}, false, loomtype.ErrInvalidID
	} else {
		opt.ID = ChosenID(principal, opt.ID)
	}
	if opt.Mode == "" {
		opt.Mode = ModeOwner
	}
	runAs := principal
	switch opt.Mode {
	case ModeOwner:
		if len(opt.Participants) > 0 {
			return loomtype.Status{}, false, loomtype.BadRequest("participants", "participants need shared mode")
		}
	case ModeShared:
		svc, err := cv.sharedStartCheck(principal, opt.Participants)
		if err != nil {
			return loomtype.Status{}, false, err
		}
		runAs = svc
	default:
		return loomtype.Status{}, false, loomtype.BadRequest("mode", "unknown mode")
	}
	if len(opt.Seed) > 0 && opt.Mode != ModeOwner {
		return loomtype.Status{}, false, loomtype.BadRequest("seed", "a seed needs owner mode")
	}
	in, _ := json.Marshal(record.StartInput{V: 1, Owner: principal, Mode: opt.Mode, CountEmpty: true,
		InvalidPerAsker: opt.Mode == ModeShared, Seed: opt.Seed})
	k := cv.kernel()
	_, err := k.Start(ctx, kernel.StartRequest{ID: opt.ID, Flow: FlowName, Input: in, Principal: runAs})
	created := true
	if errors.Is(err, loomtype.ErrAlreadyStarted) {
		created = false
		m, merr := cv.meta(ctx, opt.ID)
		if merr != nil || !m.ok || !m.owner.Equal(principal) {
			return loomtype.Status{}, false, loomtype.ErrConflict
		}
		if m.mode == ModeShared {
			// A start that died between recording the conversation and its participants is
			// finished by its retry; otherwise nobody, not even the owner, could ever reach it.
			if err := cv.finishParticipants(ctx, opt.ID, principal, opt.Participants); err != nil {
				return loomtype.Status{}, false, err
			}
		}
	} else if err != nil {
		if errors.Is(err, kernel.ErrBadID) {
			return loomtype.Status{}, false, loomtype.ErrInvalidID
		}
		return loomtype.Status{}, false, err
	}
	if created && opt.Mode == ModeShared {
		if err := cv.initParticipants(ctx, opt.ID, principal, opt.Participants); err != nil {
			return loomtype.Status{}, false, err
		}
	}
	st, err := cv.Status(ctx, principal, opt.ID)
	return st, created, err
}

// chosenHead is how much of a chosen id its conversation id keeps, so that the id with its
// owner's suffix is still a valid id (at most 128 characters).
const chosenHead = 128 - 1 - 24

// ChosenID is the id of the conversation owner starts under the chosen id chosen (a ValidID):
// the chosen id (its first 103 characters) and 24 hex digits of a SHA-256 over the owner's whole
// identity and the chosen id. Each identity has its own: two identities that differ in any field
// never share one, and another token of the same identity gets the same.
//
//	id := conversation.ChosenID(alice, "plan-1") // "plan-1.<24 hex digits>"
func ChosenID(owner loomtype.Identity, chosen string) string {
	b, _ := json.Marshal([]string{"loom chosen id v1", owner.Tenant, owner.Actor, owner.OnBehalfOf, chosen})
	sum := sha256.Sum256(b)
	head := chosen
	if len(head) > chosenHead {
		head = head[:chosenHead]
	}
	return head + "." + hex.EncodeToString(sum[:12])
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "c_" + hex.EncodeToString(b[:])
}

// meta reads who owns a conversation. Whatever is known of id, it reads the execution record
// from the store once, and the first look at an id (nothing remembered of it yet) also reads the
// head of its log, whether or not the conversation exists: a conversation that exists and one
// that does not cost the same store work, so the time of the uniform 404 says nothing about which
// it was. What was learned is remembered (owner and mode never change; an absent id only until
// its record appears), within maxRemembered ids each.
func (cv *Conversations) meta(ctx context.Context, id string) (meta, error) {
	k := cv.kernel()
	info, err := k.StoredInfo(ctx, id)
	present := err == nil
	if err != nil && !errors.Is(err, loomtype.ErrNotFound) {
		return meta{}, err
	}
	cv.mu.Lock()
	m, known := cv.metas[id]
	_, looked := cv.absent[id]
	cv.mu.Unlock()
	if present && known {
		return m, nil
	}
	if !present && looked {
		return meta{}, loomtype.ErrNotFound
	}
	// The first look: the record and the log's first event, for an id that exists or not.
	input, ierr := k.Input(ctx, id)
	if ierr != nil && !errors.Is(ierr, loomtype.ErrNotFound) && !errors.Is(ierr, kernel.ErrUnreadable) {
		return meta{}, ierr
	}
	if !present {
		cv.mu.Lock()
		remember(cv.absent, id, struct{}{})
		cv.mu.Unlock()
		return meta{}, loomtype.ErrNotFound
	}
	// An execution that is no conversation is remembered as one nobody may touch (ok false), so
	// it costs what a conversation costs from now on too.
	var started record.StartInput
	m = meta{}
	if info.Flow == FlowName && ierr == nil && json.Unmarshal(input, &started) == nil {
		m = meta{owner: started.Owner, mode: started.Mode}
	}
	switch m.mode {
	case ModeOwner:
		m.ok = m.owner.Valid() && info.Principal.Equal(m.owner)
	case ModeShared:
		m.ok = m.owner.Valid() && cv.cfg.Shared.Service != nil && info.Principal.Equal(*cv.cfg.Shared.Service)
	}
	cv.mu.Lock()
	delete(cv.absent, id)
	remember(cv.metas, id, m)
	cv.mu.Unlock()
	return m, nil
}

// maxRemembered bounds each of the maps meta remembers ids in.
const maxRemembered = 100_000

// remember puts v under id in m, first forgetting one other id when m is full (cv.mu held).
func remember[V any](m map[string]V, id string, v V) {
	if _, ok := m[id]; !ok && len(m) >= maxRemembered {
		for k := range m {
			delete(m, k)
			break
		}
	}
	m[id] = v
}

// Authorize decides whether principal may touch conversation id at all. Every refusal is
// loomtype.ErrNotFound, the same as for a conversation that does not exist.
func (cv *Conversations) Authorize(ctx context.Context, principal loomtype.Identity, id string) error {
	_, err := cv.authorize(ctx, principal, id)
	return err
}

// AuthorizeShared is Authorize that also tells whether the conversation is shared.
func (cv *Conversations) AuthorizeShared(ctx context.Context, principal loomtype.Identity, id string) (shared bool, err error) {
	m, err := cv.authorize(ctx, principal, id)
	return err == nil && m.mode == ModeShared, err
}

// NotFoundFloor is the least time a refusal of authorization takes, counted from when it began:
// whichever path refused (no such conversation, not the caller's, not a participant), the
// uniform 404 comes no sooner than this. It is a sleep, costing the server no work: where the
// system's timers are coarser than the floor, the sleep ends later than asked, counted from
// when it began, and then it only adds jitter; what makes the paths cost the same is that both do
// the same store work (see meta and AuthorizeRuntime).
const NotFoundFloor = 200 * time.Microsecond

func (cv *Conversations) authorize(ctx context.Context, principal loomtype.Identity, id string) (meta, error) {
	start := time.Now()
	m, err := cv.authorizeNow(ctx, principal, id)
	if errors.Is(err, loomtype.ErrNotFound) {
		floor(ctx, start)
	}
	return m, err
}

// floor waits until NotFoundFloor has passed since start, or ctx ends.
func floor(ctx context.Context, start time.Time) {
	if d := time.Until(start.Add(NotFoundFloor)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

func (cv *Conversations) authorizeNow(ctx context.Context, principal loomtype.Identity, id string) (meta, error) {
	if !principal.Valid() || !ValidID(id) {
		return meta{}, loomtype.ErrNotFound
	}
	m, err := cv.meta(ctx, id)
	if err != nil {
		if errors.Is(err, loomtype.ErrNotFound) {
			return meta{}, loomtype.ErrNotFound
		}
		return meta{}, err
	}
	if !m.ok {
		return meta{}, loomtype.ErrNotFound
	}
	if m.mode == ModeShared {
		if err := cv.authorizeParticipant(ctx, m, principal, id); err != nil {
			return meta{}, err
		}
		return m, nil
	}
	if !m.owner.Equal(principal) {
		return meta{}, loomtype.ErrNotFound
	}
	return m, nil
}

// SendOptions are the optional parts of a turn.
type SendOptions struct {
	// MessageID is the idempotency key; empty means a fresh one.
	MessageID string
	// EditOf is the ord of an earlier user record this turn edits (0: none).
	EditOf int64
}

// SendResult says what happened to a sent message.
type SendResult struct {
	MessageID string `json:"messageId"`
	Delivered bool   `json:"delivered"`
}

// validMessageID reports whether s is a message id: 1 to 128 printable ASCII characters
// (U+0020 to U+007E).
func validMessageID(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// SendTurn signs text as principal's turn and delivers it. A retry with the same MessageID by
// the same principal is delivered once (Delivered false the second time).
//
// Errors: loomtype.ErrNotFound, loomtype.ErrBadRequest (a bad MessageID), loomtype.ErrClosed.
//
//	res, err := cv.SendTurn(ctx, alice, "c1", "hello", conversation.SendOptions{MessageID: "m1"})
func (cv *Conversations) SendTurn(ctx context.Context, principal loomtype.Identity, id, text string, opt SendOptions) (SendResult, error) {
	return cv.send(ctx, principal, id, envelope.KindUser, text, opt)
}

// Close asks the conversation to close: it records the close and ends.
func (cv *Conversations) Close(ctx context.Context, principal loomtype.Identity, id string, messageID string) (SendResult, error) {
	m, err := cv.authorize(ctx, principal, id)
	if err != nil {
		return SendResult{}, err
	}
	if m.mode == ModeShared && !m.owner.Equal(principal) {
		return SendResult{}, loomtype.ErrNotFound
	}
	return cv.send(ctx, principal, id, envelope.KindClose, "", SendOptions{MessageID: messageID})
}

func (cv *Conversations) send(ctx context.Context, principal loomtype.Identity, id, kind, text string, opt SendOptions) (SendResult, error) {
	m, err := cv.authorize(ctx, principal, id)
	if err != nil {
		return SendResult{}, err
	}
	if opt.MessageID == "" {
		opt.MessageID = "m_" + newID()[2:]
	} else if !validMessageID(opt.MessageID) {
		return SendResult{}, loomtype.BadRequest("messageId", "")
	}
	if opt.EditOf < 0 {
		return SendResult{}, loomtype.BadRequest("editOf", "")
	}
	key := kernel.SenderKey(principal, opt.MessageID)
	env := envelope.Envelope{ConversationID: id, Kind: kind, ID: key, IAT: cv.deps.Now().UnixMilli(),
		Text: text, Asker: envelope.Identity(principal)}
	if opt.EditOf > 0 {
		e := opt.EditOf
		env.EditOf = &e
	}
	env = envelope.Sign(cv.cfg.Keys[0], env)
	payload, err := json.Marshal(record.WireEnvelope(env))
	if err != nil {
		return SendResult{}, err
	}
	sender, msgID := principal, opt.MessageID
	if m.mode == ModeShared {
		if err := cv.checkSharedSend(ctx, id, principal); err != nil {
			return SendResult{}, err
		}
		// The sender the kernel records is the host; the asker is inside the signed envelope.
		sender, msgID = *cv.cfg.Shared.Service, key
	}
	// Each asker's keys count against a window of their own (spec/http.md, messageId).
	ok, err := cv.kernel().SendInShare(ctx, id, sender, principal, msgID, payload)
	if err != nil {
		return SendResult{}, err
	}
	return SendResult{MessageID: opt.MessageID, Delivered: ok}, nil
}
