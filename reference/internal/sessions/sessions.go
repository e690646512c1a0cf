// Package sessions serves the session stream (spec/stream.md): for each conversation a frame log
// made by the pure adapter of reference/internal/stream from the conversation's durable records and its
// live text, kept durably through the kernel (records.go: an auxiliary stream of the
// conversation's execution, and record tables), and read by subscribers as a replay after a
// cursor and then live, with nothing lost or repeated at the seam.
//
// The frame log is a projection of the conversation, never a second source of truth: a session
// is projected by one pump at a time, which reads the conversation's records after the position
// it has reached and its live deltas, and writes each batch of frames together with that position
// in one kernel transaction before any subscriber sees them (spec/stream.md, What a cursor
// promises across a crash). After a crash the projection goes on from the position that
// committed with the last frames, so a cursor a reader was given is never given again to another
// frame. A session whose log is empty when it is first opened is seeded
// from the conversation's stored history, oldest first, before any live frame.
//
// A resident session follows its conversation (conversation.Follower): the records of each
// commit reach the pump from the conversation's tail in memory while its position lies within
// it, from the log otherwise, and from the log on every Config.Poll, so that a commit whose
// report went missing is still projected.
//
// Opening is authorized before anything else is made: a caller the conversation refuses gets
// loomtype.ErrNotFound and no log, ticket or pump exists for it. An open returns a one-use
// ticket bound to the caller and the device it names, valid for Config.TicketTTL.
//
// Memory is bounded and reported (Service.Memory): each resident session keeps its frame log
// within Config.Limits, and each subscriber's queue within Config.SubQueue frames and
// Config.SubQueueBytes bytes; a reader that lets its queue pass either is cut off and resumes
// from its cursor (spec/http.md: a reader that falls far behind is disconnected).
//
// A Service is safe for concurrent use.
//
//	svc := sessions.New(k, cv, sessions.Config{})
//	op, err := svc.Open(ctx, alice, "c1", 0, "")
//	g, err := svc.Redeem(op.Ticket, alice, "")
//	sub, replay, reset, err := svc.Subscribe(ctx, g.Session, g.From)
package sessions

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Defaults of Config.
const (
	DefaultTicketTTL    = 15 * time.Second
	DefaultMaxTickets   = 4096
	DefaultMaxSubs      = 64
	DefaultSubQueue     = 4096
	DefaultIdle         = 10 * time.Second
	DefaultPoll         = time.Second
	DefaultMaxPending   = 1 << 20
	defaultReadBatch    = 256
	frameEventKind      = "frame"
	maxDeviceChars      = 128
	ticketBytes         = 24
	maxSessionsResident = 4096
)

// DefaultSubQueueBytes is Config.SubQueueBytes when it names none.
const DefaultSubQueueBytes = 4 << 20

