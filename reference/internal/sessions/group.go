package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// PresenceEvery is the least time between two presence frames of one author: more frequent ones
// are dropped.
const PresenceEvery = 3 * time.Second

// Errors of the group-chat operations.
var (
	// ErrUnknownMessage: a reaction or pin names a message the session's log does not hold.
	ErrUnknownMessage = errors.New("sessions: no such message in the session")
	// ErrBadEmoji: an emoji that is empty or longer than 16 characters.
	ErrBadEmoji = errors.New("sessions: bad emoji")
	// ErrBadPresence: a presence state other than typing or doing, or doing without what.
	ErrBadPresence = errors.New("sessions: bad presence")
	// ErrBadMarker: a read marker below 0 or beyond the log's head.
	ErrBadMarker = errors.New("sessions: bad read marker")
)

// Participant logs that who joined (joined true) or left session id's chat, as changed by by.
// A person who left is cut off at once: each of their open readers of the session ends, with
// EndRemoved, under the lock that logged the participant-left frame, so no frame logged or sent
// after it reaches them.
//
// Errors: loomtype.ErrNotFound, store errors.
func (s *Service) Participant(ctx context.Context, by loomtype.Identity, id string, who loomtype.Identity, joined bool) error {
	if err := s.authorize(ctx, by, id); err != nil {
		return err
	}
	k := stream.KindParticipantLeft
	if joined {
		k = stream.KindParticipantJoined
	}
	spec := stream.Spec{Kind: k, Author: s.nameOf(id, by),
		Data: map[string]string{"who": s.nameOf(id, who), "by": s.nameOf(id, by)}}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return err
	}
	defer s.release(ss)
	if err := ss.catchUp(ctx, nil); err != nil {
		return err
	}
	ss.mu.Lock()
	_, err = ss.commit(ctx, []stream.Spec{spec}, nil, ss.pos)
	if err == nil && !joined {
		ss.endReadersLocked(who, EndRemoved)
	}
	ss.mu.Unlock()
	if err == nil {
		s.countPeople(ctx, ss, by) // the room's new head count
	}
	return err
}

// React logs who's reaction emoji on message (on false takes it back), or a pin of message when
// pin is true (emoji unused).
//
// Errors: loomtype.ErrNotFound, ErrUnknownMessage, ErrBadEmoji, store errors.
//
//	_, err := svc.React(ctx, alice, "c1", "a:3", "👍", true, false)
func (s *Service) React(ctx context.Context, who loomtype.Identity, id, message, emoji string, on, pin bool) (stream.Frame, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return stream.Frame{}, err
	}
	if !pin && (emoji == "" || utf8.RuneCountInString(emoji) > 16 || !utf8.ValidString(emoji)) {
		return stream.Frame{}, ErrBadEmoji
	}
	if message == "" {
		// No frame's message is empty: a frame without one (a terminal line, a status) is no
		// message a reaction or pin can name.
		return stream.Frame{}, ErrUnknownMessage
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return stream.Frame{}, err
	}
	defer s.release(ss)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.catchUpLogLocked(ctx); err != nil {
		return stream.Frame{}, err
	}
	known := false
	for _, f := range ss.log.Frames() {
		known = known || f.Message == message
	}
	if !known {
		return stream.Frame{}, ErrUnknownMessage
	}
	spec := stream.Spec{Kind: stream.KindReaction, Message: message, Author: s.nameOf(id, who),
		Data: map[string]any{"message": message, "emoji": emoji, "on": on}}
	if pin {
		spec = stream.Spec{Kind: stream.KindPin, Message: message, Author: s.nameOf(id, who),
			Data: map[string]any{"message": message, "on": on}}
	}
	fs, err := ss.commit(ctx, []stream.Spec{spec}, nil, ss.pos)
	if err != nil || len(fs) != 1 {
		return stream.Frame{}, err
	}
	return fs[0], nil
}

