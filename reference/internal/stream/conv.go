package stream

import (
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// ConvKind is the kind of one event of a conversation's event stream (GET
// /conversations/{id}/events); String is its name on the wire.
type ConvKind uint8

// The events of a conversation's event stream.
const (
	// ConvStatus opens the stream: the conversation's status (ConvEvent.Status).
	ConvStatus ConvKind = iota + 1
	// ConvMessage is a durable record as its reader may see it (Entry), with its cursor as id.
	ConvMessage
	// ConvPartial is the text a running reply had when the reader attached (Turn, Text).
	ConvPartial
	// ConvDelta is a piece of a running reply's text (Turn, Text).
	ConvDelta
	// ConvReset says a turn is produced again after a restart: its text so far is void (Turn).
	ConvReset
	// ConvClosed says the conversation closed; the stream ends after it.
	ConvClosed
	// ConvReconnect ends the stream and asks the reader to reconnect (Reason).
	ConvReconnect
	// ConvError ends the stream with an error (Reason, and ErrorID for damaged storage).
	ConvError
	// ConvKeepAlive is a comment that keeps an idle connection open.
	ConvKeepAlive
)

var convNames = [...]string{"", "status", "message", "partial", "delta", "reset", "closed", "reconnect", "error", "keep-alive"}

// String is the event's name on the wire.
func (k ConvKind) String() string {
	if int(k) < len(convNames) {
		return convNames[k]
	}
	return ""
}

// ConvEvent is one event of a conversation's event stream.
type ConvEvent struct {
	Kind ConvKind
	// ID is a message's cursor: the reader resumes after it.
	ID     string
	Status loomtype.Status
	Entry  loomtype.Entry
	Turn   int64
	Text   string
	// Reason is why the stream reconnects, or its error.
	Reason  string
	ErrorID string
}

type turnText struct {
	Turn int64  `json:"turn"`
	Text string `json:"text"`
}

// Data is what the event carries, as its data line holds it in JSON (nil for a keep-alive).
func (e ConvEvent) Data() any {
	switch e.Kind {
	case ConvStatus:
		return e.Status
	case ConvMessage:
		return e.Entry
	case ConvPartial, ConvDelta:
		return turnText{Turn: e.Turn, Text: e.Text}
	case ConvReset:
		return map[string]int64{"turn": e.Turn}
	case ConvClosed:
		return struct{}{}
	case ConvReconnect:
		return map[string]string{"reason": e.Reason}
	case ConvError:
		if e.ErrorID != "" {
			return map[string]string{"error": e.Reason, "errorId": e.ErrorID}
		}
		return map[string]string{"error": e.Reason}
	}
	return nil
}

// ConvAdapter turns what a conversation's event stream reads (its status, durable records, the
// reply in progress and live events) into the events its reader is sent. It does no I/O and
// reads no clock: the stream reads the records and asks whether the reader may see each
// (ConvAdapter.Record takes the record as the reader may see it). It remembers the stream's
// cursor, the last turn whose durable reply went out (live output of that turn or an earlier one
// is superseded) and whether the conversation closed. Not safe for concurrent use.
//
//	a := stream.NewConvAdapter(bob.Key(), from)
//	evs := a.Begin(status)
//	evs = append(evs, a.Partial(attached.Reply)...)
type ConvAdapter struct {
	who           string
	shared        bool
	cursor        loomtype.Cursor
	lastReplyTurn int64
	closed        bool
}

// NewConvAdapter returns the adapter of a stream read by the principal whose identity key is
// who, resuming after from (the zero cursor: from the start).
func NewConvAdapter(who string, from loomtype.Cursor) *ConvAdapter {
	return &ConvAdapter{who: who, cursor: from}
}

// Cursor is where the stream stands: the next read starts after it.
func (a *ConvAdapter) Cursor() loomtype.Cursor { return a.cursor }

// Closed reports whether the stream sent the conversation's closing record.
func (a *ConvAdapter) Closed() bool { return a.closed }

// Begin opens the stream with the conversation's status; its mode says who may watch a turn's
// live output.
func (a *ConvAdapter) Begin(st loomtype.Status) []ConvEvent {
	a.shared = st.Mode == loomtype.ModeShared
	return []ConvEvent{{Kind: ConvStatus, Status: st}}
}

// Record sends the durable record e, as view (what the reader may see of it), and moves the
// cursor past it; a closing record ends the stream with a closed event. It fails, sending
// nothing, when e's cursor does not parse.
func (a *ConvAdapter) Record(e, view loomtype.Entry) ([]ConvEvent, error) {
	at, err := loomtype.ParseCursor(e.Cursor)
	if err != nil {
		return nil, err
	}
	evs := []ConvEvent{{Kind: ConvMessage, ID: e.Cursor, Entry: view}}
	a.cursor = at
	if e.Role == loomtype.RoleAssistant && e.Turn > a.lastReplyTurn {
		a.lastReplyTurn = e.Turn
	}
	if e.Status == loomtype.StatusClosed {
		a.closed = true
		evs = append(evs, ConvEvent{Kind: ConvClosed})
	}
	return evs, nil
}

// ReadTo moves the cursor to next, where a read of the records ended.
func (a *ConvAdapter) ReadTo(next loomtype.Cursor) { a.cursor = next }

// Partial sends the reply in progress when the stream attached, unless the records already sent
// hold its durable reply or the reader may not watch it; one produced again after a restart is
// preceded by a reset.
func (a *ConvAdapter) Partial(r live.Reply) []ConvEvent {
	if r.Turn <= a.lastReplyTurn || !a.mayWatch(r.Asker) {
		return nil
	}
	var evs []ConvEvent
	if r.Rerun {
		evs = append(evs, ConvEvent{Kind: ConvReset, Turn: r.Turn})
	}
	return append(evs, ConvEvent{Kind: ConvPartial, Turn: r.Turn, Text: r.Text})
}

// HoldBack says which records go before the live events evs: those committed before the text
// was made, up to (not including) the reply of the first turn evs carry text of, which was
// written after it. It returns nil when evs carry no text.
func (a *ConvAdapter) HoldBack(evs []live.Event) (before func(loomtype.Entry) bool) {
	for _, ev := range evs {
		if ev.Kind == live.KindDelta {
			t := ev.Turn
			return func(e loomtype.Entry) bool { return e.Role == loomtype.RoleAssistant && e.Turn >= t }
		}
	}
	return nil
}

// Live sends the live events evs the reader may watch: deltas of a turn whose durable reply has
// not gone out, and resets. The end of a turn's live phase and its tool calls are not shown.
func (a *ConvAdapter) Live(evs []live.Event) []ConvEvent {
	var out []ConvEvent
	for _, ev := range evs {
		if !a.mayWatch(ev.Asker) {
			continue
		}
		switch ev.Kind {
		case live.KindDelta:
			if ev.Turn <= a.lastReplyTurn {
				continue // the durable reply already superseded it
			}
			out = append(out, ConvEvent{Kind: ConvDelta, Turn: ev.Turn, Text: ev.Text})
		case live.KindReset:
			out = append(out, ConvEvent{Kind: ConvReset, Turn: ev.Turn})
		}
	}
	return out
}

// mayWatch says whether the reader may see the live output of a turn asked by asker: everyone
// in owner mode, only the asker in shared mode (the turn's class is not known until it ends).
func (a *ConvAdapter) mayWatch(asker string) bool {
	if !a.shared {
		return true
	}
	return asker == a.who
}

// Beat is the keep-alive an idle stream is sent now and then.
func (a *ConvAdapter) Beat() []ConvEvent { return []ConvEvent{{Kind: ConvKeepAlive}} }

// End is what the reader is told when the stream ends with end; errorID names damaged storage
// in the error event (the stream reports the damage under it).
func (a *ConvAdapter) End(end Ending, errorID string) []ConvEvent {
	switch end {
	case EndShutdown:
		return []ConvEvent{{Kind: ConvReconnect, Reason: "shutdown"}}
	case EndLifetime:
		return []ConvEvent{{Kind: ConvReconnect, Reason: "lifetime"}}
	case EndOverflow:
		return []ConvEvent{{Kind: ConvReconnect, Reason: "slow-consumer"}}
	case EndUnauthenticated:
		return []ConvEvent{{Kind: ConvError, Reason: "unauthenticated"}}
	case EndRevoked:
		return []ConvEvent{{Kind: ConvError, Reason: "not found"}}
	case EndDamaged:
		return []ConvEvent{{Kind: ConvError, Reason: "storage damaged", ErrorID: errorID}}
	case EndFailed:
		return []ConvEvent{{Kind: ConvError, Reason: "internal"}}
	}
	return nil // gone, or finished with its closed event
}
