package record

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Journal version 4: the user record of an accepted turn names the inbox entry it was taken from
// (In) instead of holding what that entry already holds. The text, the asker and the edited record
// are the envelope's, the message id is the entry's (left out in shared mode, where a record
// never shows it); the record keeps what only it knows (its place, the turn, the status, the
// time, the classes, the edited turn). A reader fills the named fields in from the inbox (Resolve)
// before the entry leaves the conversation package. Records of versions 1 to 3, which hold
// every field, read as before.

// InboxRef is where a version 4 user record's message lies in the execution's inbox, with a
// digest of the entry (SumOf) so that an entry altered after the record was written is told from
// the one the record was made from.
type InboxRef struct {
	Seq int64  `json:"seq"`
	Sum string `json:"sum"`
	// NoID: the entry's message id is not part of the record (shared mode).
	NoID bool `json:"noId,omitempty"`
}

// ErrInboxRef is a record whose inbox entry is missing, does not decode, or is not the entry it
// was made from: damage. The error also matches kernel.ErrUnreadable.
var ErrInboxRef = errors.New("conversation: a record's inbox entry is missing or altered")

// SumOf is the digest a record keeps of inbox message m: the first 8 bytes of the SHA-256 of its
// sender's key, its message id and its payload, in hex.
func SumOf(m kernel.Message) string {
	h := sha256.New()
	h.Write([]byte(m.Sender.Key()))
	h.Write([]byte{0})
	h.Write([]byte(m.MessageID))
	h.Write([]byte{0})
	h.Write(m.Payload)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// RefTo is the reference a version 4 user record keeps to message m; withID says whether the
// record shows the message id.
func RefTo(m kernel.Message, withID bool) *InboxRef {
	return &InboxRef{Seq: m.Seq, Sum: SumOf(m), NoID: !withID}
}

// Asked is what a version 4 user record reads from its inbox entry.
type Asked struct {
	Text      string
	MessageID string
	Asker     loomtype.Identity
	EditOf    int64
}

// AskedOf reads what the record naming message m (by ref) takes from it.
//
// Errors: ErrInboxRef (also kernel.ErrUnreadable) when m is not the entry ref names or its
// payload is not an envelope.
func AskedOf(ref InboxRef, m kernel.Message) (Asked, error) {
	if m.Seq != ref.Seq || SumOf(m) != ref.Sum {
		return Asked{}, fmt.Errorf("%w: %w: inbox entry %d is not the one the record names", kernel.ErrUnreadable, ErrInboxRef, ref.Seq)
	}
	env, err := envelope.Parse(m.Payload)
	if err != nil {
		return Asked{}, fmt.Errorf("%w: %w: inbox entry %d: %v", kernel.ErrUnreadable, ErrInboxRef, ref.Seq, err)
	}
	a := Asked{Text: env.Text, Asker: loomtype.Identity(env.Asker)}
	if env.EditOf != nil {
		a.EditOf = *env.EditOf
	}
	if !ref.NoID {
		a.MessageID = m.MessageID
	}
	return a, nil
}

// Fill sets the fields of e that a version 4 record leaves to its inbox entry.
func (a Asked) Fill(e *loomtype.Entry) {
	text, asker := a.Text, a.Asker
	e.Text, e.MessageID, e.Asker, e.EditOf = &text, a.MessageID, &asker, a.EditOf
}

// Pending is an entry read from a version 4 record whose inbox fields are still to be filled in
// (Resolve): its index in the caller's slice and the reference.
type Pending struct {
	At  int
	Ref InboxRef
}

// Resolve fills in the entries of out that pending names from execution id's inbox, read through
// k, in one read of each run of consecutive positions.
//
// Errors: ErrInboxRef (also kernel.ErrUnreadable) for an entry missing or altered; store errors.
func Resolve(read func(seqs []int64) ([]kernel.Message, error), out []loomtype.Entry, pending []Pending) error {
	if len(pending) == 0 {
		return nil
	}
	seqs := make([]int64, len(pending))
	for i, p := range pending {
		seqs[i] = p.Ref.Seq
	}
	msgs, err := read(seqs)
	if errors.Is(err, kernel.ErrUnreadable) {
		return fmt.Errorf("%w: %w", ErrInboxRef, err)
	}
	if err != nil {
		return err
	}
	for i, p := range pending {
		a, err := AskedOf(p.Ref, msgs[i])
		if err != nil {
			return err
		}
		a.Fill(&out[p.At])
	}
	return nil
}

// Noted is what the dialogue notes for a conversation's stream tail (live.Hub.Note) before it
// writes a version 4 user record: the record's reference and what it reads there, so that the
// tail shows the record whole without reading the inbox.
type Noted struct {
	Ref   InboxRef
	Asked Asked
}
