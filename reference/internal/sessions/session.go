package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// session is one resident session: its frame log, the adapter's memory and the projection's
// position. mu serialises every projection step (a read of the conversation, a commit, a fan
// out) and every subscription, so a subscriber's replay and its live frames meet exactly.
type session struct {
	svc *Service
	id  string

	mu            sync.Mutex
	log           *stream.Log
	ad            *stream.Adapter
	guards        map[int64]guard
	pos           loomtype.Cursor
	lastReplyTurn int64
	liveBytes     map[int64]int // bytes of live text logged per turn since its last restart
	subs          map[*Sub]struct{}
	lastAskedTurn int64
	// lastAsker is the identity key of the person who asked lastAskedTurn ("" when unknown).
	lastAsker   string
	queue       queueRecord
	extraQueue  *queueRecord   // the steering queue to store with the next commit (nil: none)
	hubSub      *hubSub        // the live subscription the pump starts with
	liveSub     *hubSub        // the live subscription now (guarded by mu)
	openTurns   []int64        // turns the restored log shows streaming with no end
	dropped     map[int64]bool // turns given up after a restart: nothing more of them is shown
	stopTurn    int64          // the given-up turn still to be stopped (0: none)
	presence    map[string]time.Time
	lastSpeaker string          // who spoke last: a sent user-message's author, or Assistant after a reply
	people      int             // persons in the chat: 1 in owner mode, the participants in shared mode
	room        stream.Room     // who is in the chat by room version, after the log's last frame
	handles     map[int64]int64 // the reply handles opened: turn to the room version it opened at
	// turnParent is the parent of each turn asked as a thread reply whose reply has not been
	// projected yet: the reply's frames carry it too.
	turnParent map[int64]string

	// fol follows the conversation: its records come from the conversation's tail while the
	// position lies within it, else from its log (and from the log when fromLog is set).
	fol     *conversation.Follower
	fromLog bool

	// refs and lastUse are guarded by svc.mu.
	refs    int
	lastUse time.Time

	broken   atomic.Bool
	quit     chan struct{}
	quitOnce sync.Once
}

func newSession(svc *Service, id string) *session {
	return &session{svc: svc, id: id, log: stream.NewLog(id, svc.cfg.Limits), ad: stream.NewAdapter(),
		guards: map[int64]guard{}, room: stream.NewRoom(), handles: map[int64]int64{}, liveBytes: map[int64]int{}, dropped: map[int64]bool{}, subs: map[*Sub]struct{}{}, quit: make(chan struct{}),
		turnParent: map[int64]string{}}
}

func (ss *session) dead() bool { return ss.broken.Load() }

func (ss *session) stop() { ss.quitOnce.Do(func() { close(ss.quit) }) }

// fail marks the session broken: its pump stops, its subscribers are cut off (their readers
// resume from their cursors on a session loaded afresh from the store).
func (ss *session) failLocked(err error) error {
	ss.broken.Store(true)
	ss.stop()
	for s := range ss.subs {
		s.cut()
	}
	ss.subs = map[*Sub]struct{}{}
	return err
}

func (ss *session) bounds() (head, floor int64) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.log.Head(), ss.log.Floor()
}

// restoreStreamed tells the adapter which turns of the restored frames have live text logged
// and no end yet, so that their durable reply is not shown a second time.
func (ss *session) restoreStreamed(frames []stream.Frame) {
	open := map[int64]int{}
	for _, f := range frames {
		ss.noteSpeaker(f)
		switch f.Kind() {
		case stream.KindUserMessage:
			var d struct {
				Parent string `json:"parent"`
			}
			if f.Turn > 0 && json.Unmarshal(f.Data, &d) == nil && d.Parent != "" {
				ss.turnParent[f.Turn] = d.Parent
			}
		case stream.KindTextDelta:
			var d struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(f.Data, &d)
			open[f.Turn] += len(d.Text)
		case stream.KindTextDone:
			delete(open, f.Turn)
			delete(ss.turnParent, f.Turn)
		case stream.KindStatus:
			var d struct {
				State string `json:"state"`
			}
			_ = json.Unmarshal(f.Data, &d)
			if d.State == "restarted" {
				delete(open, f.Turn)
			}
			if givenUp(f) {
				delete(open, f.Turn)
				ss.dropped[f.Turn] = true
			}
		}
	}
	for turn, n := range open {
		ss.ad.Apply(stream.Event{Kind: stream.EventDelta, Turn: turn, Text: "x"}) // remember: streamed
		ss.liveBytes[turn] = n
		ss.openTurns = append(ss.openTurns, turn)
	}
	slices.Sort(ss.openTurns)
}

