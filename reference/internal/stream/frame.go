// Package stream is the session stream's pure core: the frame a screen reads, the adapter that
// turns a conversation's events into frame specs, and the bounded, gapless frame log that gives
// each frame its cursor and serves replays. Beside them: a tool result's block (BlockOf,
// NoteShared), a frame as one viewer receives it (Render, AssertAskerCanRead), who answers a
// message in a chat (WhoAnswers), retention (Expire) and private messages (ValidateUserMessage,
// IsEncrypted, LoggedShape).
//
// The conversation's own event stream (GET /conversations/{id}/events) has its pure core here too:
// ConvAdapter turns its status, durable records, the reply in progress and live events into typed
// events (ConvEvent), pinned by the transcripts in testdata/events. Both streams are driven by one
// follow loop, Follow: admission done, it sends what a stream starts with, then each live item,
// wake-up and poll, with heartbeats, a bounded lifetime, re-authorization and the server's
// shutdown, until one of them ends the stream (Ending); a transport encodes the events.
//
// Nothing here but Follow does I/O or reads a clock: the caller passes the time of every append,
// so the same inputs give the same frames (the transcripts in testdata say which). The log is a
// resume buffer, never the record: the conversation's journal is.
//
// A frame's cursor is per session and gapless from 1. Control frames (reset, heartbeat) and
// ephemeral frames have cursor 0 and are never logged. A replay may merge a run of adjacent text
// deltas of one message and one author into a single frame with Span > 1 and data.parts; a live
// frame is never merged.
package stream

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// Version is the frame shape's version, the v of every frame.
const Version = 1

// Kind is what a frame says, without the "session." prefix its type carries.
type Kind string

// The logged kinds.
const (
	KindTextDelta    Kind = "text-delta"
	KindTextDone     Kind = "text-done"
	KindToolStarted  Kind = "tool-started"
	KindToolProgress Kind = "tool-progress"
	KindToolFinished Kind = "tool-finished"
	KindTermChunk    Kind = "term-chunk"
	KindTermCommand  Kind = "term-command"
	KindFileChanged  Kind = "file-changed"
	KindAsk          Kind = "ask"
	KindAskAnswered  Kind = "ask-answered"
	KindUserMessage  Kind = "user-message"
	KindStatus       Kind = "status"

	// The group-chat kinds.
	KindParticipantJoined Kind = "participant-joined"
	KindParticipantLeft   Kind = "participant-left"
	KindReaction          Kind = "reaction"
	KindPin               Kind = "pin"
	KindMention           Kind = "mention"
	KindFanout            Kind = "fanout"
	KindFanoutKeep        Kind = "fanout-keep"
	KindTextCut           Kind = "text-cut"
)

// The ephemeral kinds: cursor 0, never logged, never replayed, delivered as they come.
const (
	KindPresence   Kind = "presence"
	KindReadMarker Kind = "read-marker"
)

// KindHidden is how a logged frame a viewer may not see is drawn for that viewer: the frame's
// cursor, id, session, turn and time, and empty data (Hidden). It is never logged itself.
const KindHidden Kind = "hidden"

// The control kinds: cursor 0, never logged.
const (
	KindReset     Kind = "reset"
	KindHeartbeat Kind = "heartbeat"
)

// Logged reports whether frames of kind k take a cursor and are kept in the log.
func (k Kind) Logged() bool {
	switch k {
	case KindTextDelta, KindTextDone, KindToolStarted, KindToolProgress, KindToolFinished, KindTermChunk,
		KindTermCommand, KindFileChanged, KindAsk, KindAskAnswered, KindUserMessage, KindStatus,
		KindParticipantJoined, KindParticipantLeft, KindReaction, KindPin, KindMention, KindFanout,
		KindFanoutKeep, KindTextCut:
		return true
	}
	return false
}

// Ephemeral reports whether frames of kind k are ephemeral: cursor 0, never logged or replayed,
// and never moving a reader's last cursor (presence, read-marker).
func (k Kind) Ephemeral() bool { return k == KindPresence || k == KindReadMarker }

// Type is the frame type of kind k: "session." and the kind.
func (k Kind) Type() string { return "session." + string(k) }