// Config configures a Service. Zero values take the defaults.
type Config struct {
	// Limits bound each session's frame log (stream.DefaultLimits).
	Limits stream.Limits
	// Elsewhere, if set, makes a branch whose conversation this service's kernel does not run
	// (kernel.Owns: it falls in another partition): it starts the conversation and sends its
	// first turn where that conversation runs. Nil: every branch is made here.
	Elsewhere BranchElsewhere
	// TicketTTL is how long a ticket may wait for its upgrade (15 s).
	TicketTTL time.Duration
	// MaxTickets bounds the tickets waiting at once; an open beyond it is a *loomtype.LimitError.
	MaxTickets int
	// PrincipalTickets bounds the tickets one caller has waiting at once (made, not presented,
	// not expired); an open beyond it is a *QuotaError (QuotaTickets) and other callers are not
	// affected (DefaultPrincipalTickets, 64).
	PrincipalTickets int
	// ResidentBytes bounds the frame logs held in memory at once, each counted at the most it
	// may hold (Limits.MaxBytes): a session beyond it is not loaded (*loomtype.LimitError)
	// (DefaultResidentBytes, 2 GiB; at most 4096 sessions whatever it says).
	ResidentBytes int64
	// PrincipalResidentBytes is one caller's share of ResidentBytes: the sessions an open or a
	// reader of who makes resident are counted against who, at least one is allowed, and one
	// more is a *QuotaError (QuotaResident) (DefaultPrincipalResidentBytes, 64 MiB).
	PrincipalResidentBytes int64
	// MaxSubscribers bounds the subscribers of one session (64).
	MaxSubscribers int
	// SubQueue bounds the frames waiting for one subscriber; past it the subscriber is cut off
	// (Sub.Done) and its reader resumes from its cursor (4096).
	SubQueue int
	// SubQueueBytes bounds the bytes of the frames waiting for one subscriber (each frame as the
	// store keeps it); past it the subscriber is cut off as past SubQueue (DefaultSubQueueBytes,
	// 4 MiB: the frames a log holds by default, so that a slow reader holds on to no more than
	// one log's worth of frames the log itself has dropped).
	SubQueueBytes int
	// Idle is how long a session's pump runs with nobody reading and no ticket waiting (10 s).
	Idle time.Duration
	// Poll is how often a pump reads the conversation's log without a wake-up (1 s).
	Poll time.Duration
	// Retain is how long assistant text deltas and terminal output are shown; an older one is
	// served empty and marked expired, keeping its cursor (stream.DefaultRetain, 24 hours).
	Retain time.Duration
	// ResumeWait is how long a turn the stream shows asked and unanswered when the service
	// starts (one an earlier process left open, which the engine recovers) may take to end; past
	// it the turn is given up: status {state: failed, note} is logged, the turn is stopped, and
	// nothing more of it is shown (DefaultResumeWait, 60 s).
	ResumeWait time.Duration
	// Quotas counts each caller's tickets waiting against PrincipalTickets and the sessions it
	// holds resident against its share (PrincipalResidentBytes), on every engine that shares it
	// (nil: this service's memory alone).
	Quotas quota.Counter
	// Shared, if set, is a kernel on the store's global namespace (quota.Namespace), which every
	// partition's engine sees: the branches' idempotency keys are kept there, so that a caller's
	// key is refused as reused whatever partitions its sessions fall in. Nil: they are kept with
	// the service's own records (an engine that runs every execution of its store).
	Shared *kernel.Kernel
	// Now is the clock (time.Now).
	Now func() time.Time
	// Logger receives the errors a pump meets (slog.Default()).
	Logger *slog.Logger
}

// Errors of the service.
var (
	// ErrTicket is matched by every *TicketError.
	ErrTicket = errors.New("sessions: ticket refused")
	// ErrTooManySubscribers: the session has Config.MaxSubscribers subscribers already.
	ErrTooManySubscribers = errors.New("sessions: too many subscribers")
	// ErrBadDevice: a device name that is empty-but-present, too long or not printable ASCII.
	ErrBadDevice = errors.New("sessions: bad device name")
	// ErrBadFrom: a negative cursor.
	ErrBadFrom = errors.New("sessions: bad cursor")
)

// TicketReason says why a ticket was refused.
type TicketReason string

// The reasons a ticket is refused.
const (
	TicketUnknown TicketReason = "unknown" // never issued, or forgotten
	TicketUsed    TicketReason = "used"    // presented before
	TicketExpired TicketReason = "expired" // presented after its time
	TicketCaller  TicketReason = "caller"  // presented by another caller
	TicketDevice  TicketReason = "device"  // presented from another device
)

// TicketError is a refused ticket; it matches ErrTicket.
type TicketError struct{ Reason TicketReason }

func (e *TicketError) Error() string { return "sessions: ticket refused: " + string(e.Reason) }

// Is makes a *TicketError match ErrTicket.
func (e *TicketError) Is(target error) bool { return target == ErrTicket }

// Opened is what Open returns.
type Opened struct {
	Ticket  string
	Expires time.Time
	Session string
	From    int64
	Head    int64
	Floor   int64
}

// Grant is what a redeemed ticket grants: who reads which session from which cursor.
type Grant struct {
	Who     loomtype.Identity
	Session string
	From    int64
	Device  string
}

type ticket struct {
	Grant
	expires time.Time
	used    bool
}

// Service serves the session streams of one engine.
type Service struct {
	k   *kernel.Kernel
	cv  *conversation.Conversations
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	tickets  map[string]*ticket
	sessions map[string]*session
	loading  map[string]chan struct{} // the sessions being loaded, closed when each is in
	held     map[string]bool          // the sessions this process has held (bounded)
	charge   map[*session]quota.Slot  // the slot in its caller's share each resident session holds (share.go)
	owners   ownerBook                // the tenant of each session's owner, for names
	closed   bool
	quit     chan struct{} // closed by Close
	started  time.Time     // when New made the service: the resume wait counts from it
	wg       sync.WaitGroup

	// ticketsIdle, if not nil, is closed once no ticket waits (TicketsIdle); under mu.
	ticketsIdle chan struct{}

	// The syncs of reservations made apart from the frames' commits (reserve.go): syncs counts
	// those running, syncClosed refuses new ones once Close began (both under syncMu), and
	// noSyncApart is set once the store answered that it cannot sync apart from a commit.
	syncMu      sync.Mutex
	syncClosed  bool
	syncs       sync.WaitGroup
	noSyncApart atomic.Bool
}

