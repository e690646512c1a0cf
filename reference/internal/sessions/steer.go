package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// MaxQueued bounds the messages waiting in one session's queue; one more is a
// *loomtype.LimitError.
const MaxQueued = 16

// maxSettled bounds the taken-back and picked-up message ids a session remembers, so that a
// repeated send or take-back gets the same answer.
const maxSettled = 64

// Message states of the steering queue.
const (
	StateSent     = "sent"
	StateQueued   = "queued"
	StatePickedUp = "picked-up"
	StateCanceled = "cancelled"
)

// ErrPickedUp: a take-back of a message already picked up (it is the conversation's now).
var ErrPickedUp = errors.New("sessions: message already picked up")

// queued is one message of the steering queue.
type queued struct {
	Message string            `json:"message"`
	Text    string            `json:"text"`
	Who     loomtype.Identity `json:"who"`
	State   string            `json:"state"`
	Parent  string            `json:"parent,omitempty"`
}

// threadNote is a thread reply sent to the conversation whose record has not been projected
// yet: its message id (empty in a shared conversation, whose records keep none), its asker's
// identity key and its parent.
type threadNote struct {
	Message string `json:"message,omitempty"`
	Asker   string `json:"asker"`
	Parent  string `json:"parent"`
}

// maxThreadNotes bounds the thread notes a session keeps; the oldest go first.
const maxThreadNotes = 256

// queueRecord is the durable queue of a session: the messages waiting, in order, then the
// settled ones it remembers.
type queueRecord struct {
	Items    []queued `json:"items"`
	Awaiting string   `json:"awaiting,omitempty"` // a picked-up message whose record has not landed
	// Private are the newest private messages relayed, each stored once: the key of its sender
	// and message id (privateKey).
	Private []string `json:"private,omitempty"`
	// Threads are the thread replies sent whose records have not been projected yet.
	Threads []threadNote `json:"threads,omitempty"`
}

// Sent is what Send answers.
type Sent struct {
	MessageID string `json:"messageId"`
	State     string `json:"state"`
}

// ErrUnknownParent: a thread reply's parent is not a message the session's log holds.
var ErrUnknownParent = errors.New("sessions: no such parent message in the session")

// Send steers session id with who's message: sent as the conversation's next turn at once when
// the assistant is idle, queued (durably, shown as a queued user-message) while it works, and
// then sent at the next safe point, between turns. A repeated message id gets the answer of its
// first send.
//
// Errors: loomtype.ErrNotFound, *loomtype.LimitError (the queue is full), errors of
// conversation.SendTurn, store errors.
func (s *Service) Send(ctx context.Context, who loomtype.Identity, id, text, messageID string, mentions ...string) (Sent, error) {
	return s.SendThread(ctx, who, id, text, messageID, "", mentions...)
}

