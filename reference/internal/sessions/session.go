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
	// slot names this load of the session in its caller's share (share.go).
	slot string

	mu            sync.Mutex
	log           *stream.Log
	ad            *stream.Adapter
	guards        map[int64]guard
	pos           loomtype.Cursor
	lastReplyTurn int64
	// reserved is the newest cursor a reader may be given before a synced commit raises it,
	// floor the floor the position keeps (0: the log's own), and epoch the store's loss epoch the
	// session was loaded under; see reserve.go.
	reserved, floor, epoch int64
	// ahead is the reservation written past reserved whose sync apart is made or to be made
	// (0: none), and syncing that such a sync is running; see reserve.go.
	ahead         int64
	syncing       bool
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
	// roomEnc is room encoded as JSON at room version roomEncVer (nil: not yet), which the
	// position record of every commit holds (storedRoomLocked).
	roomEnc    []byte
	roomEncVer int64

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
	return &session{svc: svc, id: id, slot: residentName(id), log: stream.NewLog(id, svc.cfg.Limits), ad: stream.NewAdapter(),
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
			specs, guards = ss.projectEntry(e, specs, guards)
			last = ss.noteEntry(e, last)
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

// projectEntry appends to specs what the session shows of record e, and to guards their guards,
// one for each (ss.mu held).
func (ss *session) projectEntry(e loomtype.Entry, specs []stream.Spec, guards []guard) ([]stream.Spec, []guard) {
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
	return specs, guards
}

// noteEntry updates the session's turns for record e once it is projected: last is the newest
// turn replied to before it, and noteEntry returns it after (ss.mu held).
func (ss *session) noteEntry(e loomtype.Entry, last int64) int64 {
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
	return last
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
	if err := ss.sameEpochLocked(); err != nil {
		return nil, ss.failLocked(err)
	}
	expect := ss.log.Head()
	b, err := ss.appendFrames(specs, guards, ss.svc.cfg.Now())
	if err != nil {
		return nil, ss.failLocked(err)
	}
	frames, encs, sizes, evs, rooms := b.frames, b.encs, b.sizes, b.evs, b.rooms
	rec := ss.posRecordLocked(next, reply)
	// A queued message the sender was told is kept waits for the disk; frames alone do not,
	// unless they go past the cursors reserved (reserve.go).
	synced := ss.extraQueue != nil || ss.reserveLocked(&rec)
	var ahead int64
	if !synced {
		ahead = ss.reserveAheadLocked(&rec)
	}
	// The frames are the session's, not the caller's: a request that goes away mid-commit
	// must not cut the session's log short (a failed commit breaks the session).
	err = ss.write(context.WithoutCancel(ctx), synced, func(tx *kernel.Tx) error {
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
	ss.pos, ss.lastReplyTurn, ss.reserved = next, reply, rec.Reserved
	if ahead > 0 {
		ss.syncAheadLocked(ahead)
	}
	for cur := range ss.guards {
		if cur < ss.log.Floor() {
			delete(ss.guards, cur)
		}
	}
	ss.publish(frames, encs, rooms, sizes, guards)
	return frames, nil
}

// frameBatch is what appendFrames made of one commit's specs: the frames, each encoded, its size
// on disk, its log event and the room after it.
type frameBatch struct {
	frames []stream.Frame
	encs   [][]byte
	sizes  []int
	evs    []kernel.AuxEvent
	rooms  []stream.Room
}

// appendFrames appends specs to the session's log in memory (guards[i] says who may see the
// i-th) and returns the batch commit writes; a failure leaves the session to be broken by the
// caller.
func (ss *session) appendFrames(specs []stream.Spec, guards []guard, now time.Time) (frameBatch, error) {
	b := frameBatch{frames: make([]stream.Frame, 0, len(specs)), sizes: make([]int, 0, len(specs)),
		encs: make([][]byte, 0, len(specs)), evs: make([]kernel.AuxEvent, 0, len(specs)), rooms: make([]stream.Room, 0, len(specs))}
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
			return b, err
		}
		ss.room = ss.room.Apply(f)
		b.rooms = append(b.rooms, ss.room)
		enc, err := json.Marshal(f)
		if err != nil {
			return b, err
		}
		disk, err := diskFrameBytes(enc, g)
		if err != nil {
			return b, err
		}
		b.frames = append(b.frames, f)
		b.encs = append(b.encs, enc)
		b.sizes = append(b.sizes, len(disk))
		b.evs = append(b.evs, kernel.AuxEvent{Kind: frameEventKind, Data: disk})
		if g != (guard{}) {
			ss.guards[f.Cur] = g
		}
	}
	return b, nil
}

// publish is commit's hand-over of the committed frames to every subscriber (encs[i]: frames[i]
// encoded; rooms[i]: the room after it; sizes[i]: its size on disk; guards[i]: who may see it),
// dropping a subscriber that cannot take one. The one encoding goes to every reader who sees the
// frame as it is.
func (ss *session) publish(frames []stream.Frame, encs [][]byte, rooms []stream.Room, sizes []int, guards []guard) {
	for i, f := range frames {
		ss.noteSpeaker(f)
		it := Item{Frame: f, room: rooms[i], size: sizes[i], enc: encs[i]}
		if i < len(guards) {
			it.g = guards[i]
		}
		it.alike = f.Rid == "" && it.g == (guard{}) && recordRoles(f) == nil
		for s := range ss.subs {
			if !s.push(it) {
				delete(ss.subs, s)
			}
		}
	}
}

func (ss *session) report(err error) {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, loomtype.ErrStoreClosed) {
		ss.svc.log.Error("session stream: projection failed", "session", ss.id, "err", err)
	}
}

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
