package sessions

import (
	"encoding/json"
	"sync"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// subscribe registers a subscriber after from (see Service.Subscribe).
func (ss *session) subscribe(from int64) (*Sub, []stream.Frame, bool, int64, int64, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.subscribeLocked(from)
}

// subscribeLocked is subscribe with ss.mu held.
func (ss *session) subscribeLocked(from int64) (*Sub, []stream.Frame, bool, int64, int64, error) {
	if ss.dead() {
		return nil, nil, false, 0, 0, loomtype.ErrStoreClosed
	}
	if len(ss.subs) >= ss.svc.cfg.MaxSubscribers {
		return nil, nil, false, 0, 0, ErrTooManySubscribers
	}
	replay, reset := ss.log.Replay(from)
	if reset {
		replay, _ = ss.log.Replay(ss.log.Floor() - 1)
	}
	s := &Sub{ss: ss, ch: make(chan Item, ss.svc.cfg.SubQueue), maxBytes: ss.svc.cfg.SubQueueBytes, done: make(chan struct{})}
	ss.subs[s] = struct{}{}
	items := make([]stream.Frame, len(replay))
	now := ss.svc.cfg.Now()
	for i, f := range replay {
		items[i] = stream.Expire(f, now, ss.svc.cfg.Retain)
	}
	return s, items, reset, ss.log.Head(), ss.log.Floor(), nil
}

// GuardOf returns the item for a replayed frame f of the subscriber's session.
func (s *Sub) GuardOf(f stream.Frame) Item {
	s.ss.mu.Lock()
	defer s.ss.mu.Unlock()
	return Item{Frame: f, g: s.ss.guards[f.Cur], room: s.ss.room}
}

// Item is a frame with what the service knows of who may see it.
type Item struct {
	Frame stream.Frame
	g     guard
	only  string // the identity key of the one viewer an ephemeral item is for ("": everyone)
	// room is the session's room when the frame was logged (live) or replayed, which decides
	// whether a viewer receives what the assistant put into it (Render).
	room stream.Room
	// size is what the item counts against a subscriber's Config.SubQueueBytes: a logged frame
	// as the store keeps it (with who may see it), an ephemeral one as encoded (0: not known yet).
	size int
	// enc is Frame encoded as JSON, made once for every subscriber of a live frame (nil: not
	// encoded); Draw hands it to the viewers who see the frame as it is.
	enc []byte
	// alike says every viewer sees the frame as it is (no reply handle, no guard, no record
	// block), so that Draw hands enc to each without drawing it.
	alike bool
}

// maxHandles bounds the reply handles a session remembers; past it the oldest turn's is
// forgotten (a frame of that turn opens it again, at the room version then).
const maxHandles = 256

// openHandle returns the room version turn's reply handle opened at, opening it now (at the
// room's version) if it is not open yet: the turn's first record of the person asking, or else
// its first frame of the assistant, opens it, and every later frame of the turn keeps that
// version whatever joins or leaves meanwhile.
func (ss *session) openHandle(turn int64) int64 {
	if v, ok := ss.handles[turn]; ok {
		return v
	}
	if len(ss.handles) >= maxHandles {
		oldest := int64(-1)
		for t := range ss.handles {
			if oldest < 0 || t < oldest {
				oldest = t
			}
		}
		delete(ss.handles, oldest)
	}
	ss.handles[turn] = ss.room.Ver
	return ss.room.Ver
}

// Sub is one reader of a session: a bounded queue of the frames logged after its replay, at
// most Config.SubQueue frames and Config.SubQueueBytes bytes (a frame as the store keeps it; an
// empty queue takes one frame of any size). A frame that would pass either bound is not queued:
// the reader is cut off instead (Done is closed), gets what its queue holds, and resumes from
// its cursor, so it misses nothing and sees nothing twice. Safe for concurrent use.
//
//	sub, replay, reset, head, floor, err := svc.Subscribe(ctx, "c1", from)
//	defer sub.Close()
//	for it := range sub.Frames() { ... } // until sub.Done() is closed: drain, then resume from the cursor
type Sub struct {
	ss      *session
	ch      chan Item
	done    chan struct{}
	once    sync.Once
	closed  sync.Once
	release func()

	// What the queue holds, counted as frames are pushed (guarded by ss.mu, as every push is):
	// the sizes of the frames pushed and not yet known to be taken, oldest first, and their sum.
	maxBytes int
	sizes    []int
	queued   int

	// marker is the reader's read marker as it stood when the subscription started
	// (SubscribeAs; hasMarker false: none), so that it and the live markers meet exactly.
	marker    stream.Frame
	hasMarker bool
	// reader is the identity key of the reader (SubscribeAs; "" for Subscribe), and ended why
	// the service ended the subscription for good (set before Done is closed; "": it did not).
	reader string
	ended  EndReason
}

// Frames receives the live frames, in cursor order.
func (s *Sub) Frames() <-chan Item { return s.ch }

// Done is closed when the subscriber was cut off (its queue filled, or the session stopped).
func (s *Sub) Done() <-chan struct{} { return s.done }

// push queues it, or cuts the reader off when it would pass the queue's bounds (ss.mu held).
func (s *Sub) push(it Item) bool {
	if it.size == 0 {
		b, _ := json.Marshal(it.Frame)
		it.size = len(b)
	}
	s.settle()
	if len(s.sizes) > 0 && s.queued+it.size > s.maxBytes {
		s.cut()
		return false
	}
	select {
	case s.ch <- it:
		s.sizes = append(s.sizes, it.size)
		s.queued += it.size
		return true
	default:
		s.cut()
		return false
	}
}

// settle forgets the frames the reader has taken from the queue since: the channel is a FIFO,
// so they are the oldest of those counted (ss.mu held).
func (s *Sub) settle() {
	for len(s.sizes) > len(s.ch) {
		s.queued -= s.sizes[0]
		s.sizes = s.sizes[1:]
	}
	if len(s.sizes) == 0 {
		s.sizes = nil // let go of what the slice held before
	}
}

func (s *Sub) cut() { s.once.Do(func() { close(s.done) }) }

// Close ends the subscription.
func (s *Sub) Close() {
	s.closed.Do(func() {
		s.ss.mu.Lock()
		delete(s.ss.subs, s)
		s.ss.mu.Unlock()
		s.cut()
		if s.release != nil {
			s.release()
		}
	})
}

// Withheld is the text of the block that replaces a tool's result the turn's asker may not read.
const Withheld = "withheld: the asker may not read this result"
