// Package stream is the session stream's pure core: the frame a screen reads, the adapter that
// turns a conversation's events into frame specs, and the bounded, gapless frame log that gives
// each frame its cursor and serves replays.
//
// Nothing here does I/O or reads a clock: the caller passes the time of every append, so the
// same inputs give the same frames (the transcripts in testdata say which). The log is a resume
// buffer, never the record: the conversation's journal is.
//
// A frame's cursor is per session and gapless from 1. Control frames (reset, heartbeat) and
// ephemeral frames have cursor 0 and are never logged. A replay may merge a run of adjacent text
// deltas of one message and one author into a single frame with Span > 1 and data.parts; a live
// frame is never merged.
package stream

import (
	"encoding/json"
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
)

// The control kinds: cursor 0, never logged.
const (
	KindReset     Kind = "reset"
	KindHeartbeat Kind = "heartbeat"
)

// Logged reports whether frames of kind k take a cursor and are kept in the log.
func (k Kind) Logged() bool {
	switch k {
	case KindTextDelta, KindTextDone, KindToolStarted, KindToolProgress, KindToolFinished, KindTermChunk,
		KindTermCommand, KindFileChanged, KindAsk, KindAskAnswered, KindUserMessage, KindStatus:
		return true
	}
	return false
}

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
	Span    int             `json:"span,omitempty"`
	Author  string          `json:"author,omitempty"`
	ActsFor string          `json:"acts_for,omitempty"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data"`
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
	Data    any
}

// frame makes the frame of spec at cursor cur of session, written at t.
func (s Spec) frame(session string, cur int64, t time.Time) Frame {
	data, err := json.Marshal(s.Data)
	if err != nil || s.Data == nil {
		data = json.RawMessage("{}")
	}
	return Frame{V: Version, ID: session + ":" + strconv.FormatInt(cur, 10), Cur: cur, Session: session,
		Turn: s.Turn, Type: s.Kind.Type(), Time: t.UTC().Format(time.RFC3339Nano), Corr: s.Corr,
		Author: s.Author, ActsFor: s.ActsFor, Message: s.Message, Data: data}
}

// Control returns a control frame (reset or heartbeat) of session: cursor 0, never logged.
//
//	f := stream.Control(stream.KindReset, "c1", t, map[string]int64{"floor": 40, "head": 90})
func Control(k Kind, session string, t time.Time, data any) Frame {
	f := Spec{Kind: k, Data: data}.frame(session, 0, t)
	f.ID = session + ":" + string(k)
	return f
}
