package stream

import (
	"strconv"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// EventKind is what happened in a conversation, as the adapter reads it.
type EventKind string

// The events the adapter reads.
const (
	// EventRecord is a durable transcript record (Event.Entry).
	EventRecord EventKind = "record"
	// EventDelta is a piece of a reply's live text (Event.Text).
	EventDelta EventKind = "delta"
	// EventRestart says a turn is being produced again after a restart: its text so far is void.
	EventRestart EventKind = "restart"
	// EventQueued is a message sent while the assistant works, waiting (Event.Message, Text).
	EventQueued EventKind = "queued"
	// EventPickedUp is a queued message taken at a safe point (Event.Message).
	EventPickedUp EventKind = "picked-up"
	// EventUnqueued is a queued message its sender took back (Event.Message).
	EventUnqueued EventKind = "unqueued"
	// EventStopping is a stop asked for the turn (Event.Turn).
	EventStopping EventKind = "stopping"
	// EventToolStarted and EventToolFinished bracket a tool call (Event.Call, Tool; for the
	// finish OK, Result (the tool's result, made a block by BlockOf), else Text, and People).
	EventToolStarted  EventKind = "tool-started"
	EventToolFinished EventKind = "tool-finished"
	// EventPrivate is a private (encrypted) message (Event.Message, Enc, State; "sent" when
	// State is empty): relayed as it came, never read.
	EventPrivate EventKind = "private"
)

// Event is one input of the adapter.
type Event struct {
	Kind    EventKind
	Turn    int64
	Entry   *loomtype.Entry
	Text    string
	Message string
	Author  string
	Call    string
	Tool    string
	OK      bool
	// Result is a finished tool's result as the tool gave it; when empty, Text is the result.
	Result []byte
	// People is how many persons the chat has (0 is taken as one); a terminal, diff or files
	// block in a chat of more than one says so (NoteShared).
	People int
	// Enc is a private message's ciphertext and the names of its algorithm and key.
	Enc *Enc
	// State is a private message's state.
	State string
	// Parent is the message a thread reply answers ("": none): on a user message's events it is
	// that message's parent; on a reply's delta or record it is the parent of the message the
	// reply answers, so the reply is drawn in the same thread.
	Parent string
}

// Adapter turns a conversation's events into frame specs. It remembers only which turns have
// streamed text, so that a reply the stream never saw streaming (a seed from stored history, a
// turn replayed from the journal) still shows its text before its end.
//
// Not safe for concurrent use; Apply is pure apart from that memory.
//
//	a := stream.NewAdapter()
//	for _, spec := range a.Apply(stream.Event{Kind: stream.EventDelta, Turn: 1, Text: "Hi"}) { log.Append(spec, now) }
type Adapter struct {
	streamed map[int64]bool
}

// NewAdapter returns an adapter with no turn streamed yet.
func NewAdapter() *Adapter { return &Adapter{streamed: map[int64]bool{}} }

// ReplyMessage is the message id of turn's reply: "a:" and the turn.
func ReplyMessage(turn int64) string { return "a:" + strconv.FormatInt(turn, 10) }

// UserMessage is the message id of a user record: its own message id, else "u:" and its ord.
func UserMessage(e loomtype.Entry) string {
	if e.MessageID != "" {
		return e.MessageID
	}
	return "u:" + strconv.FormatInt(e.Ord, 10)
}

// Apply returns the frame specs of ev, in the order they are logged (none for an event the
// stream does not show).
func (a *Adapter) Apply(ev Event) []Spec {
	switch ev.Kind {
	case EventRecord:
		if ev.Entry == nil {
			return nil
		}
		return a.record(*ev.Entry, ev.Parent)
	case EventDelta:
		if ev.Text == "" {
			return nil
		}
		a.streamed[ev.Turn] = true
		return []Spec{{Kind: KindTextDelta, Turn: ev.Turn, Message: ReplyMessage(ev.Turn), Author: ev.Author,
			Data: withParent(map[string]string{"text": ev.Text}, ev.Parent)}}
	case EventRestart:
		delete(a.streamed, ev.Turn)
		return []Spec{{Kind: KindStatus, Turn: ev.Turn, Data: map[string]any{"state": "restarted", "message": ReplyMessage(ev.Turn)}}}
	case EventQueued:
		return []Spec{userState(ev, "queued", ev.Text)}
	case EventPickedUp:
		return []Spec{userState(ev, "picked-up", "")}
	case EventUnqueued:
		return []Spec{userState(ev, "cancelled", "")}
	case EventStopping:
		return []Spec{{Kind: KindStatus, Turn: ev.Turn, Data: map[string]bool{"stopping": true}}}
	case EventToolStarted:
		return []Spec{{Kind: KindToolStarted, Turn: ev.Turn, Corr: ev.Call, Data: map[string]string{"call": ev.Call, "tool": ev.Tool}}}
	case EventToolFinished:
		b := textBlock(ev.Text)
		if len(ev.Result) > 0 {
			b = BlockOf(ev.Tool, ev.Result)
		}
		return []Spec{{Kind: KindToolFinished, Turn: ev.Turn, Corr: ev.Call, Data: map[string]any{
			"call": ev.Call, "tool": ev.Tool, "ok": ev.OK, "block": NoteShared(b, ev.People)}}}
	case EventPrivate:
		if ev.Enc == nil {
			return nil
		}
		state := ev.State
		if state == "" {
			state = "sent"
		}
		d := map[string]any{"message": ev.Message, "state": state, "enc": *ev.Enc}
		if ev.Parent != "" {
			d["parent"] = ev.Parent
		}
		return []Spec{{Kind: KindUserMessage, Turn: ev.Turn, Message: ev.Message, Author: ev.Author, Data: d}}
	}
	return nil
}

func userState(ev Event, state, text string) Spec {
	d := withParent(map[string]string{"message": ev.Message, "state": state}, ev.Parent)
	if text != "" {
		d["text"] = text
	}
	return Spec{Kind: KindUserMessage, Turn: ev.Turn, Message: ev.Message, Author: ev.Author, Data: d}
}

// FailedNote is the note of the text-cut frame that drops what a failed reply streamed.
const FailedNote = "the reply failed; what it streamed is not kept"

// MaxBlockText bounds the text of a text block, the degraded form of a result the stream has no
// block for.
const MaxBlockText = 280

func textBlock(s string) Block {
	n := 0
	for i := range s {
		if n == MaxBlockText {
			s = s[:i] + "…"
			break
		}
		n++
	}
	return Block{"kind": "text", "text": s}
}

// withParent adds a thread reply's parent to a frame's data (none when parent is empty).
func withParent(d map[string]string, parent string) map[string]string {
	if parent != "" {
		d["parent"] = parent
	}
	return d
}

func (a *Adapter) record(e loomtype.Entry, parent string) []Spec {
	author := ""
	if e.Asker != nil && e.Role == loomtype.RoleUser {
		author = "person:" + e.Asker.Actor
	}
	text := ""
	if e.Text != nil {
		text = *e.Text
	}
	switch e.Role {
	case loomtype.RoleUser:
		d := withParent(map[string]string{"message": UserMessage(e), "state": "sent", "text": text}, parent)
		if e.Status == loomtype.StatusRejected {
			d["state"], d["reason"] = "rejected", string(e.Reason)
			delete(d, "text")
		}
		return []Spec{{Kind: KindUserMessage, Turn: e.Turn, Corr: e.Cursor, Message: UserMessage(e), Author: author, Data: d}}
	case loomtype.RoleAssistant:
		msg := ReplyMessage(e.Turn)
		var out []Spec
		if !a.streamed[e.Turn] && text != "" {
			out = append(out, Spec{Kind: KindTextDelta, Turn: e.Turn, Message: msg, Data: withParent(map[string]string{"text": text}, parent)})
		}
		if a.streamed[e.Turn] && e.Status == loomtype.StatusFailed {
			// What streamed is not the reply: a reader drops it (its provisional tail too).
			out = append(out, Spec{Kind: KindTextCut, Turn: e.Turn, Message: msg,
				Data: map[string]string{"message": msg, "note": FailedNote}})
		}
		delete(a.streamed, e.Turn)
		d := withParent(map[string]string{"status": string(e.Status), "text": text}, parent)
		if e.Reason != "" {
			d["reason"] = string(e.Reason)
		}
		return append(out, Spec{Kind: KindTextDone, Turn: e.Turn, Corr: e.Cursor, Message: msg, Data: d})
	case loomtype.RoleSystem:
		return []Spec{{Kind: KindStatus, Turn: e.Turn, Corr: e.Cursor, Data: map[string]string{"state": string(e.Status)}}}
	}
	return nil
}