// catchUp projects every conversation record after the session's position.
func (ss *session) catchUp(ctx context.Context, _ func(loomtype.Entry) bool) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.catchUpLocked(ctx)
}

// catchUpLocked brings the log up to date: the live output waiting in the session's live
// subscription first (with the records committed before it), then every record. A reply's
// record is committed after its turn's live output, so catching up records alone first would
// make that output look superseded and lose it (tool frames have no other source).
func (ss *session) catchUpLocked(ctx context.Context) error {
	for {
		if sub := ss.liveSub; sub != nil {
			if evs, _ := sub.Drain(); len(evs) > 0 {
				// An overflow is seen again, and handled, by the pump. The records after this
				// output (its turn's reply among them) are caught up next: returning here left a
				// reply already in the history unseen, so that a stop after it was judged against
				// a turn still running.
				if err := ss.liveLocked(ctx, evs); err != nil {
					return err
				}
				continue
			}
		}
		err := ss.catchUpUntil(ctx, nil)
		if !errors.Is(err, errLiveFirst) {
			return err
		}
	}
}

// errLiveFirst: a read of records met a reply while live output waited; the output goes first.
var errLiveFirst = errors.New("sessions: live output first")

// catchUpUntil projects the records after the session's position, stopping before the first one
// stop holds (nil: none), which a later call projects.
func (ss *session) catchUpUntil(ctx context.Context, stop func(loomtype.Entry) bool) error {
	if ss.dead() {
		return loomtype.ErrStoreClosed
	}
	for {
		entries, next, done, err := ss.read(ctx, ss.pos, defaultReadBatch)
		if err != nil {
			if errors.Is(err, loomtype.ErrCorrupt) || errors.Is(err, loomtype.ErrStoreClosed) {
				return ss.failLocked(err)
			}
			return err
		}
		// Live output of a turn is made before its reply is recorded, so whatever waits in the
		// live subscription once the reply has been read is older than it: it goes first.
		if stop == nil && ss.liveSub != nil && ss.liveSub.Pending() {
			for _, e := range entries {
				if e.Role == loomtype.RoleAssistant {
					return errLiveFirst
				}
			}
		}
		var specs []stream.Spec
		var guards []guard
		last := ss.lastReplyTurn
		stopped := false
		at := ss.pos
		for i := range entries {
			e := entries[i]
			if stop != nil && stop(e) {
				next, stopped = at, true
				break
			}
			if c, err := loomtype.ParseCursor(e.Cursor); err == nil {
				at = c
			}
			g := guard{Cursor: e.Cursor, Classes: strings.Join(e.Classes, ",")}
			if e.Asker != nil {
				g.Asker = *e.Asker
			}
			parent := ""
			switch e.Role {
			case loomtype.RoleUser:
				if parent = ss.takeParentLocked(e); parent != "" && e.Turn > 0 {
					ss.turnParent[e.Turn] = parent
				}
			case loomtype.RoleAssistant:
				parent = ss.turnParent[e.Turn]
			}
			var shown []stream.Spec
			if e.Role != loomtype.RoleAssistant || !ss.dropped[e.Turn] {
				shown = ss.ad.Apply(stream.Event{Kind: stream.EventRecord, Turn: e.Turn, Entry: &e, Parent: parent})
			}
			for _, sp := range shown {
				gs := g
				if e.Role == loomtype.RoleUser && e.Asker != nil && sp.Author != "" {
					sp.Author = ss.name(*e.Asker) // the adapter names the actor alone
				}
				if e.Role == loomtype.RoleAssistant {
					if e.Asker != nil {
						sp.ActsFor = ss.name(*e.Asker)
					}
					gs.Ver = 1
				}
				specs = append(specs, sp)
				guards = append(guards, gs)
			}
			if e.Role == loomtype.RoleAssistant && e.Turn > last {
				last = e.Turn
				delete(ss.liveBytes, e.Turn)
			}
			if e.Role == loomtype.RoleAssistant {
				delete(ss.turnParent, e.Turn)
			}
			if e.Role == loomtype.RoleUser {
				ss.openHandle(e.Turn)
				if e.Turn > ss.lastAskedTurn {
					ss.lastAskedTurn = e.Turn
					ss.lastAsker = ""
					if e.Asker != nil {
						ss.lastAsker = e.Asker.Key()
					}
				}
				if ss.queue.Awaiting != "" && (e.MessageID == "" || e.MessageID == ss.queue.Awaiting) {
					q := ss.queue
					q.Awaiting = ""
					ss.extraQueue = &q
					ss.queue = q
				}
			}
		}
		err = func() error {
			defer func() { ss.extraQueue = nil }()
			_, err := ss.commit(ctx, specs, guards, next, last)
			return err
		}()
		if err != nil {
			return err
		}
		if stopped {
			return nil
		}
		if done || len(entries) == 0 {
			return ss.pickUpLocked(ctx)
		}
	}
}

