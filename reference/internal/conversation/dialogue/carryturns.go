package dialogue

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// What the carry names of its turns instead of copying (journal version 5). A turn of an
// owner-mode conversation keeps where its texts lie: In, the inbox position of the message whose
// envelope holds the user's text, and Out, the model response whose content is the reply (its
// generation, its position there and the digest record.TextSum keeps of it). The carry then
// leaves out the user's text, the reply and the asker, who is the owner; the next generation
// reads them back (resolveTurns). The bound on the carry's size is judged on the turns with their
// texts, so that naming them keeps the same turns as copying them did. A turn of another kind,
// and every turn of versions 1 to 4, is carried whole.

// respAt is where a turn's reply lies, written [gen,seq,"sum"].
type respAt struct {
	Gen, Seq int64
	Sum      string
}

// MarshalJSON writes r as [gen,seq,"sum"].
func (r respAt) MarshalJSON() ([]byte, error) { return json.Marshal([]any{r.Gen, r.Seq, r.Sum}) }

// UnmarshalJSON reads r from [gen,seq,"sum"].
func (r *respAt) UnmarshalJSON(b []byte) error {
	var v []json.RawMessage
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v) != 3 {
		return fmt.Errorf("%w: a turn's reply position has %d members", ErrInvalidCarry, len(v))
	}
	var out respAt
	for i, p := range []any{&out.Gen, &out.Seq, &out.Sum} {
		if err := json.Unmarshal(v[i], p); err != nil {
			return err
		}
	}
	*r = out
	return nil
}

// namedTurn is the form a turn that names its texts is carried in: turnMem without the user's
// text and the asker, and without the reply when Out names it.
type namedTurn struct {
	Ord     int64    `json:"o"`
	Turn    int64    `json:"t"`
	UserRec int64    `json:"r"`
	In      int64    `json:"i"`
	Prompt  string   `json:"p,omitempty"`
	Reply   string   `json:"y,omitempty"`
	Out     *respAt  `json:"x,omitempty"`
	Status  string   `json:"s"`
	Tokens  int      `json:"k,omitempty"`
	Classes []string `json:"c,omitempty"`
}

// MarshalJSON writes t whole, or, when it names its texts (In), as a namedTurn.
func (t turnMem) MarshalJSON() ([]byte, error) {
	type whole turnMem
	if t.In == 0 {
		return json.Marshal(whole(t))
	}
	n := namedTurn{Ord: t.Ord, Turn: t.Turn, UserRec: t.UserRec, In: t.In, Prompt: t.Prompt, Out: t.Out,
		Status: string(t.Status), Tokens: t.Tokens, Classes: t.Classes}
	if t.Out == nil {
		n.Reply = t.Reply
	}
	return json.Marshal(n)
}

// logReader reads the events at positions of an earlier generation (kernel.Context.LogAt).
type logReader func(gen int64, seqs []int64) ([]kernel.LogEvent, error)

// resolveTurns fills in the texts and the asker of the turns the carry names them of: the user's
// text from the envelope at each In of the inbox, the reply from the response at each Out.
//
// Errors: ErrInvalidCarry with kernel.ErrUnreadable for a position the inbox or the log does not
// hold, an entry that is not an envelope, or a response that is not the one named
// (record.ErrOutRef); the readers' own.
func (s *state) resolveTurns(inbox inboxReader, logAt logReader) error {
	var named []*turnMem
	for _, ts := range [][]turnMem{s.Evicted, s.Window} { // oldest first
		for i := range ts {
			if ts[i].In != 0 {
				named = append(named, &ts[i])
			}
		}
	}
	if len(named) == 0 {
		return nil
	}
	if s.Mode != ModeOwner || inbox == nil || logAt == nil {
		return fmt.Errorf("%w: turns named outside owner mode or with nothing to read them from", ErrInvalidCarry)
	}
	if err := s.resolveUsers(named, inbox); err != nil {
		return err
	}
	return s.resolveReplies(named, logAt)
}

// resolveUsers reads the user's text of each turn of named from its inbox entry.
func (s *state) resolveUsers(named []*turnMem, inbox inboxReader) error {
	seqs := make([]int64, len(named))
	for i, t := range named {
		seqs[i] = t.In
	}
	msgs, err := inbox(seqs)
	if err == nil && len(msgs) != len(seqs) {
		err = kernel.ErrUnreadable
	}
	if err != nil {
		return fmt.Errorf("%w: the inbox entries of the carried turns: %w", ErrInvalidCarry, err)
	}
	for i, t := range named {
		env, err := envelope.Parse(msgs[i].Payload)
		if err != nil || msgs[i].Seq != t.In {
			return fmt.Errorf("%w: %w: inbox entry %d of turn %d is not its message", ErrInvalidCarry, kernel.ErrUnreadable, t.In, t.Turn)
		}
		t.User, t.Asker = env.Text, s.Owner
	}
	return nil
}

// resolveReplies reads the reply of each turn of named that names its response, one read of each
// generation's positions.
func (s *state) resolveReplies(named []*turnMem, logAt logReader) error {
	byGen := map[int64][]*turnMem{}
	var gens []int64
	for _, t := range named {
		if o := t.Out; o != nil {
			if _, ok := byGen[o.Gen]; !ok {
				gens = append(gens, o.Gen)
			}
			byGen[o.Gen] = append(byGen[o.Gen], t)
		}
	}
	for _, g := range gens {
		ts := byGen[g]
		slices.SortFunc(ts, func(a, b *turnMem) int { return cmp.Compare(a.Out.Seq, b.Out.Seq) }) // LogAt reads positions in order
		seqs := make([]int64, len(ts))
		for i, t := range ts {
			seqs[i] = t.Out.Seq
		}
		evs, err := logAt(g, seqs)
		if err == nil && len(evs) != len(seqs) {
			err = kernel.ErrUnreadable
		}
		if err != nil {
			return fmt.Errorf("%w: the responses of the carried turns: %w", ErrInvalidCarry, err)
		}
		for i, t := range ts {
			a, err := record.AnswerOf(record.OutRef{Seq: t.Out.Seq, Sum: t.Out.Sum}, evs[i], s.Owner)
			if err != nil {
				return fmt.Errorf("%w: turn %d: %w", ErrInvalidCarry, t.Turn, err)
			}
			t.Reply = a.Text
		}
	}
	return nil
}

// wholeTurns are ts as they were carried before version 5: each with its texts, naming none.
func wholeTurns(ts []turnMem) []turnMem {
	out := make([]turnMem, len(ts))
	for i, t := range ts {
		t.In, t.Out = 0, nil
		out[i] = t
	}
	return out
}
