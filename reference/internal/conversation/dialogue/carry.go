package dialogue

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// state is the dialogue's state. It is rebuilt by replay inside a generation and crosses
// generations as the carry.
type state struct {
	V     int               `json:"v"`
	Owner loomtype.Identity `json:"owner"`
	Mode  loomtype.Mode     `json:"mode"`
	// Seq is the number of the newest accepted turn; Ord counts consumed messages (it numbers
	// decision ids); Rec counts transcript records (the records' ord).
	Seq int64 `json:"seq"`
	Ord int64 `json:"ord"`
	Rec int64 `json:"rec"`
	// Keys are the sender keys of the newest messages (RecentKeys of them).
	Keys    []string            `json:"ids,omitempty"`
	Summary string              `json:"summary,omitempty"`
	Window  []turnMem           `json:"turns,omitempty"`
	Evicted []turnMem           `json:"evicted,omitempty"`
	Pending *kernel.Message     `json:"pending,omitempty"`
	Replay  *envelope.ReplaySet `json:"replay,omitempty"`
	Invalid int64               `json:"invalid,omitempty"`
	// CountEmpty is the start's CountEmpty, carried across rotations.
	CountEmpty bool `json:"countEmpty,omitempty"`
	// InvalidPerAsker is the start's InvalidPerAsker; InvalidBy counts the invalid messages of
	// each asker (by identity key) when it is set.
	InvalidPerAsker bool             `json:"invalidPerAsker,omitempty"`
	InvalidBy       map[string]int64 `json:"invalidBy,omitempty"`

	// rawKeys and rawReplay are the keys and the replay set of a carry as UnmarshalJSON found
	// them, until restore reads them (carryrefs.go).
	rawKeys, rawReplay json.RawMessage
}

// turnMem is one accepted turn in the carried window.
type turnMem struct {
	Ord     int64                 `json:"o"`
	Turn    int64                 `json:"t"`
	UserRec int64                 `json:"r"`
	Asker   loomtype.Identity     `json:"a"`
	User    string                `json:"u"`
	Prompt  string                `json:"p,omitempty"`
	Reply   string                `json:"y"`
	Status  loomtype.RecordStatus `json:"s"`
	Tokens  int                   `json:"k,omitempty"`
	Classes []string              `json:"c,omitempty"`
}

// evict moves the oldest n turns of the window (none when n <= 0) to the evicted turns. The
// window keeps its array, cut from the front, so that a window at its bound does not copy itself
// on every turn: the next append that finds no room copies it once into a larger one.
func (s *state) evict(n int) {
	if n <= 0 {
		return
	}
	s.Evicted = append(s.Evicted, s.Window[:n]...)
	clear(s.Window[:n]) // the array's front no longer holds on to their texts
	s.Window = s.Window[n:]
}

// modelUser is the user message the model saw for this turn.
func (t turnMem) modelUser() string {
	if t.Prompt != "" {
		return t.Prompt
	}
	return t.User
}

// modelReply is the assistant message later turns see for this turn.
func (t turnMem) modelReply() string {
	switch {
	case t.Reply != "":
		return t.Reply
	case t.Status == loomtype.StatusInterrupted:
		return PlaceholderInterrupted
	default:
		return PlaceholderFailed
	}
}

func (s *state) remember(key string) {
	if key == "" {
		return
	}
	s.Keys = append(s.Keys, key)
	if n := len(s.Keys) - RecentKeys; n > 0 {
		// Cut from the front, as evict does: a full list does not copy itself on every message.
		clear(s.Keys[:n])
		s.Keys = s.Keys[n:]
	}
}

// Bounds on an untrusted carry.
const (
	maxCarryTurns  = 4096
	maxCarryText   = 1 << 20
	maxCarryKeyLen = 128
)

// ErrInvalidCarry is matched (errors.Is) by every refusal of a generation's input: a carry that
// is not JSON, has the wrong version, owner or mode, counters out of range, or more than the
// bounds allow. The execution fails with it rather than run on a state it cannot trust.
//
//	if errors.Is(err, conversation.ErrInvalidCarry) { ... }
var ErrInvalidCarry = errors.New("conversation: invalid carry")

