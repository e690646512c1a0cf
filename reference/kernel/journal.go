package kernel

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// The kernel's journal: the names of what it keeps in the store and the kinds and payloads of the
// events it writes. They are the on-disk shape of every execution already written (the golden
// journals under reference/testdata/golden replay them): add kinds and fields; never rename one.

// Stream names and keys in the store.
func logStream(id string) string   { return "x/" + id }
func inboxStream(id string) string { return "in/" + id }
func metaKey(id string) string     { return "exec/" + id }

// senderDedupeScope is the bounded set of one sender's message keys in execution id: each sender
// has a window of its own, so one sender's new messages never push another's keys out. The rest
// of the name is a JSON array of the id and the sender's identity key, so no two (id, sender)
// pairs share a set. ("dd/" + id named the one window all senders shared in earlier versions.)
func senderDedupeScope(id string, sender loomtype.Identity) string {
	b, _ := json.Marshal([]string{id, sender.Key()}) // strings always encode
	return "dds/" + string(b)
}

// metaPrefix begins every execution record's key.
const metaPrefix = "exec/"

// Bookkeeping reports whether name, a stream or metadata key of the kernel's store, is one the
// kernel reads for its own bookkeeping, right after writing it through the same store: an
// execution's inbox (read after each wake-up) and its record (read by every request that names
// the execution). The logs, which callers read back as the stored past, are not. A store may
// answer reads of these from what it committed (sqlite.Options.Cached).
//
//	st, err := sqlite.Open(ctx, path, sqlite.Options{Cached: kernel.Bookkeeping})
func Bookkeeping(name string) bool {
	return strings.HasPrefix(name, inboxStream("")) || strings.HasPrefix(name, metaPrefix)
}

// Event kinds of an execution's log.
const (
	kindStarted   = "started"
	kindConsumed  = "consumed"
	kindDecision  = "decision"
	kindStepStart = "step.started"
	kindStepDone  = "step.completed"
	kindStepFail  = "step.failed"
	kindContinued = "continued"
	kindCompleted = "completed"
	kindFailed    = "failed"
	kindMessage   = "message" // inbox
)

// Journal versions. Version 1 copied a consumed message whole into the log (its consumed event
// held the inbox entry, payload and all) and wrote each inbox entry with its key, a position and
// a time of zero. Version 2 stores each fact once: the inbox entry holds the sender, the message
// id and the payload (the key is derived from the sender and the message id, the position and the
// time are the event's own), and the consumed event holds only the position it took,
// {"seq":N}; a replay reads the message from the inbox. Both are read: a log or an inbox of
// either version replays, and the two may meet in one execution (an inbox written before and
// consumed after an upgrade).

// inboxEntry is what an inbox event holds (version 2).
type inboxEntry struct {
	Sender    loomtype.Identity `json:"sender"`
	MessageID string            `json:"messageId"`
	Payload   json.RawMessage   `json:"payload"`
}

// encodeInbox is the data of the inbox event of a message.
func encodeInbox(sender loomtype.Identity, messageID string, payload json.RawMessage) []byte {
	b, _ := json.Marshal(inboxEntry{Sender: sender, MessageID: messageID, Payload: payload}) // a payload is JSON
	return b
}

// decodeInbox reads the message of inbox event ev, of either version.
func decodeInbox(ev store.Event) (Message, error) {
	var m Message
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		return Message{}, err
	}
	if m.Key == "" {
		m.Key = SenderKey(m.Sender, m.MessageID)
	}
	m.Seq, m.Time = ev.Seq, ev.Time
	return m, nil
}

// evConsumed is a consumed event of version 2: the inbox position the message was taken from.
type evConsumed struct {
	Seq int64 `json:"seq"`
}

// Version 4 keeps a message taken and the decision the flow makes right after it in one row when
// the two are committed together (a dialogue's verdict on the message it took): the consumed
// event then holds the decision's members after its position, {"seq":N,"id":"...","value":...}
// (mergeConsumed), and a reader splits it back into the two commands (splitConsumed), the
// decision at the consumed event's own place. A consumed event of the earlier versions, and one
// whose decision came in a later commit, holds the position alone.

// mergeConsumed is the row of consumed event data (as Receive writes it, {"seq":N}) and the
// decision data that follows it (as encodeDecision writes it); ok is false when either is of
// another shape, and the two stay apart.
func mergeConsumed(consumed, decision []byte) (_ []byte, ok bool) {
	if _, ok := consumedPrefix(consumed); !ok || len(consumed) != len(`{"seq":}`)+digitsAt(consumed, len(`{"seq":`)) ||
		!bytes.HasPrefix(decision, []byte(`{"id":`)) || decision[len(decision)-1] != '}' {
		return nil, false
	}
	out := make([]byte, 0, len(consumed)+len(decision))
	out = append(out, consumed[:len(consumed)-1]...)
	out = append(out, ',')
	return append(out, decision[1:]...), true
}