// Frame is one frame of a session's stream, as it goes on the wire.
type Frame struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	Cur     int64  `json:"cur"`
	Session string `json:"session"`
	Turn    int64  `json:"turn,omitempty"`
	Type    string `json:"type"`
	Time    string `json:"time"`
	Corr    string `json:"corr,omitempty"`
	// Span is how many cursors a merged replay frame covers (cur-span+1 to cur); absent for one.
	Span    int    `json:"span,omitempty"`
	Author  string `json:"author,omitempty"`
	ActsFor string `json:"acts_for,omitempty"`
	Message string `json:"message,omitempty"`
	// Rid is the id of the reply handle the assistant put the frame into the room with
	// (HandleID of its turn), and Ver the room version at which that handle opened (Room); both
	// are absent on a frame of a person, a status, a control, ephemeral or hidden frame, and on a
	// frame logged before reply handles existed.
	Rid  string          `json:"rid,omitempty"`
	Ver  int64           `json:"ver,omitempty"`
	Data json.RawMessage `json:"data"`
	// Expired marks a frame whose data the retention rule emptied (Expire); it keeps its cursor.
	Expired bool `json:"expired,omitempty"`
}

// Kind is the frame's kind (its type without the prefix).
func (f Frame) Kind() Kind {
	const p = "session."
	if len(f.Type) > len(p) && f.Type[:len(p)] == p {
		return Kind(f.Type[len(p):])
	}
	return ""
}

// First is the first cursor the frame covers.
func (f Frame) First() int64 {
	if f.Span > 1 {
		return f.Cur - int64(f.Span) + 1
	}
	return f.Cur
}

// Spec is a frame before the log gives it a cursor, an id and a time: what the adapter makes.
type Spec struct {
	Kind    Kind
	Turn    int64
	Corr    string
	Author  string
	ActsFor string
	Message string
	// Rid and Ver are the frame's reply handle and the room version it opened at (Frame).
	Rid  string
	Ver  int64
	Data any
}

// frame makes the frame of spec at cursor cur of session, written at t.
func (s Spec) frame(session string, cur int64, t time.Time) Frame {
	data, err := json.Marshal(s.Data)
	if err != nil || s.Data == nil {
		data = json.RawMessage("{}")
	}
	return Frame{V: Version, ID: session + ":" + strconv.FormatInt(cur, 10), Cur: cur, Session: session,
		Turn: s.Turn, Type: s.Kind.Type(), Time: t.UTC().Format(time.RFC3339Nano), Corr: s.Corr,
		Author: s.Author, ActsFor: s.ActsFor, Message: s.Message, Rid: s.Rid, Ver: s.Ver, Data: data}
}

// Control returns a control frame (reset or heartbeat) of session: cursor 0, never logged.
//
//	f := stream.Control(stream.KindReset, "c1", t, map[string]int64{"floor": 40, "head": 90})
func Control(k Kind, session string, t time.Time, data any) Frame {
	f := Spec{Kind: k, Data: data}.frame(session, 0, t)
	f.ID = session + ":" + string(k)
	return f
}

// ErrNotEphemeral is returned by EphemeralFrame for a spec of a kind that is not ephemeral.
var ErrNotEphemeral = errors.New("stream: kind is not ephemeral")

// EphemeralFrame returns the frame of an ephemeral spec (presence, read-marker) of session, made
// at t: cursor 0, an id of the session, the kind, the author and t, so that two frames of one
// author at one instant share an id. It is handed to the connections as it is and never logged.
//
// Errors: ErrNotEphemeral for any other kind.
//
//	f, err := stream.EphemeralFrame(stream.Spec{Kind: stream.KindPresence, Author: "person:alice", Data: map[string]string{"who": "person:alice", "state": "typing"}}, "c1", now)
func EphemeralFrame(s Spec, session string, t time.Time) (Frame, error) {
	if !s.Kind.Ephemeral() {
		return Frame{}, ErrNotEphemeral
	}
	f := s.frame(session, 0, t)
	f.ID = session + ":" + string(s.Kind) + ":" + s.Author + ":" + strconv.FormatInt(t.UnixNano(), 10)
	return f, nil
}

// Hidden is frame f as a viewer who may not see it receives it: type session.hidden, the same
// cursor, span, id, session, turn and time, and data {}; nothing else of f is kept. f itself is
// not changed.
//
//	h := stream.Hidden(f) // h.Cur == f.Cur, string(h.Data) == "{}"
func Hidden(f Frame) Frame {
	return Frame{V: f.V, ID: f.ID, Cur: f.Cur, Span: f.Span, Session: f.Session, Turn: f.Turn,
		Type: KindHidden.Type(), Time: f.Time, Data: json.RawMessage("{}")}
}