// SendThread is Send of a thread reply: parent ("" for none) is a message the session's log
// holds, a user-message's message or a reply's, and every user-message frame of the message
// carries it in its data, as do the text-delta and text-done frames of the reply that answers
// it. Nothing is logged or sent for a parent the log does not hold.
//
// Errors: those of Send, and ErrUnknownParent.
//
//	r, err := svc.SendThread(ctx, alice, "c1", "and pump 5?", "m4", "a:2")
func (s *Service) SendThread(ctx context.Context, who loomtype.Identity, id, text, messageID, parent string, mentions ...string) (Sent, error) {
	if !validMentions(mentions) {
		return Sent{}, ErrBadMentions
	}
	if err := s.authorize(ctx, who, id); err != nil {
		return Sent{}, err
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return Sent{}, err
	}
	defer s.release(ss)
	s.countPeople(ctx, ss, who)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.catchUpLogLocked(ctx); err != nil {
		return Sent{}, err
	}
	if parent != "" && !ss.holdsMessageLocked(parent) {
		return Sent{}, ErrUnknownParent
	}
	if r, ok := ss.repeatLocked(who, messageID); ok {
		return r, nil
	}
	sender := s.nameOf(id, who)
	if answers := stream.WhoAnswers(stream.RouteInput{Mentions: mentions, Default: Assistant,
		PreviousSpeaker: ss.lastSpeaker, Sender: sender}); !slices.Contains(answers, Assistant) {
		// Nobody here answers it (a person talking to a person, or another assistant named):
		// the message is the chat's, never a turn.
		return ss.chatOnlyLocked(ctx, who, messageID, text, parent, mentions)
	}
	if len(mentions) > 0 {
		defer func() { _ = ss.mentionLocked(ctx, who, messageID, mentions) }()
	}
	if !ss.workingLocked() {
		if messageID == "" {
			messageID = loomtype.NewErrorID()
		}
		noted := false
		if parent != "" {
			// The note is on disk before the send, so the record finds its parent whenever it
			// is projected, after a restart too.
			if noted, err = ss.noteThreadLocked(ctx, who, messageID, parent); err != nil {
				return Sent{}, err
			}
		}
		r, err := s.cv.SendTurn(ctx, who, id, text, conversation.SendOptions{MessageID: messageID})
		if noted && (err != nil || !r.Delivered) {
			// No record comes of this send (refused, or a repeat of one delivered before): a
			// note left behind would give its parent to the asker's next record.
			if derr := ss.dropThreadLocked(ctx, who, messageID); err == nil {
				err = derr
			}
		}
		if err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: r.MessageID, State: StateSent}, nil
	}
	if ss.waitingLocked() >= MaxQueued {
		return Sent{}, &loomtype.LimitError{Limit: "queued messages", Max: MaxQueued}
	}
	if messageID == "" {
		messageID = loomtype.NewErrorID()
	}
	q := ss.queue
	q.Items = append(append([]queued(nil), q.Items...), queued{Message: messageID, Text: text, Who: who, State: StateQueued, Parent: parent})
	spec := stream.Spec{Kind: stream.KindUserMessage, Message: messageID, Author: s.nameOf(id, who),
		Data: threadData(map[string]string{"message": messageID, "state": StateQueued, "text": text}, parent)}
	// In a shared conversation a waiting message's words are shown to its sender alone until
	// the conversation records them.
	g := guard{Live: true, AskerKey: who.Key()}
	if err := ss.commitQueue(ctx, []stream.Spec{spec}, q, g); err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: messageID, State: StateQueued}, nil
}

// repeatLocked answers again a message who sent under messageID ("" for none) that is still in
// the queue: its state, a message picked up reported as sent; false when there is none (ss.mu
// held).
func (ss *session) repeatLocked(who loomtype.Identity, messageID string) (Sent, bool) {
	if messageID != "" {
		for _, q := range ss.queue.Items {
			if q.Message == messageID && q.Who == who {
				st := q.State
				if st == StatePickedUp {
					st = StateSent
				}
				return Sent{MessageID: messageID, State: st}, true
			}
		}
	}
	return Sent{}, false
}

// Cancel takes back who's queued message. Taking back a message taken back before answers the
// same; one already picked up is ErrPickedUp; one that is not who's, or not known, is
// loomtype.ErrNotFound.
func (s *Service) Cancel(ctx context.Context, who loomtype.Identity, id, messageID string) (Sent, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return Sent{}, err
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return Sent{}, err
	}
	defer s.release(ss)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.catchUpLogLocked(ctx); err != nil {
		return Sent{}, err
	}
	for i, q := range ss.queue.Items {
		if q.Message != messageID || q.Who != who {
			continue
		}
		switch q.State {
		case StateCanceled:
			return Sent{MessageID: messageID, State: StateCanceled}, nil
		case StatePickedUp:
			return Sent{}, ErrPickedUp
		}
		nq := ss.queue
		nq.Items = append([]queued(nil), nq.Items...)
		nq.Items[i].State, nq.Items[i].Text = StateCanceled, ""
		spec := stream.Spec{Kind: stream.KindUserMessage, Message: messageID, Author: s.nameOf(id, who),
			Data: threadData(map[string]string{"message": messageID, "state": StateCanceled}, q.Parent)}
		if err := ss.commitQueue(ctx, []stream.Spec{spec}, nq); err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: messageID, State: StateCanceled}, nil
	}
	return Sent{}, loomtype.ErrNotFound
}

// workingLocked reports whether the assistant is working: a turn was asked and has no reply
// yet, or a picked-up message has not reached the conversation's record yet.
func (ss *session) workingLocked() bool {
	return ss.lastAskedTurn > ss.lastReplyTurn || ss.queue.Awaiting != ""
}

// commitQueue logs specs and stores q in one transaction.
func (ss *session) commitQueue(ctx context.Context, specs []stream.Spec, q queueRecord, guards ...guard) error {
	q.Items = settle(q.Items)
	ss.extraQueue = &q
	defer func() { ss.extraQueue = nil }()
	if _, err := ss.commit(ctx, specs, guards, ss.pos); err != nil {
		return err
	}
	ss.queue = q
	return nil
}