// readStateFrom reads generation input: the start input in generation 0, a carry after. The
// input is treated as untrusted: shape, counts, sizes and bytes are all bounded. What the carry
// names by inbox position instead of copying (carryrefs.go) is read from inbox.
func readStateFrom(input json.RawMessage, maxBytes, replaySize int, inbox inboxReader) (*state, error) {
	if len(input) > 4*maxBytes+(1<<20) {
		return nil, fmt.Errorf("%w: %d bytes is over the bound", ErrInvalidCarry, len(input))
	}
	var s state
	if err := json.Unmarshal(input, &s); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCarry, err)
	}
	if s.V != 1 || !s.Owner.Valid() || (s.Mode != ModeOwner && s.Mode != ModeShared) {
		return nil, fmt.Errorf("%w: bad version, owner or mode", ErrInvalidCarry)
	}
	if err := s.restore(replaySize, inbox); err != nil {
		return nil, err
	}
	if s.Seq < 0 || s.Ord < 0 || s.Rec < 0 || s.Invalid < 0 || len(s.Window) > maxCarryTurns || len(s.Evicted) > maxCarryTurns {
		return nil, fmt.Errorf("%w: counters out of range", ErrInvalidCarry)
	}
	for _, n := range s.InvalidBy {
		if n < 0 {
			return nil, fmt.Errorf("%w: counters out of range", ErrInvalidCarry)
		}
	}
	if len(s.Keys) > RecentKeys {
		s.Keys = s.Keys[len(s.Keys)-RecentKeys:]
	}
	for _, k := range s.Keys {
		if len(k) > maxCarryKeyLen {
			return nil, fmt.Errorf("%w: key too long", ErrInvalidCarry)
		}
	}
	if !utf8.ValidString(s.Summary) || len(s.Summary) > maxCarryText {
		return nil, fmt.Errorf("%w: summary", ErrInvalidCarry)
	}
	for _, ts := range [][]turnMem{s.Window, s.Evicted} {
		for _, t := range ts {
			if len(t.User)+len(t.Reply)+len(t.Prompt) > 4*maxCarryText || t.Turn <= 0 || t.Turn > s.Seq || t.Ord > s.Ord || t.UserRec > s.Rec {
				return nil, fmt.Errorf("%w: turn out of range", ErrInvalidCarry)
			}
		}
	}
	if s.Replay == nil {
		s.Replay = envelope.NewReplaySet(replaySize)
	}
	return &s, nil
}

// carry trims the state to maxBytes, oldest evicted turn first, then oldest window turn, and
// encodes it. The summary goes only when even no turn at all does not make it fit, and then the
// turns are trimmed again without it. The trim is a pure function of the state.
func (s *state) carry(maxBytes int) json.RawMessage {
	c := *s
	for {
		z := c.sizer()
		ke, kw := 0, 0 // the evicted and window turns dropped
		for z.size(ke, kw) > maxBytes && (ke < len(s.Evicted) || kw < len(s.Window)) {
			if ke < len(s.Evicted) {
				ke++
			} else {
				kw++
			}
		}
		if z.size(ke, kw) > maxBytes && c.Summary != "" {
			// Only the summary is left to drop: without it, the turns dropped for its sake
			// may fit again, so the trim starts over from all of them.
			c.Summary = ""
			continue
		}
		c.Evicted, c.Window = s.Evicted[ke:], s.Window[kw:]
		b, _ := json.Marshal(c)
		return b
	}
}

// sizer answers what the bound on a carry counts (size) for the state less its oldest turns, in
// time linear in the turns: the turns' texts (questions, prompts and replies) at their UTF-8
// bytes, whether or not the carry names them, and everything else as the carry encodes it. A
// text is not counted by its encoding, which may spell one byte as six ("<" as \u003c), so that
// the newest turns whose texts fit are kept whatever they say (spec/prompt.md §4).
type sizer struct {
	base      int // the state without turns, encoded
	evicted   turnSizes
	window    turnSizes
	evictedAt int // len(`,"evicted":[]`)
	windowAt  int // len(`,"turns":[]`)
}

// turnSizes are, for each turn, its encoding without its texts plus its texts' bytes, summed
// from the newest: at[i] counts turns i to the end, at[len] is 0.
type turnSizes struct{ at []int }

// part is what turns i to the end add to the state's encoding: none when there are none (an
// empty slice is not encoded, omitempty), else the field's name and brackets (field: its length
// with the comma before it), each turn, and a comma between two.
func (t turnSizes) part(i, field int) int {
	n := len(t.at) - 1 - i
	if n <= 0 {
		return 0
	}
	return field + t.at[i] + n - 1
}

func sizesOf(ts []turnMem) turnSizes {
	at := make([]int, len(ts)+1)
	for i := len(ts) - 1; i >= 0; i-- {
		t := ts[i]
		texts := len(t.User) + len(t.Prompt) + len(t.Reply)
		t.User, t.Prompt, t.Reply = "", "", ""
		b, _ := json.Marshal(t)
		at[i] = at[i+1] + len(b) + texts
	}
	return turnSizes{at: at}
}

func (s *state) sizer() sizer {
	w := *s
	w.Window, w.Evicted = nil, nil
	b, _ := json.Marshal(w)
	return sizer{base: len(b), evicted: sizesOf(s.Evicted), window: sizesOf(s.Window),
		evictedAt: len(`,"evicted":[]`), windowAt: len(`,"turns":[]`)}
}

// size is the count of the state less its oldest ke evicted and kw window turns. Any field but
// the first follows a comma.
func (z sizer) size(ke, kw int) int {
	return z.base + z.evicted.part(ke, z.evictedAt) + z.window.part(kw, z.windowAt)
}
