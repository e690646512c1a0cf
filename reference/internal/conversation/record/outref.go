package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Journal version 5: the reply record of an owner-mode turn that completed names the model
// response whose content is its text (Out), by the response's position in the record's own
// generation of the log and a digest of the content, instead of holding the text a second time.
// It leaves out its asker too: in owner mode that is always the conversation's owner. A reader
// fills both in (ResolveOut, Answer.Fill) before the entry leaves the conversation package.
// Replies of shared conversations, whose model runs in a turn execution of its own, and replies
// that failed or were interrupted hold every field, as every record of versions 1 to 4 does.

// OutRef is where a version 5 reply record's text lies: the model response recorded at Seq of the
// record's generation, whose content has the digest Sum (TextSum). It is stored as the array
// [Seq,"Sum"], the shortest of the shapes JSON offers it.
type OutRef struct {
	Seq int64
	Sum string
}

// MarshalJSON writes r as [Seq,"Sum"].
func (r OutRef) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{r.Seq, r.Sum})
}

// UnmarshalJSON reads r from [Seq,"Sum"].
func (r *OutRef) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) != 2 {
		return fmt.Errorf("conversation: a reply's response reference has %d members, not 2", len(v))
	}
	var out OutRef
	if err := json.Unmarshal(v[0], &out.Seq); err != nil {
		return err
	}
	if err := json.Unmarshal(v[1], &out.Sum); err != nil {
		return err
	}
	*r = out
	return nil
}

// ErrOutRef is a reply record whose response is missing, is not a model response, or is not the
// response it was made from: damage. The error also matches kernel.ErrUnreadable.
var ErrOutRef = errors.New("conversation: a reply's model response is missing or altered")

// TextSum is the digest a reply record keeps of its response's content: the first 4 bytes of the
// SHA-256 of the text, in hex. The store checks every row's bytes itself; the digest tells the
// response the reply was made from from another one at its position.
func TextSum(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:4])
}

// OutTo is the reference a version 5 reply record keeps to the response at position at whose
// content is text.
func OutTo(at int64, text string) *OutRef {
	return &OutRef{Seq: at, Sum: TextSum(text)}
}

// Answer is what a version 5 reply record reads from its response and its conversation.
type Answer struct {
	Text  string
	Asker loomtype.Identity
}

// responseSuffix ends the id of every model response an agent loop records.
const responseSuffix = ":response"

// AnswerOf reads what the reply record naming event ev (by ref) takes from it; owner is the
// conversation's owner, the record's asker.
//
// Errors: ErrOutRef (also kernel.ErrUnreadable) when ev is not the event ref names, is not a
// model response, or its content is not the one the record was made from.
func AnswerOf(ref OutRef, ev kernel.LogEvent, owner loomtype.Identity) (Answer, error) {
	d := responseIn(ev)
	if ev.Seq != ref.Seq || d == nil {
		return Answer{}, fmt.Errorf("%w: %w: log event %d is not the response the reply names", kernel.ErrUnreadable, ErrOutRef, ref.Seq)
	}
	var r struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(d.Value, &r); err != nil {
		return Answer{}, fmt.Errorf("%w: %w: response %d: %v", kernel.ErrUnreadable, ErrOutRef, ref.Seq, err)
	}
	if TextSum(r.Content) != ref.Sum {
		return Answer{}, fmt.Errorf("%w: %w: response %d is not the one the reply was made from", kernel.ErrUnreadable, ErrOutRef, ref.Seq)
	}
	return Answer{Text: r.Content, Asker: owner}, nil
}

// Fill sets the fields of e that a version 5 reply record leaves to its response.
func (a Answer) Fill(e *loomtype.Entry) {
	text, asker := a.Text, a.Asker
	e.Text, e.Asker = &text, &asker
}

// PendingOut is an entry read from a version 5 reply record whose text and asker are still to be
// filled in (ResolveOut): its index in the caller's slice, its generation and the reference.
type PendingOut struct {
	At  int
	Gen int64
	Ref OutRef
}

// ResolveOut fills in the entries of out that pending names, reading each response through read
// (the event at a generation and position of the conversation's log) and owner, the
// conversation's owner.
//
// Errors: ErrOutRef (also kernel.ErrUnreadable) for a response missing or altered; read's.
func ResolveOut(read func(gen, seq int64) (kernel.LogEvent, bool, error), owner loomtype.Identity, out []loomtype.Entry, pending []PendingOut) error {
	for _, p := range pending {
		ev, found, err := read(p.Gen, p.Ref.Seq)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %w: the log does not hold event %d of generation %d", kernel.ErrUnreadable, ErrOutRef, p.Ref.Seq, p.Gen)
		}
		a, err := AnswerOf(p.Ref, ev, owner)
		if err != nil {
			return err
		}
		a.Fill(&out[p.At])
	}
	return nil
}

// Refs are what a record leaves to other events: the inbox entry (version 4) and the model
// response (version 5) it names, each nil when it holds those fields itself.
type Refs struct {
	In  *InboxRef
	Out *OutRef
}

// IsResponse reports whether ev holds a model response a version 5 reply may name: a reader keeps
// those it passes on its way, so that a reply is filled in without another read.
func IsResponse(ev kernel.LogEvent) bool { return responseIn(ev) != nil }

// responseIn is the model response row ev holds, alone or before the reply kept in the same row
// (kernel.Context.DecideThen), nil when it holds none.
func responseIn(ev kernel.LogEvent) *kernel.Decision {
	if d := ev.Decision; d != nil && strings.HasSuffix(d.ID, responseSuffix) {
		return d
	}
	for i := range ev.Before {
		if strings.HasSuffix(ev.Before[i].ID, responseSuffix) {
			return &ev.Before[i]
		}
	}
	return nil
}