// settle keeps every waiting message and the newest settled ones.
func settle(items []queued) []queued {
	settled := 0
	for _, q := range items {
		if q.State != StateQueued {
			settled++
		}
	}
	out := make([]queued, 0, len(items))
	for _, q := range items {
		if q.State != StateQueued && settled > maxSettled {
			settled--
			continue
		}
		out = append(out, q)
	}
	return out
}

// pickUpLocked sends the first waiting message when the assistant is idle (the safe point
// between turns): its picked-up frame and the queue's new state commit first, then the message
// goes to the conversation with its own id, so a crash in between sends it once on recovery
// (the conversation drops a repeated message id).
func (ss *session) pickUpLocked(ctx context.Context) error {
	if ss.queue.Awaiting != "" {
		for _, q := range ss.queue.Items {
			if q.Message == ss.queue.Awaiting && q.State == StatePickedUp {
				return ss.sendPicked(ctx, q)
			}
		}
		return nil
	}
	if ss.workingLocked() {
		return nil
	}
	for i, q := range ss.queue.Items {
		if q.State != StateQueued {
			continue
		}
		nq := ss.queue
		nq.Items = append([]queued(nil), nq.Items...)
		nq.Items[i].State = StatePickedUp
		nq.Awaiting = q.Message
		spec := stream.Spec{Kind: stream.KindUserMessage, Message: q.Message, Author: ss.name(q.Who),
			Data: threadData(map[string]string{"message": q.Message, "state": StatePickedUp}, q.Parent)}
		if err := ss.commitQueue(ctx, []stream.Spec{spec}, nq); err != nil {
			return err
		}
		return ss.sendPicked(ctx, q)
	}
	return nil
}

// sendPicked sends a picked-up message to the conversation. One the conversation refuses for
// good (closed, gone, not this sender's any more) is no longer awaited.
func (ss *session) sendPicked(ctx context.Context, q queued) error {
	_, err := ss.svc.cv.SendTurn(ctx, q.Who, ss.id, q.Text, conversation.SendOptions{MessageID: q.Message})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, loomtype.ErrStoreClosed) {
		return err
	}
	nq := ss.queue
	nq.Awaiting = ""
	if cerr := ss.commitQueue(ctx, nil, nq); cerr != nil {
		return cerr
	}
	return err
}

// loadQueue reads session id's queue.
func (s *Service) loadQueue(ctx context.Context, id string) (queueRecord, error) {
	q, _, err := queues.Get(ctx, s.k, id)
	return q, err
}

// Errors of Stop.
var (
	// ErrIdle: nothing runs in the session, so there is nothing to stop.
	ErrIdle = errors.New("sessions: the assistant is idle")
	// ErrNoCheckpoints: a turn runs, but without abort checkpoints (conversation.bargeIn is
	// off), so it cannot be stopped before it ends.
	ErrNoCheckpoints = errors.New("sessions: the running turn has no abort checkpoints")
)

// Stop stops the running turn of session id: status {stopping: true} is logged, durably, before
// the turn is interrupted at its next checkpoint (its reply is recorded interrupted, with the
// text so far). Waiting messages stay queued and are picked up when the turn ends. In a shared
// conversation only the turn's asker may stop it.
//
// Errors: loomtype.ErrNotFound, ErrIdle, ErrNoCheckpoints, store errors.
//
//	turn, err := svc.Stop(ctx, alice, "c1")
func (s *Service) Stop(ctx context.Context, who loomtype.Identity, id string) (int64, error) {
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
	// A turn left open by a restart has its stopper once its conversation runs again.
	if err := s.cv.Live(ctx, id); err != nil {
		return 0, err
	}
	turn, asker, fire, ok := s.cv.Hub().Stopper(id)
	noCheckpoints := !ok && ss.lastAskedTurn > ss.lastReplyTurn
	if noCheckpoints {
		asker = ss.lastAsker
	}
	// In a shared conversation only the running turn's asker may stop it; anyone else gets the
	// uniform 404 whether or not the turn has checkpoints, so a stop tells a non-asker nothing.
	if (noCheckpoints || ok && turn > ss.lastReplyTurn) && asker != who.Key() {
		st, err := s.cv.Status(ctx, who, id)
		if err != nil {
			return 0, err
		}
		if st.Mode == conversation.ModeShared {
			return 0, loomtype.ErrNotFound
		}
	}
	switch {
	case noCheckpoints:
		return 0, ErrNoCheckpoints
	case !ok || turn <= ss.lastReplyTurn:
		return 0, ErrIdle
	}
	spec := stream.Spec{Kind: stream.KindStatus, Turn: turn, Data: map[string]bool{"stopping": true}}
	if _, err := ss.commit(ctx, []stream.Spec{spec}, nil, ss.pos); err != nil {
		return 0, err
	}
	fire()
	return turn, nil
}

