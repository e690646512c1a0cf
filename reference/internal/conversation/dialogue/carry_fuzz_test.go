package dialogue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// sampleState is a state as a conversation carries it: turns in the window and evicted, a
// summary, recent keys, a pending message and a replay set.
func sampleState(turns int) *state {
	s := &state{V: 1, Owner: loomtype.Identity{Tenant: "t1", Actor: "alice"}, Mode: ModeOwner,
		Replay: envelope.NewReplaySet(8)}
	for i := 1; i <= turns; i++ {
		s.Seq, s.Ord, s.Rec = int64(i), int64(i), int64(2*i)
		tm := turnMem{Ord: int64(i), Turn: int64(i), UserRec: int64(2*i - 1), Asker: s.Owner,
			User: fmt.Sprintf("question %d", i), Reply: fmt.Sprintf("answer %d", i), Status: loomtype.StatusComplete, Tokens: 7}
		if i%3 == 0 {
			tm.Reply, tm.Status = "", loomtype.StatusInterrupted
		}
		if i <= turns/3 {
			s.Evicted = append(s.Evicted, tm)
		} else {
			s.Window = append(s.Window, tm)
		}
		s.remember(fmt.Sprintf("key-%d", i))
		s.Replay.Add(fmt.Sprintf("env-%d", i), int64(1000+i))
	}
	s.Summary = "they talked about \u2028 things"
	s.Pending = &kernel.Message{Seq: 9, Sender: s.Owner, MessageID: "m-9", Key: "k9", Payload: json.RawMessage(`{"kind":"user"}`)}
	return s
}

// readState is readStateFrom with an inbox that holds the pending message of sampleState at its
// position, and nothing else.
func readState(input json.RawMessage, maxBytes, replaySize int) (*state, error) {
	return readStateFrom(input, maxBytes, replaySize, sampleInbox)
}

func sampleInbox(seqs []int64) ([]kernel.Message, error) {
	var out []kernel.Message
	for _, seq := range seqs {
		if seq != 9 {
			return nil, fmt.Errorf("%w: no entry %d", kernel.ErrUnreadable, seq)
		}
		out = append(out, *sampleState(0).Pending)
	}
	return out, nil
}