// Presence sends who's presence (typing, or doing what) to every reader of session id, as an
// ephemeral frame: cursor 0, never logged. One within PresenceEvery of the author's last is
// dropped (sent false).
//
// Errors: loomtype.ErrNotFound, ErrBadPresence.
func (s *Service) Presence(ctx context.Context, who loomtype.Identity, id, state, doing string) (sent bool, err error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return false, err
	}
	if state != "typing" && state != "doing" || state == "doing" && doing == "" || state == "typing" && doing != "" || len(doing) > 280 {
		return false, ErrBadPresence
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return false, err
	}
	defer s.release(ss)
	now := s.cfg.Now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if last, ok := ss.presence[who.Key()]; ok && now.Sub(last) < PresenceEvery {
		return false, nil
	}
	if ss.presence == nil || len(ss.presence) > 1024 {
		ss.presence = map[string]time.Time{}
	}
	ss.presence[who.Key()] = now
	d := map[string]string{"who": s.nameOf(id, who), "state": state}
	if doing != "" {
		d["doing"] = doing
	}
	f, err := stream.EphemeralFrame(stream.Spec{Kind: stream.KindPresence, Author: s.nameOf(id, who), Data: d}, id, now)
	if err != nil {
		return false, err
	}
	ss.fanOutLocked(Item{Frame: f})
	return true, nil
}

// MarkRead stores who's read marker of session id (it only moves forward) and sends it, as an
// ephemeral read-marker frame, to who's own readers of the session alone.
//
// Errors: loomtype.ErrNotFound, ErrBadMarker, store errors.
func (s *Service) MarkRead(ctx context.Context, who loomtype.Identity, id string, upto int64) (int64, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return 0, err
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return 0, err
	}
	defer s.release(ss)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.catchUpLogLocked(ctx); err != nil {
		return 0, err
	}
	if upto < 0 || upto > ss.log.Head() {
		return 0, ErrBadMarker
	}
	cur, err := s.readMarker(ctx, who, id)
	if err != nil {
		return 0, err
	}
	if upto <= cur {
		return cur, nil
	}
	if err := s.k.Update(ctx, func(tx *kernel.Tx) error {
		return markers.Put(tx, readKey(who, id), upto)
	}); err != nil {
		return 0, err
	}
	f, err := stream.EphemeralFrame(stream.Spec{Kind: stream.KindReadMarker, Author: s.nameOf(id, who),
		Data: map[string]int64{"upto": upto}}, id, s.cfg.Now())
	if err != nil {
		return 0, err
	}
	ss.fanOutLocked(Item{Frame: f, only: who.Key()})
	return upto, nil
}

// ReadMarkerFrame is who's stored read marker of session id as the ephemeral frame a new
// connection of who's is sent after its replay; ok is false when who has none.
func (s *Service) ReadMarkerFrame(ctx context.Context, who loomtype.Identity, id string) (stream.Frame, bool, error) {
	n, err := s.readMarker(ctx, who, id)
	if err != nil || n == 0 {
		return stream.Frame{}, false, err
	}
	f, err := stream.EphemeralFrame(stream.Spec{Kind: stream.KindReadMarker, Author: s.nameOf(id, who),
		Data: map[string]int64{"upto": n}}, id, s.cfg.Now())
	return f, err == nil, err
}

func (s *Service) readMarker(ctx context.Context, who loomtype.Identity, id string) (int64, error) {
	n, _, err := markers.Get(ctx, s.k, readKey(who, id))
	return n, err
}

// readKey is the key of who's read marker of session id in its table.
func readKey(who loomtype.Identity, id string) string {
	k, _ := json.Marshal([]string{who.Key(), id})
	return string(k)
}

// fanOutLocked hands an ephemeral item to every subscriber.
func (ss *session) fanOutLocked(it Item) {
	for s := range ss.subs {
		if !s.push(it) {
			delete(ss.subs, s)
		}
	}
}

// For reports whether the item goes to viewer who at all (a read marker goes to its person's
// own connections alone).
func (it Item) For(who loomtype.Identity) bool { return it.only == "" || it.only == who.Key() }