// waitingLocked counts the messages waiting in the queue.
func (ss *session) waitingLocked() int {
	n := 0
	for _, q := range ss.queue.Items {
		if q.State == StateQueued {
			n++
		}
	}
	return n
}

// Resume opens the service's record tables, moving into them what a store written before them
// holds (records.go), starts the sessions whose steering queue holds a message waiting or one
// picked up and not yet recorded, so that they are sent after a restart whether or not anyone
// reads the stream, and starts the resume wait (Config.ResumeWait) of every turn the stream
// shows asked and unanswered. The engine calls it once, when it opens, before serving.
//
// Errors: *kernel.TableVersionError (a store a newer engine wrote), *kernel.RecordError (a
// stored record that does not decode: the store is damaged), store errors.
func (s *Service) Resume(ctx context.Context) error {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	if err := s.resumeWaits(ctx); err != nil {
		return err
	}
	rows, err := queues.All(ctx, s.k, "")
	if err != nil {
		return err
	}
	for _, row := range rows {
		q := row.Value
		busy := q.Awaiting != ""
		for _, it := range q.Items {
			busy = busy || it.State == StateQueued
		}
		if !busy {
			continue
		}
		ss, err := s.acquire(ctx, row.Key)
		if err != nil {
			return err
		}
		s.release(ss)
	}
	return nil
}

// maxPrivateIDs bounds the private message ids a session remembers, so that a private message
// sent again under its id is stored once.
const maxPrivateIDs = 256

// SendPrivate relays who's private message to session id: a user-message carrying enc as it
// came (never a text), stored once per sender and message id, never sent to an assistant and
// never read. The same sender sending the same message id again answers the same and stores
// nothing; another person's message under that id is a message of its own.
//
// Errors: loomtype.ErrNotFound, the errors of stream.ValidateUserMessage (a bad enc), store
// errors.
//
//	r, err := svc.SendPrivate(ctx, alice, "c1", "m9", stream.Enc{Alg: "mls-1", Kid: "k7", CT: "AAEC"})
func (s *Service) SendPrivate(ctx context.Context, who loomtype.Identity, id, messageID string, enc stream.Enc) (Sent, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return Sent{}, err
	}
	if messageID == "" {
		messageID = loomtype.NewErrorID()
	}
	data := map[string]any{"message": messageID, "state": StateSent, "enc": enc}
	b, _ := json.Marshal(data)
	if err := stream.ValidateUserMessage(b); err != nil {
		return Sent{}, err
	}
	ss, err := s.acquire(ctx, id)
	if err != nil {
		return Sent{}, err
	}
	defer s.release(ss)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.catchUpLogLocked(ctx); err != nil {
		return Sent{}, err
	}
	key := privateKey(who, messageID)
	for _, m := range ss.queue.Private {
		if m == key {
			return Sent{MessageID: messageID, State: StateSent}, nil
		}
	}
	q := ss.queue
	q.Private = append(append([]string(nil), q.Private...), key)
	if n := len(q.Private) - maxPrivateIDs; n > 0 {
		q.Private = q.Private[n:]
	}
	spec := stream.Spec{Kind: stream.KindUserMessage, Message: messageID, Author: s.nameOf(id, who), Data: data}
	if err := ss.commitQueue(ctx, []stream.Spec{spec}, q); err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: messageID, State: StateSent}, nil
}

// Assistant is how the stream names this engine's one assistant.
const Assistant = "assistant:loom"

// MaxMentions bounds the mentions of one message.
const MaxMentions = 16

// ErrBadMentions: more than MaxMentions mentions, or one that is not person:<id> or
// assistant:<id>.
var ErrBadMentions = errors.New("sessions: bad mentions")