// New returns the service over the kernel k (which keeps the frame logs and the service's
// records) and the conversations cv.
//
//	svc := sessions.New(k, cv, sessions.Config{TicketTTL: 15 * time.Second})
func New(k *kernel.Kernel, cv *conversation.Conversations, cfg Config) *Service {
	if cfg.TicketTTL <= 0 {
		cfg.TicketTTL = DefaultTicketTTL
	}
	if cfg.MaxTickets <= 0 {
		cfg.MaxTickets = DefaultMaxTickets
	}
	if cfg.PrincipalTickets <= 0 {
		cfg.PrincipalTickets = DefaultPrincipalTickets
	}
	if cfg.ResidentBytes <= 0 {
		cfg.ResidentBytes = DefaultResidentBytes
	}
	if cfg.PrincipalResidentBytes <= 0 {
		cfg.PrincipalResidentBytes = DefaultPrincipalResidentBytes
	}
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = DefaultMaxSubs
	}
	if cfg.SubQueue <= 0 {
		cfg.SubQueue = DefaultSubQueue
	}
	if cfg.SubQueueBytes <= 0 {
		cfg.SubQueueBytes = DefaultSubQueueBytes
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Quotas == nil {
		cfg.Quotas = &quota.Memory{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ResumeWait <= 0 {
		cfg.ResumeWait = DefaultResumeWait
	}
	if cfg.Retain <= 0 {
		cfg.Retain = stream.DefaultRetain
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Limits.MaxFrames <= 0 {
		cfg.Limits.MaxFrames = stream.DefaultLimits.MaxFrames
	}
	if cfg.Limits.MaxBytes <= 0 {
		cfg.Limits.MaxBytes = stream.DefaultLimits.MaxBytes
	}
	return &Service{k: k, cv: cv, cfg: cfg, log: cfg.Logger, tickets: map[string]*ticket{}, sessions: map[string]*session{},
		loading: map[string]chan struct{}{}, held: map[string]bool{}, charge: map[*session]quota.Slot{}, quit: make(chan struct{}), started: time.Now()}
}

// Close stops every pump and cuts off every subscriber.
func (s *Service) Close() {
	s.mu.Lock()
	if !s.closed {
		close(s.quit)
	}
	s.closed = true
	for _, ss := range s.sessions {
		ss.stop()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.syncMu.Lock()
	s.syncClosed = true
	s.syncMu.Unlock()
	s.syncs.Wait()
}

// ValidDevice reports whether d is an acceptable device name: at most 128 printable ASCII
// characters (empty means none named).
func ValidDevice(d string) bool {
	if len(d) > maxDeviceChars {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < 0x21 || d[i] > 0x7e {
			return false
		}
	}
	return true
}

// Open authorizes who to read session id, then (and only then) makes sure its log holds every
// record the conversation has (the seed, on a first open), and returns a one-use ticket for a
// reader starting after cursor from, with the log's head and floor.
//
// Errors: loomtype.ErrNotFound (unknown or not readable by who: nothing is made),
// ErrBadFrom, ErrBadDevice, *loomtype.LimitError (too many tickets waiting), *QuotaError (who
// has Config.PrincipalTickets tickets waiting, or holds its share of the resident logs), store
// errors.
func (s *Service) Open(ctx context.Context, who loomtype.Identity, id string, from int64, device string) (Opened, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return Opened{}, err
	}
	if from < 0 {
		return Opened{}, ErrBadFrom
	}
	if !ValidDevice(device) {
		return Opened{}, ErrBadDevice
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return Opened{}, err
	}
	defer s.release(ss)
	if err := s.chargeResident(ctx, who, ss); err != nil {
		return Opened{}, err
	}
	s.countPeople(ctx, ss, who)
	if err := ss.catchUp(ctx, nil); err != nil {
		return Opened{}, err
	}
	head, floor := ss.bounds()
	return s.mint(ctx, Grant{Who: who, Session: id, From: from, Device: device}, head, floor)
}

// mint makes a ticket for g within the service's table of tickets (this process's, in memory)
// and g.Who's tickets waiting (Config.Quotas: every engine's). The ticket takes its place in the
// table before the caller's bound is asked, and leaves it when that refuses it.
func (s *Service) mint(ctx context.Context, g Grant, head, floor int64) (Opened, error) {
	now := s.cfg.Now()
	// A ticket is drawn in the session's partition, so a node routes its presentation by the
	// ticket alone (kernel.Mint).
	tk := s.k.Mint(func() string {
		var b [ticketBytes]byte
		_, _ = rand.Read(b[:])
		return base64.RawURLEncoding.EncodeToString(b[:])
	})
	exp := now.Add(s.cfg.TicketTTL)
	s.mu.Lock()
	if len(s.tickets) >= s.cfg.MaxTickets {
		for k, t := range s.tickets {
			if t.used || !now.Before(t.expires) {
				delete(s.tickets, k)
			}
		}
		if len(s.tickets) >= s.cfg.MaxTickets {
			s.mu.Unlock()
			return Opened{}, &loomtype.LimitError{Limit: "tickets", Max: int64(s.cfg.MaxTickets)}
		}
	}
	s.tickets[tk] = &ticket{Grant: g, expires: exp}
	s.mu.Unlock()
	if err := s.cfg.Quotas.Admit(ctx, ticketSlot(tk, g.Who, exp), s.cfg.PrincipalTickets, now.UnixMilli()); err != nil {
		s.mu.Lock()
		delete(s.tickets, tk)
		s.ticketsChangedLocked()
		s.mu.Unlock()
		if errors.Is(err, loomtype.ErrLimit) {
			return Opened{}, &QuotaError{Reason: QuotaTickets, Max: int64(s.cfg.PrincipalTickets)}
		}
		return Opened{}, err
	}
	return Opened{Ticket: tk, Expires: exp, Session: g.Session, From: g.From, Head: head, Floor: floor}, nil
}

// Redeem spends ticket tk for caller who on device: a ticket is spent by its first
// presentation, whatever its outcome, so a ticket seen by someone else is worthless to them.
//
// Errors: *TicketError (matching ErrTicket) with its reason.
func (s *Service) Redeem(tk string, who loomtype.Identity, device string) (Grant, error) {
	g, owner, spent, err := s.spend(tk, who, device)
	if !spent {
		return g, err
	}
	// Presented now: it no longer counts against the caller it was made for, whatever the outcome.
	if rerr := s.cfg.Quotas.Release(context.Background(), ticketSlot(tk, owner, time.Time{})); rerr != nil {
		s.log.Warn("a spent ticket's slot was not given back; it expires by itself", "error", rerr)
	}
	return g, err
}

// spend marks ticket tk presented and judges the presentation (Redeem). spent is true when this
// presentation was its first, owner the caller it was made for.
func (s *Service) spend(tk string, who loomtype.Identity, device string) (g Grant, owner loomtype.Identity, spent bool, err error) {
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.ticketsChangedLocked() // a ticket spent no longer waits
	t, ok := s.tickets[tk]
	switch {
	case !ok:
		return Grant{}, owner, false, &TicketError{Reason: TicketUnknown}
	case t.used:
		return Grant{}, owner, false, &TicketError{Reason: TicketUsed}
	}
	t.used = true
	switch {
	case !now.Before(t.expires):
		err = &TicketError{Reason: TicketExpired}
	case !t.Who.Equal(who):
		err = &TicketError{Reason: TicketCaller}
	case t.Device != "" && t.Device != device:
		err = &TicketError{Reason: TicketDevice}
	default:
		g = t.Grant
	}
	return g, t.Who, true, err
}

// Bounds returns the head and floor of session id's log as the service holds it now, after
// bringing it up to date; who must be allowed to read it.
//
// Errors: loomtype.ErrNotFound, store errors.
func (s *Service) Bounds(ctx context.Context, who loomtype.Identity, id string) (head, floor int64, err error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return 0, 0, err
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	defer s.release(ss)
	if err := ss.catchUp(ctx, nil); err != nil {
		return 0, 0, err
	}
	head, floor = ss.bounds()
	return head, floor, nil
}

// Subscribe starts a reader of session id after cursor from: replay is what the log holds after
// from (merged, stream.Merge), and sub receives every frame logged after it, live, one by one.
// reset is true (and replay and sub are for the floor) when a frame after from is no longer
// held: the caller sends a reset frame, and the frames from the floor follow. The caller must
// have authorized the reader (Open and Redeem) and must call sub.Close.
//
// Errors: ErrTooManySubscribers, ErrBadFrom, store errors.
func (s *Service) Subscribe(ctx context.Context, id string, from int64) (sub *Sub, replay []stream.Frame, reset bool, head, floor int64, err error) {
	if from < 0 {
		return nil, nil, false, 0, 0, ErrBadFrom
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return nil, nil, false, 0, 0, err
	}
	if err := ss.catchUp(ctx, nil); err != nil {
		s.release(ss)
		return nil, nil, false, 0, 0, err
	}
	sub, replay, reset, head, floor, err = ss.subscribe(from)
	if err != nil {
		s.release(ss)
		return nil, nil, false, 0, 0, err
	}
	sub.release = func() { s.releaseReader(ss) }
	return sub, replay, reset, head, floor, nil
}

// Append logs specs in session id (a status the service is told of, such as a stop), durably,
// before it returns; who must be allowed to read the session.
//
// Errors: loomtype.ErrNotFound, store errors.
func (s *Service) Append(ctx context.Context, who loomtype.Identity, id string, specs ...stream.Spec) ([]stream.Frame, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return nil, err
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer s.release(ss)
	if err := ss.catchUp(ctx, nil); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.commit(ctx, specs, nil, ss.pos)
}

// diskFrame is a frame as the store keeps it: the frame and who may see it.
type diskFrame struct {
	F stream.Frame `json:"f"`
	G guard        `json:"g,omitzero"`
}

// guard says who may see a frame in a shared conversation: the turn's asker, and the classes a
// reader other than the asker must be cleared for. Live says the frame is a turn's live text,
// which only its asker sees.
type guard struct {
	Asker    loomtype.Identity `json:"asker,omitzero"`
	AskerKey string            `json:"askerKey,omitempty"` // the live turn's asker, as the live channel names it
	Classes  string            `json:"classes,omitempty"`  // the record's classes, joined by commas
	Live     bool              `json:"live,omitempty"`
	Cursor   string            `json:"cursor,omitempty"` // the conversation record the frame shows
	// Ver marks a frame the assistant put into the chat (1; 0: not an assistant's): it goes
	// through its turn's reply handle (commit gives it rid and ver) and reaches only viewers the
	// room's mayReceive lets have it (Render).
	Ver int `json:"ver,omitempty"`
}

type posRecord struct {
	Next      string `json:"next"`
	LastReply int64  `json:"lastReply,omitempty"`
	LastAsked int64  `json:"lastAsked,omitempty"`
	// LastAsker is the identity key of LastAsked's asker (absent in positions written before it
	// was kept: a stop of a turn without checkpoints then answers as for a non-asker).
	LastAsker string `json:"lastAsker,omitempty"`
	// Room is who is in the chat by room version, and Handles the reply handles opened (turn to
	// room version), as of the last frame; a position written before they existed has neither,
	// and the room is then counted again from the frames restored.
	Room    *storedRoom     `json:"room,omitempty"`
	Handles map[int64]int64 `json:"handles,omitempty"`
	// Owner is the tenant of the session's owner once learnt (names are drawn with it), so
	// that a session loaded again draws them alike before any caller touches it.
	Owner *string `json:"owner,omitempty"`
	// Reserved is the newest cursor the session may hand out before a synced commit raises it;
	// Epoch the store's loss epoch when the position was written; Floor the oldest cursor the log
	// serves, once raised over the cursors a crash of the machine took (reserve.go). A position
	// written before them has none: its frames were all synced (Reserved is the head), and the
	// floor is the log's own.
	Reserved int64 `json:"reserved,omitempty"`
	// Ahead is a reservation past Reserved written without waiting for the disk, whose sync
	// apart from the commit may not have been made: it is counted on only after a possible loss,
	// as the newest cursor a reader may hold (reserve.go).
	Ahead int64 `json:"ahead,omitempty"`
	Epoch int64 `json:"epoch,omitempty"`
	Floor int64 `json:"floor,omitempty"`
}

// hubSub is what a pump reads of the live channel.
type hubSub = live.Sub

// countPeople refreshes how many persons session ss's chat has, as who reads its participants;
// a terminal, diff or files block in a chat of more than one says it is visible to all.
func (s *Service) countPeople(ctx context.Context, ss *session, who loomtype.Identity) {
	pl, err := s.cv.Participants(ctx, who, ss.id)
	if err != nil {
		return
	}
	n := len(pl.Participants)
	seen := false
	for _, p := range pl.Participants {
		seen = seen || p.Equal(pl.Owner)
	}
	if !seen {
		n++
	}
	ss.mu.Lock()
	ss.people = n
	ss.mu.Unlock()
}

// maxHeld bounds the sessions the service remembers having held; past it the memory starts over
// (a session then held again may show a restart status that was not needed, never miss one).
const maxHeld = 1 << 16

func (s *Service) heldBefore(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[id]
}

func (s *Service) markHeld(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.held) >= maxHeld {
		s.held = map[string]bool{}
	}
	s.held[id] = true
}