// splitConsumed splits a consumed row that mergeConsumed made into the consumed event's data and
// the decision's; ok is false for any other consumed data.
func splitConsumed(data []byte) (consumed, decision []byte, ok bool) {
	n, ok := consumedPrefix(data)
	if !ok || !bytes.HasPrefix(data[n:], []byte(`,"id":`)) || data[len(data)-1] != '}' {
		return nil, nil, false
	}
	consumed = append(data[:n:n], '}')
	decision = append([]byte{'{'}, data[n+1:]...)
	return consumed, decision, true
}

// consumedPrefix is the length of data's {"seq":N prefix (N a positive integer).
func consumedPrefix(data []byte) (int, bool) {
	const pre = `{"seq":`
	if !bytes.HasPrefix(data, []byte(pre)) {
		return 0, false
	}
	d := digitsAt(data, len(pre))
	if d == 0 || data[len(pre)] == '0' {
		return 0, false
	}
	return len(pre) + d, true
}

// digitsAt is the number of decimal digits in b from i on.
func digitsAt(b []byte, i int) int {
	n := 0
	for i+n < len(b) && b[i+n] >= '0' && b[i+n] <= '9' {
		n++
	}
	return n
}

// Event payloads.
type evStarted struct {
	Flow        string            `json:"flow"`
	Principal   loomtype.Identity `json:"principal"`
	Input       json.RawMessage   `json:"input"`
	InboxCursor int64             `json:"inboxCursor,omitempty"`
}

type evDecision struct {
	ID    string          `json:"id"`
	Value json.RawMessage `json:"value"`
	Inner []string        `json:"inner,omitempty"`
}

type evStep struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

type evEnd struct {
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// decodeDecision decodes a decision event's data. What the kernel writes for a decision without
// inner steps is {"id":"<id>","value":<value>}, and that shape is read without decoding the value
// (only checked to be one JSON value); anything else (inner steps, an id with escapes, other
// spacing) is decoded by encoding/json. Both give the same evDecision; Value may share data's
// bytes.
func decodeDecision(data []byte) (evDecision, error) {
	const pre, mid = `{"id":"`, `","value":`
	if bytes.HasPrefix(data, []byte(pre)) && !bytes.HasSuffix(data, []byte("]}")) && data[len(data)-1] == '}' {
		rest := data[len(pre) : len(data)-1]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && plainID(rest[:i]) && bytes.HasPrefix(rest[i:], []byte(mid)) {
			if v := rest[i+len(mid):]; len(v) > 0 && !jsonSpace(v[0]) && !jsonSpace(v[len(v)-1]) && json.Valid(v) {
				return evDecision{ID: string(rest[:i]), Value: v[:len(v):len(v)]}, nil
			}
		}
	}
	var d evDecision
	err := json.Unmarshal(data, &d)
	return d, err
}

// encodeDecision is json.Marshal(d), byte for byte, and fails where it fails (a value that is not
// JSON). A decision without inner steps whose id and value need no escaping is written with one
// pass over the value (json.Compact) instead of the three of validating, marshalling and
// compacting it.
func encodeDecision(d evDecision) ([]byte, error) {
	if len(d.Inner) == 0 && plainID([]byte(d.ID)) && !strings.ContainsAny(d.ID, "<>&") && !needsHTMLEscape(d.Value) {
		var buf bytes.Buffer
		buf.Grow(len(`{"id":"","value":}`) + len(d.ID) + len(d.Value))
		buf.WriteString(`{"id":"`)
		buf.WriteString(d.ID)
		buf.WriteString(`","value":`)
		if err := json.Compact(&buf, d.Value); err != nil {
			return nil, err
		}
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	return json.Marshal(d)
}

// encodeMarshaled is encodeDecision for a value json.Marshal wrote. Such a value is valid and
// compact, with <, >, & and the line and paragraph separators already escaped, and json.Marshal of
// the decision copies it unchanged: a decision without inner steps whose id needs no escaping is
// written without a pass over the value.
func encodeMarshaled(d evDecision) ([]byte, error) {
	if len(d.Inner) == 0 && plainID([]byte(d.ID)) && !strings.ContainsAny(d.ID, "<>&") {
		b := make([]byte, 0, len(`{"id":"","value":}`)+len(d.ID)+len(d.Value))
		b = append(b, `{"id":"`...)
		b = append(b, d.ID...)
		b = append(b, `","value":`...)
		b = append(b, d.Value...)
		return append(b, '}'), nil
	}
	return json.Marshal(d)
}

// needsHTMLEscape reports whether json.Marshal would escape something in the JSON text v (it
// escapes <, > and & and the line and paragraph separators U+2028 and U+2029 in a RawMessage).
func needsHTMLEscape(v []byte) bool { return bytes.ContainsAny(v, "<>&\u2028\u2029") }

// plainID reports whether b is an id that JSON quotes as it is: printable ASCII without a
// backslash or a quote.
func plainID(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func jsonSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