func validMentions(ms []string) bool {
	if len(ms) > MaxMentions {
		return false
	}
	for _, m := range ms {
		_, rest, ok := strings.Cut(m, ":")
		if !ok || rest == "" || len(m) > 140 || !strings.HasPrefix(m, "person:") && !strings.HasPrefix(m, "assistant:") {
			return false
		}
	}
	return true
}

// chatOnlyLocked logs a message nobody here answers: a user-message the conversation never
// sees, then its mentions.
func (ss *session) chatOnlyLocked(ctx context.Context, who loomtype.Identity, messageID, text, parent string, mentions []string) (Sent, error) {
	if messageID == "" {
		messageID = loomtype.NewErrorID()
	}
	for _, f := range ss.log.Frames() {
		if f.Message == messageID && f.Kind() == stream.KindUserMessage && f.Author == ss.name(who) {
			return Sent{MessageID: messageID, State: StateSent}, nil
		}
	}
	specs := []stream.Spec{{Kind: stream.KindUserMessage, Message: messageID, Author: ss.name(who),
		Data: threadData(map[string]string{"message": messageID, "state": StateSent, "text": text}, parent)}}
	if len(mentions) > 0 {
		specs = append(specs, mentionSpec(ss.name(who), messageID, mentions))
	}
	if _, err := ss.commit(ctx, specs, nil, ss.pos); err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: messageID, State: StateSent}, nil
}

func mentionSpec(author string, messageID string, mentions []string) stream.Spec {
	return stream.Spec{Kind: stream.KindMention, Message: messageID, Author: author,
		Data: map[string]any{"message": messageID, "who": mentions}}
}

// mentionLocked logs the mentions of a message sent to the assistant.
func (ss *session) mentionLocked(ctx context.Context, who loomtype.Identity, messageID string, mentions []string) error {
	_, err := ss.commit(ctx, []stream.Spec{mentionSpec(ss.name(who), messageID, mentions)}, nil, ss.pos)
	return err
}

// Errors of Edit.
var (
	// ErrNoKey: an edit or retry without an idempotency key.
	ErrNoKey = errors.New("sessions: an edit or retry needs an idempotency key")
	// ErrBadText: an edit's text is blank or longer than the conversation takes.
	ErrBadText = errors.New("sessions: bad text")
)

// editWindow is how far back (in history entries) an edit or retry looks for its message.
const editWindow = 500

// Edit re-asks who's own earlier message of session id: with text in its place (an edit), or as
// it was (retry, text empty). It checks first that the conversation will take it (the message is
// who's own accepted message, the text is one the conversation accepts), then sends it under key,
// so a repeated key sends nothing more. Only a person's own message can be edited.
//
// Errors: loomtype.ErrNotFound (no such message of who's), conversation.ErrDelegation (a
// delegated caller: editing is a person's own act), ErrNoKey, ErrBadText, errors of
// conversation.SendTurn.
//
//	r, err := svc.Edit(ctx, alice, "c1", "m1", "check pump 5 instead", "edit-1")
func (s *Service) Edit(ctx context.Context, who loomtype.Identity, id, message, text, key string) (Sent, error) {
	if err := s.authorize(ctx, who, id); err != nil {
		return Sent{}, err
	}
	if who.OnBehalfOf != "" {
		return Sent{}, conversation.ErrDelegation // a person's own act, never a delegate's
	}
	if key == "" {
		return Sent{}, ErrNoKey
	}
	p, err := s.cv.History(ctx, who, id, conversation.HistoryOptions{Direction: "backward", Limit: editWindow})
	if err != nil {
		return Sent{}, err
	}
	var target *loomtype.Entry
	for i := range p.Entries {
		e := p.Entries[i]
		if e.Role == loomtype.RoleUser && e.Status == loomtype.StatusAccepted && stream.UserMessage(e) == message &&
			e.Asker != nil && e.Asker.Equal(who) {
			target = &e
			break
		}
	}
	if target == nil {
		return Sent{}, loomtype.ErrNotFound
	}
	if text == "" && target.Text != nil {
		text = *target.Text
	}
	if strings.TrimSpace(text) == "" || len([]rune(text)) > s.cv.Config().MaxTurnChars {
		return Sent{}, ErrBadText
	}
	r, err := s.cv.SendTurn(ctx, who, id, text, conversation.SendOptions{MessageID: key, EditOf: target.Ord})
	if err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: r.MessageID, State: StateSent}, nil
}
