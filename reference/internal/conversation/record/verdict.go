package record

import (
	"bytes"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Verdict is the value of a message's acceptance decision: whether the message was accepted, the
// reason it was not, the envelope it carried when it was (only in journals of version 1: since
// version 2 the envelope is read from the message's payload, which the inbox keeps), and the
// number of the newest accepted
// turn when it was taken up (before its own turn, if it becomes one), so that every consumed
// message leaves a count that the status finds near the log's end. Its JSON is the on-disk shape
// of every journal already written.
type Verdict struct {
	OK       bool            `json:"ok"`
	Reason   loomtype.Reason `json:"reason,omitempty"`
	Envelope *EnvelopeJSON   `json:"envelope,omitempty"`
	Turns    *int64          `json:"turns,omitempty"`
}

// DecideVerdict records the verdict fn returns as decision id, exactly once, and returns the
// verdict recorded (a replay decodes what was recorded and never calls fn), as Decide does.
//
//	v, err := record.DecideVerdict(c, record.VerifyID(ord), func() (record.Verdict, error) { return record.Verdict{OK: true}, nil })
//
// The verdict is made of the message just taken: it shares the consumed event's row when the two
// are committed together (kernel.Context.DecideTaken, journal version 4).
func DecideVerdict(c *kernel.Context, id string, fn func() (Verdict, error)) (Verdict, error) {
	return decideWith(c.DecideTaken, id, fn, decodeVerdict)
}

// DecodeVerdict decodes a verdict decision's value exactly as json.Unmarshal decodes it into an
// empty Verdict: the same fields, the same values, an error where it fails. A value json.Marshal
// wrote (every value a journal holds) is read in one pass without reflection, which every message
// a conversation takes up needs; anything else is decoded by encoding/json.
//
//	v, err := record.DecodeVerdict(d.Value)
func DecodeVerdict(b []byte) (Verdict, error) { return decodeOnePass(b, decodeVerdict) }

// verdictKeys are Verdict's JSON names in the order json.Marshal writes them, envelopeKeys
// EnvelopeJSON's. A field added to either is added here and to its reader.
var (
	verdictKeys  = []string{"ok", "reason", "envelope", "turns"}
	envelopeKeys = []string{"conversationId", "kind", "id", "iat", "text", "asker", "editOf", "sig"}
)

// decodeVerdict reads b when it is a Verdict in the form decodeValue reads a Value (keys in
// json.Marshal's order, any of them left out, no whitespace, no null, strings as str reads them,
// integers without fraction or exponent); ok is false for anything else.
func decodeVerdict(b []byte) (v Verdict, ok bool) {
	p := scan{b: b}
	ok = p.object(verdictKeys, func(i int) bool {
		var read bool
		switch i {
		case 0:
			v.OK, read = p.bool()
		case 1:
			var r string
			r, read = p.text()
			v.Reason = loomtype.Reason(r)
		case 2:
			var e EnvelopeJSON
			if e, read = p.envelope(); read {
				v.Envelope = &e
			}
		default:
			v.Turns, read = p.intRef()
		}
		return read
	})
	return v, ok && p.end()
}

// envelope reads an envelope object of envelopeKeys.
func (p *scan) envelope() (e EnvelopeJSON, ok bool) {
	ok = p.object(envelopeKeys, func(i int) bool {
		var read bool
		switch i {
		case 0:
			e.ConversationID, read = p.text()
		case 1:
			e.Kind, read = p.text()
		case 2:
			e.ID, read = p.text()
		case 3:
			e.IAT, read = p.int()
		case 4:
			e.Text, read = p.text()
		case 5:
			var id loomtype.Identity
			id, read = p.identity()
			e.Asker = envelope.Identity(id)
		case 6:
			e.EditOf, read = p.intRef()
		default:
			e.Sig, read = p.text()
		}
		return read
	})
	return e, ok
}

// bool reads true or false.
func (p *scan) bool() (bool, bool) {
	rest := p.b[p.i:]
	switch {
	case bytes.HasPrefix(rest, []byte("true")):
		p.i += len("true")
		return true, true
	case bytes.HasPrefix(rest, []byte("false")):
		p.i += len("false")
		return false, true
	}
	return false, false
}