// read reads the conversation's records after from: from its tail when the position lies
// within it, else (or when the pump polls) from its log (ss.mu held).
func (ss *session) read(ctx context.Context, from loomtype.Cursor, n int) ([]loomtype.Entry, loomtype.Cursor, bool, error) {
	switch {
	case ss.fol == nil:
		return ss.svc.cv.ReadForward(ctx, ss.id, from, n)
	case ss.fromLog:
		return ss.fol.ReadLog(ctx, from, n)
	}
	return ss.fol.Read(ctx, from, n)
}

// catchUpFromLog is catchUp reading the conversation's log whatever its tail holds: a commit
// whose report went missing is projected all the same.
func (ss *session) catchUpFromLog(ctx context.Context) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.catchUpLogLocked(ctx)
}

// catchUpLogLocked is catchUpLocked reading the conversation's log rather than its tail. A
// request that decides on the session's state (who answers a message, whether a turn is running,
// which messages and cursors exist) catches up this way: the tail learns of a commit a moment
// after the commit is readable, and a caller who read a reply in the history and then speaks must
// be judged after that reply, not before it.
func (ss *session) catchUpLogLocked(ctx context.Context) error {
	ss.fromLog = true
	defer func() { ss.fromLog = false }()
	return ss.catchUpLocked(ctx)
}