// FuzzReadState feeds arbitrary generation input to the carry reader with a small carry bound.
// Invariants: no panic; a refusal matches ErrInvalidCarry; what is accepted is bounded (recent
// keys, window and evicted turns, the replay set at its configured capacity); its carry fits the
// bound unless no turn and no summary is left to drop, was trimmed oldest first (evicted turns
// before window turns, never a newer turn before an older one), reads back, and carrying it again
// gives the same bytes.
//
// Seeds: carries of sample states (including the trimmed ones), damaged variants, testdata/fuzz.
func FuzzReadState(f *testing.F) {
	for _, n := range []int{0, 1, 4, 12} {
		full, _ := json.Marshal(sampleState(n))
		f.Add(full, uint16(4096))
		f.Add([]byte(sampleState(n).carry(600)), uint16(600))
		f.Add(full, uint16(300))
		f.Add(bytes.Replace(full, []byte(`"v":1`), []byte(`"v":2`), 1), uint16(4096))
		f.Add(bytes.Replace(full, []byte(`"seq":`), []byte(`"seq":-`), 1), uint16(4096))
		f.Add(full[:len(full)/2], uint16(4096))
	}
	f.Add([]byte(`{"v":1,"owner":{"actor":"a"},"mode":"shared","replay":null}`), uint16(100))
	f.Add([]byte(`{"v":1,"owner":{"actor":"a"},"mode":"owner","replay":{"floor":1,"seen":[["x",2]]},"ids":["`+strings.Repeat("k", 129)+`"]}`), uint16(100))
	f.Add([]byte(`null`), uint16(0))
	f.Fuzz(func(t *testing.T, input []byte, bound uint16) {
		maxBytes := 256 + int(bound)%8192
		const replaySize = 8
		s, err := readState(input, maxBytes, replaySize)
		if err != nil {
			if !errors.Is(err, ErrInvalidCarry) || s != nil {
				t.Fatalf("refusal %T %v (state %v) does not match ErrInvalidCarry", err, err, s)
			}
			return
		}
		if len(s.Keys) > RecentKeys || len(s.Window) > maxCarryTurns || len(s.Evicted) > maxCarryTurns {
			t.Fatalf("unbounded state: %d keys, %d window, %d evicted", len(s.Keys), len(s.Window), len(s.Evicted))
		}
		if s.Replay == nil || s.Replay.Capacity() != replaySize || s.Replay.Len() > replaySize {
			t.Fatalf("replay set %v", s.Replay)
		}
		out := s.carry(maxBytes)
		if len(out) > maxBytes {
			c, err := readState(out, maxBytes, replaySize)
			if err != nil || len(c.Window) > 0 || len(c.Evicted) > 0 || c.Summary != "" {
				t.Fatalf("a carry of %d bytes over a bound of %d still holds what could be dropped", len(out), maxBytes)
			}
		}
		c, err := readState(out, maxBytes, replaySize)
		if err != nil {
			t.Fatalf("own carry %s does not read back: %v", out, err)
		}
		if again := c.carry(maxBytes); !bytes.Equal(again, out) {
			t.Fatalf("carrying twice changed the carry:\n%s\n%s", out, again)
		}
		// The trim drops the oldest turns first.
		if !isSuffix(c.Evicted, s.Evicted) || !isSuffix(c.Window, s.Window) {
			t.Fatalf("the trim kept turns that are not the newest ones:\nin  %+v %+v\nout %+v %+v", s.Evicted, s.Window, c.Evicted, c.Window)
		}
		if len(c.Window) < len(s.Window) && len(c.Evicted) > 0 {
			t.Fatalf("the trim dropped a window turn while keeping %d evicted ones", len(c.Evicted))
		}
		// And no more than it had to: with the newest dropped turn put back, it would not fit.
		more, dropped := *c, true
		switch {
		case len(c.Window) < len(s.Window):
			more.Window = append([]turnMem{s.Window[len(s.Window)-len(c.Window)-1]}, c.Window...)
		case len(c.Evicted) < len(s.Evicted):
			more.Evicted = append([]turnMem{s.Evicted[len(s.Evicted)-len(c.Evicted)-1]}, c.Evicted...)
		default:
			dropped = false
		}
		if c.Summary == "" && s.Summary != "" {
			// The summary goes only when it does not fit even without any turn.
			bare := *c
			bare.Summary, bare.Window, bare.Evicted = s.Summary, nil, nil
			if b, _ := json.Marshal(bare); len(b) <= maxBytes {
				t.Fatalf("the summary was dropped though it fits without turns: %d bytes, bound %d", len(b), maxBytes)
			}
		}
		if dropped {
			if b, _ := json.Marshal(more); len(b) <= maxBytes {
				t.Fatalf("the trim dropped a turn that fits: %d bytes with it, bound %d (window %d of %d, evicted %d of %d)",
					len(b), maxBytes, len(c.Window), len(s.Window), len(c.Evicted), len(s.Evicted))
			}
		}
	})
}

// isSuffix reports whether kept is the tail of all, in the same order.
func isSuffix(kept, all []turnMem) bool {
	if len(kept) == 0 || len(kept) > len(all) {
		return len(kept) == 0
	}
	a, _ := json.Marshal(kept)
	b, _ := json.Marshal(all[len(all)-len(kept):])
	return bytes.Equal(a, b)
}

// TestCarryKeepsTurnsTheSummaryCrowdedOut: when even a carry without any turn is over the bound
// with the summary, the summary goes and the newest turns that fit without it are kept, not lost
// for its sake.
func TestCarryKeepsTurnsTheSummaryCrowdedOut(t *testing.T) {
	s := sampleState(3)
	s.Evicted = nil
	s.Summary = strings.Repeat("long summary ", 200)
	noSummary := *s
	noSummary.Summary = ""
	b, _ := json.Marshal(noSummary)
	bound := len(b) // everything fits, but only without the summary
	c, err := readState(s.carry(bound), bound, 8)
	if err != nil {
		t.Fatal(err)
	}
	if c.Summary != "" || len(c.Window) != len(s.Window) {
		t.Fatalf("carry within %d bytes kept summary %q and %d of %d turns", bound, c.Summary, len(c.Window), len(s.Window))
	}
}
