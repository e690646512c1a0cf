// Package live is the conversation layer's in-memory channel: the text deltas of running turns,
// fanned out to the subscribers of each conversation's event stream, and the tail of each followed
// conversation's log, the records its latest commits appended (tail.go), which streams read
// instead of the store while their cursor lies within it. Nothing in it is journaled or replayed,
// and nothing in it is a source of truth: a subscriber that falls behind is dropped, and a stream
// that reconnects catches up from the history and the partial reply the hub keeps. Everything it
// holds is bounded, and Hub.Memory reports it.
package live

import (
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// MaxPartialChars bounds the in-progress reply the hub keeps per conversation for catch-up.
const MaxPartialChars = 64 * 1024

// EventKind says what a live event is. Live events never leave the process, so a kind has no
// spelling of its own; String names it for logs and test output.
type EventKind uint8

// Kinds of live events.
const (
	// KindDelta is a piece of a reply's text.
	KindDelta EventKind = iota + 1
	// KindReset says a turn is being produced again (after a restart): drop its text so far.
	KindReset
	// KindDone ends a turn's live phase.
	KindDone
	// KindTool is a tool call of the live turn starting or ending (Event.Tool).
	KindTool
)

// String names the kind: delta, reset, done or tool.
func (k EventKind) String() string {
	switch k {
	case KindDelta:
		return "delta"
	case KindReset:
		return "reset"
	case KindDone:
		return "done"
	case KindTool:
		return "tool"
	}
	return "unknown"
}

// Tool is a tool call of a live turn: its start (Done false) or its end, with the tool's
// output or error.
type Tool struct {
	Call, Name string
	Done, OK   bool
	Output     []byte
	Error      string
}

// Event is a transient event of a running turn: text deltas, a reset when a turn is produced
// again after a restart, and the end of the turn's live phase. Live events are never journaled
// and never replayed.
type Event struct {
	Kind EventKind
	Turn int64
	Text string
	// Asker is who asked the turn; in shared mode only the asker receives its deltas.
	Asker string
	// Tool is the call of a KindTool event.
	Tool *Tool
}

// Hub is the in-process live channel: each delta is attributed to the conversation and turn
// whose model call produced it, so one model serving many conversations never crosses their
// streams. Live output is taken only from the execution that runs the conversation's current
// turn: the conversation's own execution (a turn run inline), or the turn execution its dialogue
// named with Expect. An execution that merely names a conversation and a turn (its input is
// anyone's to write) publishes nothing, and cannot end or reset the turn that is live. Safe for
// concurrent use.
//
//	sub, err := hub.Subscribe("c1", 1<<20)
//	defer hub.Unsubscribe("c1", sub)
type Hub struct {
	mu      sync.Mutex
	convs   map[string]*hubConv
	pending map[string]pendingBegin
	// pendingBytes is what every pending Begin holds (maxPendingBytes at most).
	pendingBytes int
	maxSubs      int
	stops        map[string]stopper

	// tails are the tails of the conversations someone follows (tail.go), limits their bounds
	// and tailBytes what they all hold.
	tails     map[string]*tail
	limits    TailLimits
	tailBytes atomic.Int64
}

type hubConv struct {
	turn    int64
	rerun   bool
	asker   string
	partial []byte
	chars   int
	subs    map[*Sub]struct{}
	// held counts the subscribers each principal holds (by identity key), for AttachShare.
	held map[string]int
	// pub is the execution whose live output is the live turn's: the conversation's own
	// execution (an inline turn), or the turn execution the dialogue expects (see Expect).
	pub string
	// want is the turn execution the dialogue runs its current turn in, once it said so.
	want struct {
		pub   string
		turn  int64
		asker string
	}
}

// pendingBegin is a Begin from an execution the dialogue had not yet named as its turn's (a
// recovered turn execution can go live before its recovered dialogue has verified it).
type pendingBegin struct {
	conv  string
	turn  int64
	reset bool
	// held is the live output the execution sent before it was named, in order: it is shown
	// once the dialogue names the execution (Expect), and never if it does not.
	held  []Event
	bytes int
}

// maxPendingBegins bounds the Begins kept for executions nobody has named yet, and
// maxPendingBytes the live output they hold all together; output past it is not kept (the
// turn's durable reply still carries all of its text).
const (
	maxPendingBegins = 1024
	maxPendingBytes  = 1 << 20
)

// NewHub returns a hub that admits at most maxSubs live subscribers per conversation (default 64).
func NewHub(maxSubs int) *Hub {
	if maxSubs <= 0 {
		maxSubs = 64
	}
	return &Hub{convs: map[string]*hubConv{}, pending: map[string]pendingBegin{}, maxSubs: maxSubs}
}

// MaxSubscribers is the bound on one conversation's live subscribers.
func (h *Hub) MaxSubscribers() int { return h.maxSubs }

func (h *Hub) conv(id string) *hubConv {
	c := h.convs[id]
	if c == nil {
		c = &hubConv{subs: map[*Sub]struct{}{}}
		h.convs[id] = c
	}
	return c
}

func (h *Hub) gc(id string, c *hubConv) {
	if len(c.subs) == 0 && c.turn == 0 && c.want.pub == "" {
		delete(h.convs, id)
	}
}

// Subscribe adds a live subscriber whose queue holds at most maxPending bytes; past that it
// overflows (see Sub). It fails with a *loomtype.LimitError when the conversation already has
// the maximum number of subscribers.
func (h *Hub) Subscribe(id string, maxPending int) (*Sub, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conv(id)
	if len(c.subs) >= h.maxSubs {
		h.gc(id, c)
		return nil, errTooManySubscribers(h.maxSubs)
	}
	s := newSub(maxPending)
	c.subs[s] = struct{}{}
	return s, nil
}

// Reply is the reply in progress of a conversation, as a subscriber attaching finds it: its
// turn (0 when none runs), its text so far, who asked it, and whether it is being produced again
// after a restart (a client that attaches then must drop what an earlier run streamed to it).
type Reply struct {
	Turn  int64
	Text  string
	Asker string
	Rerun bool
}

// Attached is a subscriber and the reply in progress when it attached.
type Attached struct {
	Sub *Sub
	Reply
}

// Attach subscribes and reads the reply in progress in one step, so nothing streamed around the
// moment of attaching is either lost or seen twice: the partial holds everything before the
// subscription and the queue everything after.
func (h *Hub) Attach(id string, maxPending int) (Attached, error) {
	return h.AttachShare(id, "", 0, maxPending)
}

// AttachShare is Attach for the principal whose identity key is who, who may hold at most share
// of the conversation's subscribers (no share of their own when share <= 0 or who is ""), so one
// principal cannot take every slot of a conversation others read too. Past the share it fails
// with a *loomtype.LimitError, as past the conversation's bound.
//
//	at, err := hub.AttachShare("c1", bob.Key(), 2, 1<<20)
//	defer hub.Unsubscribe("c1", at.Sub)
func (h *Hub) AttachShare(id, who string, share, maxPending int) (Attached, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conv(id)
	if len(c.subs) >= h.maxSubs {
		h.gc(id, c)
		return Attached{}, errTooManySubscribers(h.maxSubs)
	}
	if who != "" && share > 0 && c.held[who] >= share {
		h.gc(id, c)
		return Attached{}, &loomtype.LimitError{Limit: "subscribers per principal in a conversation", Max: int64(share)}
	}
	s := newSub(maxPending)
	c.subs[s] = struct{}{}
	if who != "" {
		if c.held == nil {
			c.held = map[string]int{}
		}
		c.held[who]++
		s.who = who
	}
	at := Attached{Sub: s}
	if c.turn > 0 {
		at.Reply = Reply{Turn: c.turn, Text: string(c.partial), Asker: c.asker, Rerun: c.rerun}
	}
	return at, nil
}

// Unsubscribe removes a subscriber.
func (h *Hub) Unsubscribe(id string, s *Sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c := h.convs[id]; c != nil {
		if _, ok := c.subs[s]; ok && s.who != "" {
			if c.held[s.who]--; c.held[s.who] <= 0 {
				delete(c.held, s.who)
			}
		}
		delete(c.subs, s)
		h.gc(id, c)
	}
}

// Partial returns the reply in progress (turn 0 when none), who asked it, and whether the turn is
// being produced again after a restart (a client that attaches then must drop what an earlier
// run streamed to it: it gets a reset before the partial).
func (h *Hub) Partial(id string) (turn int64, text string, asker string, rerun bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.convs[id]
	if c == nil || c.turn == 0 {
		return 0, "", "", false
	}
	return c.turn, string(c.partial), c.asker, c.rerun
}

func (h *Hub) broadcast(c *hubConv, ev Event) {
	for s := range c.subs {
		s.push(ev)
	}
}

// Expect names the turn execution that runs turn of conversation id for asker (shared mode):
// from now until End, live output of that turn is taken from publisher alone. A Begin that
// publisher already sent is applied now.
func (h *Hub) Expect(id string, turn int64, publisher, asker string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conv(id)
	c.want.pub, c.want.turn, c.want.asker = publisher, turn, asker
	if p, ok := h.pending[publisher]; ok {
		h.dropPending(publisher)
		if p.conv == id && p.turn == turn {
			h.begin(c, publisher, turn, asker, p.reset)
			for _, ev := range p.held {
				if ev.Kind == KindDelta {
					h.delta(c, turn, ev.Text)
				} else {
					h.broadcast(c, Event{Kind: ev.Kind, Turn: turn, Asker: c.asker, Tool: ev.Tool})
				}
			}
		}
	}
}

// dropPending forgets the pending Begin of publisher and what it held.
func (h *Hub) dropPending(publisher string) {
	if p, ok := h.pending[publisher]; ok {
		h.pendingBytes -= p.bytes
		delete(h.pending, publisher)
	}
}

// hold keeps ev, live output of a turn whose execution publisher is not named yet, with that
// execution's pending Begin, if it has one for this conversation and turn and the bound allows.
func (h *Hub) hold(id, publisher string, turn int64, ev Event) {
	p, ok := h.pending[publisher]
	if !ok || p.conv != id || p.turn != turn {
		return
	}
	n := eventBytes(ev)
	if h.pendingBytes+n > maxPendingBytes {
		return
	}
	if k := len(p.held); k > 0 && ev.Kind == KindDelta && p.held[k-1].Kind == KindDelta {
		p.held[k-1].Text += ev.Text
	} else {
		p.held = append(p.held, ev)
	}
	p.bytes += n
	h.pendingBytes += n
	h.pending[publisher] = p
}

func eventBytes(ev Event) int {
	n := len(ev.Text) + 16
	if ev.Tool != nil {
		n += len(ev.Tool.Output) + len(ev.Tool.Error) + len(ev.Tool.Call) + len(ev.Tool.Name)
	}
	return n
}

// Withdraw takes back an Expect (the execution found at the turn's id is not the dialogue's):
// nothing publisher sends is taken any more.
func (h *Hub) Withdraw(id string, turn int64, publisher string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.convs[id]
	if c == nil || c.want.pub != publisher || c.want.turn != turn {
		return
	}
	c.want.pub, c.want.turn, c.want.asker = "", 0, ""
	if c.pub == publisher && c.turn == turn {
		c.turn, c.asker, c.partial, c.chars, c.rerun, c.pub = 0, "", nil, 0, false, ""
	}
	h.gc(id, c)
}

// Begin marks turn as live, as produced by the execution publisher; reset says that it is being
// produced again after a restart. It is taken only from the conversation's own execution
// (publisher == id, with asker its own) or from the turn execution Expect named for this turn
// (with the asker Expect gave); any other is dropped.
func (h *Hub) Begin(id, publisher string, turn int64, asker string, reset bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.convs[id]
	if publisher != id {
		if c == nil || c.want.pub != publisher || c.want.turn != turn {
			h.dropPending(publisher)
			if len(h.pending) >= maxPendingBegins {
				for k := range h.pending {
					h.dropPending(k)
					break
				}
			}
			h.pending[publisher] = pendingBegin{conv: id, turn: turn, reset: reset}
			return
		}
		asker = c.want.asker
	}
	h.begin(h.conv(id), publisher, turn, asker, reset)
}

func (h *Hub) begin(c *hubConv, publisher string, turn int64, asker string, reset bool) {
	c.turn, c.asker, c.partial, c.chars, c.rerun, c.pub = turn, asker, c.partial[:0], 0, reset, publisher
	if reset {
		h.broadcast(c, Event{Kind: KindReset, Turn: turn, Asker: asker})
	}
}

// Delta forwards text that publisher produced for turn. A delta for a turn that is not live, or
// from an execution that is not the live turn's, is dropped.
func (h *Hub) Delta(id, publisher string, turn int64, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if text == "" {
		return
	}
	c := h.convs[id]
	if c == nil || c.turn != turn || c.pub != publisher {
		h.hold(id, publisher, turn, Event{Kind: KindDelta, Turn: turn, Text: text})
		return
	}
	h.delta(c, turn, text)
}

func (h *Hub) delta(c *hubConv, turn int64, text string) {
	if n := utf8.RuneCountInString(text); c.chars+n <= MaxPartialChars {
		c.partial = append(c.partial, text...)
		c.chars += n
	}
	h.broadcast(c, Event{Kind: KindDelta, Turn: turn, Text: text, Asker: c.asker})
}

// Tool forwards a tool call's start or end that publisher's live turn made; like Delta, one
// from an execution that is not the live turn's is dropped.
func (h *Hub) Tool(id, publisher string, turn int64, t Tool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.convs[id]
	if c == nil || c.turn != turn || c.pub != publisher {
		h.hold(id, publisher, turn, Event{Kind: KindTool, Turn: turn, Tool: &t})
		return
	}
	h.broadcast(c, Event{Kind: KindTool, Turn: turn, Asker: c.asker, Tool: &t, Text: ""})
}

// End ends turn's live phase: its durable record supersedes the partial. Only the dialogue calls
// it; it also ends what Expect named for the turn.
func (h *Hub) End(id string, turn int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.convs[id]
	if c == nil {
		return
	}
	if c.want.turn == turn {
		h.dropPending(c.want.pub)
		c.want.pub, c.want.turn, c.want.asker = "", 0, ""
	}
	if c.turn != turn {
		h.gc(id, c)
		return
	}
	h.broadcast(c, Event{Kind: KindDone, Turn: turn, Asker: c.asker})
	c.turn, c.asker, c.partial, c.chars, c.rerun, c.pub = 0, "", nil, 0, false, ""
	h.gc(id, c)
}

// Sub is one live subscriber: a bounded queue. While the reader is behind, consecutive deltas of
// one turn are coalesced; past the byte cap the subscriber overflows and receives nothing more
// (its reader should close and recover from the log).
type Sub struct {
	mu       sync.Mutex
	q        []Event
	bytes    int
	max      int
	overflow bool
	notify   chan struct{}
	over     chan struct{}
	who      string // the identity key of the principal holding it (AttachShare), or ""
}

func newSub(max int) *Sub {
	if max <= 0 {
		max = 1 << 20
	}
	return &Sub{max: max, notify: make(chan struct{}, 1), over: make(chan struct{})}
}

func (s *Sub) push(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overflow {
		return
	}
	if n := len(s.q); n > 0 && ev.Kind == KindDelta && s.q[n-1].Kind == KindDelta && s.q[n-1].Turn == ev.Turn {
		s.q[n-1].Text += ev.Text
	} else {
		s.q = append(s.q, ev)
	}
	s.bytes += len(ev.Text) + 16
	if ev.Tool != nil {
		s.bytes += len(ev.Tool.Output) + len(ev.Tool.Error)
	}
	if s.bytes > s.max {
		s.overflow = true
		s.q = nil
		close(s.over)
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Notify receives a value when events are waiting (or the subscriber overflowed).
func (s *Sub) Notify() <-chan struct{} { return s.notify }

// Overflowed is closed when the subscriber passes its byte cap.
func (s *Sub) Overflowed() <-chan struct{} { return s.over }

// Drain takes every waiting event; overflow reports that the cap was passed.
func (s *Sub) Drain() (evs []Event, overflow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs, s.q, s.bytes = s.q, nil, 0
	return evs, s.overflow
}

func errTooManySubscribers(max int) error {
	return &loomtype.LimitError{Limit: "subscribers per conversation", Max: int64(max)}
}

type stopper struct {
	turn  int64
	asker string
	fire  func()
}

// SetStopper registers how the running turn of conversation id (asked by asker) is stopped,
// until the returned function is called (when the turn ends).
//
//	defer hub.SetStopper("c1", 3, asker, sig.Fire)()
func (h *Hub) SetStopper(id string, turn int64, asker string, fire func()) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stops == nil {
		h.stops = map[string]stopper{}
	}
	h.stops[id] = stopper{turn: turn, asker: asker, fire: fire}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if s, ok := h.stops[id]; ok && s.turn == turn {
			delete(h.stops, id)
		}
	}
}

// Stopper returns the running turn of conversation id that can be stopped, its asker and the
// function that stops it; ok is false when no such turn runs here.
func (h *Hub) Stopper(id string) (turn int64, asker string, stop func(), ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.stops[id]
	return s.turn, s.asker, s.fire, ok
}

// Pending reports whether events wait in the subscriber's queue, without taking them (an
// overflowed subscriber holds none).
func (s *Sub) Pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q) > 0
}