// commit logs specs (guards[i] says who may see specs[i]) and the new position in one
// transaction, then hands the frames to every subscriber. A failed commit breaks the session:
// the log in memory may be ahead of the store, so it is loaded again from the store.
func (ss *session) commit(ctx context.Context, specs []stream.Spec, guards []guard, next loomtype.Cursor, lastReply ...int64) ([]stream.Frame, error) {
	reply := ss.lastReplyTurn
	if len(lastReply) > 0 {
		reply = lastReply[0]
	}
	if len(specs) == 0 && ss.extraQueue == nil {
		ss.pos, ss.lastReplyTurn = next, reply
		return nil, nil
	}
	now := ss.svc.cfg.Now()
	expect := ss.log.Head()
	frames := make([]stream.Frame, 0, len(specs))
	sizes := make([]int, 0, len(specs))
	evs := make([]kernel.AuxEvent, 0, len(specs))
	rooms := make([]stream.Room, 0, len(specs))
	for i, sp := range specs {
		var g guard
		if i < len(guards) {
			g = guards[i]
		}
		if g.Ver > 0 && sp.Turn > 0 {
			// What the assistant puts into the room goes through its turn's reply handle.
			sp.Rid, sp.Ver = stream.HandleID(sp.Turn), ss.openHandle(sp.Turn)
		}
		f, err := ss.log.Append(sp, now)
		if err != nil {
			return nil, ss.failLocked(err)
		}
		ss.room = ss.room.Apply(f)
		rooms = append(rooms, ss.room)
		b, err := json.Marshal(diskFrame{F: f, G: g})
		if err != nil {
			return nil, ss.failLocked(err)
		}
		frames = append(frames, f)
		sizes = append(sizes, len(b))
		evs = append(evs, kernel.AuxEvent{Kind: frameEventKind, Data: b})
		if g != (guard{}) {
			ss.guards[f.Cur] = g
		}
	}
	room := ss.room
	rec := posRecord{Next: next.String(), LastReply: reply, LastAsked: ss.lastAskedTurn, LastAsker: ss.lastAsker, Room: &room, Handles: ss.handles}
	if t, ok := ss.svc.owners.get(ss.id); ok {
		rec.Owner = &t
	}
	// The frames are the session's, not the caller's: a request that goes away mid-commit
	// must not cut the session's log short (a failed commit breaks the session).
	err := ss.svc.k.Update(context.WithoutCancel(ctx), func(tx *kernel.Tx) error {
		if len(evs) > 0 {
			if _, err := tx.AppendAux(ss.id, framesStream, expect, evs...); err != nil {
				return err
			}
		}
		if q := ss.extraQueue; q != nil {
			if err := queues.Put(tx, ss.id, *q); err != nil {
				return err
			}
		}
		return positions.Put(tx, ss.id, rec)
	})
	if err != nil {
		return nil, ss.failLocked(err)
	}
	ss.pos, ss.lastReplyTurn = next, reply
	for cur := range ss.guards {
		if cur < ss.log.Floor() {
			delete(ss.guards, cur)
		}
	}
	for i, f := range frames {
		ss.noteSpeaker(f)
		it := Item{Frame: f, room: rooms[i], size: sizes[i]}
		if i < len(guards) {
			it.g = guards[i]
		}
		for s := range ss.subs {
			if !s.push(it) {
				delete(ss.subs, s)
			}
		}
	}
	return frames, nil
}

// liveLocked logs the live events evs (after the records committed before them).
func (ss *session) liveLocked(ctx context.Context, evs []live.Event) error {
	// Records committed before this live output was made go first, up to (not including) the
	// reply of its turn, which was written after it.
	var t int64
	for _, ev := range evs {
		if ev.Kind != live.KindDone && (t == 0 || ev.Turn < t) {
			t = ev.Turn
		}
	}
	if err := ss.catchUpUntil(ctx, func(e loomtype.Entry) bool {
		return t > 0 && e.Role == loomtype.RoleAssistant && e.Turn >= t
	}); err != nil {
		return err
	}
	var specs []stream.Spec
	var guards []guard
	for _, ev := range evs {
		if ev.Turn <= ss.lastReplyTurn || ss.dropped[ev.Turn] {
			continue // the durable reply superseded it, or the turn was given up
		}
		g := guard{Live: true, AskerKey: ev.Asker, Ver: 1}
		switch ev.Kind {
		case live.KindDelta:
			for _, sp := range ss.ad.Apply(stream.Event{Kind: stream.EventDelta, Turn: ev.Turn, Text: ev.Text, Parent: ss.turnParent[ev.Turn]}) {
				if ev.Asker != "" {
					sp.ActsFor = ss.name(identityOf(ev.Asker))
				}
				specs, guards = append(specs, sp), append(guards, g)
			}
			ss.liveBytes[ev.Turn] += len(ev.Text)
		case live.KindReset:
			if ss.liveBytes[ev.Turn] == 0 {
				continue // nothing of the turn streamed since its last restart: nothing to void
			}
			specs = append(specs, ss.ad.Apply(stream.Event{Kind: stream.EventRestart, Turn: ev.Turn})...)
			guards = append(guards, guard{})
			ss.liveBytes[ev.Turn] = 0
		case live.KindTool:
			t := ev.Tool
			if t == nil {
				continue
			}
			in := stream.Event{Kind: stream.EventToolStarted, Turn: ev.Turn, Call: t.Call, Tool: t.Name}
			if t.Done {
				in.Kind, in.OK, in.Result, in.Text, in.People = stream.EventToolFinished, t.OK, t.Output, t.Error, ss.people
			}
			for _, sp := range ss.ad.Apply(in) {
				if ev.Asker != "" {
					sp.ActsFor = ss.name(identityOf(ev.Asker))
				}
				if t.Done {
					sp = ss.askerMayRead(ctx, sp, ev.Asker)
				}
				specs, guards = append(specs, sp), append(guards, g)
			}
		}
	}
	if _, err := ss.commit(ctx, specs, guards, ss.pos); err != nil {
		return err
	}
	return ss.catchUpLocked(ctx) // the reply held back above, and anything after it
}

// attachPartial logs what the live channel held of a running turn before the pump attached:
// the part of it this log has not shown yet, after a restart status when the turn is being
// produced again and this log showed some of an earlier run.
func (ss *session) attachPartial(ctx context.Context, turn int64, text, asker string, rerun bool) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// A turn the restored log shows streaming, with no end, was cut by the end of an earlier
	// process (the text it streamed is void: the turn is produced again, or its reply was
	// recorded whole), unless this process has held the session before and the turn is still
	// live here. Its restart status goes first, before the records.
	if open := ss.openTurns; len(open) > 0 {
		ss.openTurns = nil
		var evs []live.Event
		for _, t := range open {
			if ss.svc.heldBefore(ss.id) && t == turn && !rerun || ss.dropped[t] {
				continue
			}
			evs = append(evs, live.Event{Kind: live.KindReset, Turn: t})
		}
		if len(evs) > 0 {
			if err := ss.logRestarts(ctx, evs); err != nil {
				return err
			}
		}
	}
	ss.svc.markHeld(ss.id)
	// The records up to (not including) the live turn's reply: what the partial holds was made
	// before it, and goes first.
	if err := ss.catchUpUntil(ctx, func(e loomtype.Entry) bool {
		return turn > 0 && e.Role == loomtype.RoleAssistant && e.Turn >= turn
	}); err != nil {
		return err
	}
	if turn == 0 || turn <= ss.lastReplyTurn {
		return ss.catchUpLocked(ctx)
	}
	var evs []live.Event
	shown := ss.liveBytes[turn]
	if rerun && shown > 0 {
		evs = append(evs, live.Event{Kind: live.KindReset, Turn: turn})
		shown = 0
	}
	if len(text) > shown {
		evs = append(evs, live.Event{Kind: live.KindDelta, Turn: turn, Text: text[shown:], Asker: asker})
	}
	if len(evs) == 0 {
		return ss.catchUpLocked(ctx)
	}
	return ss.liveLocked(ctx, evs)
}

// attach subscribes the session to the live channel and logs what it already held of a running
// turn; with too many live subscribers it returns nil (records only, until a later attempt).
func (ss *session) attach(ctx context.Context) (*hubSub, <-chan struct{}) {
	at, err := ss.svc.cv.Hub().Attach(ss.id, DefaultMaxPending)
	if err != nil {
		return nil, nil
	}
	ss.mu.Lock()
	ss.liveSub = at.Sub
	ss.mu.Unlock()
	ss.report(ss.attachPartial(ctx, at.Turn, at.Text, at.Asker, at.Rerun))
	return at.Sub, at.Sub.Notify()
}

// pump follows the conversation until the session is idle, broken or stopped.
func (ss *session) pump() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-ss.quit
		cancel()
	}()
	defer func() {
		ss.mu.Lock()
		for s := range ss.subs {
			s.cut()
		}
		ss.subs = map[*Sub]struct{}{}
		ss.mu.Unlock()
		ss.broken.Store(true)
		ss.stop()
	}()
	hub := ss.svc.cv.Hub()
	var wake <-chan struct{}
	if ss.fol != nil {
		defer ss.fol.Close()
		wake = ss.fol.Wake()
	} else {
		w, stopWake := ss.svc.cv.WatchLog(ss.id)
		defer stopWake()
		wake = w
	}
	sub := ss.hubSub
	var notify <-chan struct{}
	if sub != nil {
		notify = sub.Notify()
	}
	attach := func() {
		sub, notify = ss.attach(ctx)
	}
	defer func() {
		if sub != nil {
			hub.Unsubscribe(ss.id, sub)
		}
	}()
	// A wake-up that came between the load and the watch is not lost: read once now.
	ss.report(ss.catchUp(ctx, nil))
	poll := time.NewTicker(ss.svc.cfg.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ss.quit:
			return
		case <-wake:
			ss.report(ss.catchUp(ctx, nil))
		case <-poll.C:
			if ss.svc.idle(ss) {
				return
			}
			if sub == nil {
				attach()
			}
			ss.report(ss.catchUpFromLog(ctx))
			ss.mu.Lock()
			ss.stopGivenUpLocked()
			ss.mu.Unlock()
		case <-notify:
			ss.mu.Lock()
			evs, overflow := sub.Drain()
			err := ss.liveLocked(ctx, evs)
			ss.mu.Unlock()
			ss.report(err)
			if overflow {
				hub.Unsubscribe(ss.id, sub)
				attach()
			}
		}
		if ss.dead() {
			return
		}
	}
}

func (ss *session) report(err error) {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, loomtype.ErrStoreClosed) {
		ss.svc.log.Error("session stream: projection failed", "session", ss.id, "err", err)
	}
}

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

// askerMayRead checks, where a reply is built, that a tool-finished spec holds nothing the
// turn's asker could not read (stream.AssertAskerCanRead, with the asker's roles); a result that
// does is replaced by a text block saying it was withheld.
func (ss *session) askerMayRead(ctx context.Context, sp stream.Spec, askerKey string) stream.Spec {
	f := stream.Frame{Type: sp.Kind.Type(), Session: ss.id}
	f.Data, _ = json.Marshal(sp.Data)
	roles := recordRoles(f)
	if len(roles) == 0 {
		return sp
	}
	asker := identityOf(askerKey)
	held, err := ss.svc.heldRoles(ctx, ss.id, asker, roles)
	if err == nil && stream.AssertAskerCanRead(f, stream.Viewer{ID: ss.name(asker), ReadRoles: held}) == nil {
		return sp
	}
	var d map[string]any
	_ = json.Unmarshal(f.Data, &d)
	d["block"] = map[string]string{"kind": "text", "text": Withheld}
	sp.Data = d
	return sp
}

// identityOf parses an identity key (loomtype.Identity.Key); what is no identity's key is the
// identity of no one.
func identityOf(key string) loomtype.Identity {
	who, _ := loomtype.ParseIdentityKey(key)
	return who
}

// noteSpeaker remembers who spoke last, for who answers the next message.
func (ss *session) noteSpeaker(f stream.Frame) {
	switch f.Kind() {
	case stream.KindTextDone:
		ss.lastSpeaker = Assistant
	case stream.KindUserMessage:
		var d struct {
			State string `json:"state"`
		}
		if json.Unmarshal(f.Data, &d) == nil && d.State == StateSent && f.Author != "" {
			ss.lastSpeaker = f.Author
		}
	}
}

// logRestarts logs the restart status of each turn of evs (KindReset events), with nothing of
// the records before them: they void what the turns streamed before.
func (ss *session) logRestarts(ctx context.Context, evs []live.Event) error {
	var specs []stream.Spec
	for _, ev := range evs {
		specs = append(specs, ss.ad.Apply(stream.Event{Kind: stream.EventRestart, Turn: ev.Turn})...)
		ss.liveBytes[ev.Turn] = 0
	}
	_, err := ss.commit(ctx, specs, nil, ss.pos)
	return err
}
