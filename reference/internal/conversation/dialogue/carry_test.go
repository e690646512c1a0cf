package dialogue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// carryOf encodes s as generation input, failing the test if it cannot.
func carryOf(t *testing.T, s *state) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return b
}

// TestReadStateRefusesEachBreachAlone breaks one rule of an untrusted carry at a time, on a carry
// that is otherwise valid, and checks the reader refuses exactly those with ErrInvalidCarry; the
// neighbouring valid values (the bound itself, zero counters, both modes) are read back whole.
func TestReadStateRefusesEachBreachAlone(t *testing.T) {
	const maxBytes, replaySize = 4096, 8
	cases := []struct {
		name  string
		edit  func(s *state)
		valid bool
	}{
		{"as carried", func(*state) {}, true},
		{"version 0", func(s *state) { s.V = 0 }, false},
		{"version 2", func(s *state) { s.V = 2 }, false},
		{"owner without actor (tenant only)", func(s *state) { s.Owner = loomtype.Identity{Tenant: "t1"} }, false},
		{"owner on behalf of only", func(s *state) { s.Owner = loomtype.Identity{OnBehalfOf: "bob"} }, false},
		{"owner actor only", func(s *state) { s.Owner = loomtype.Identity{Actor: "alice"} }, true},
		{"mode shared", func(s *state) { s.Mode = ModeShared }, true},
		{"mode unknown", func(s *state) { s.Mode = "public" }, false},
		{"mode empty", func(s *state) { s.Mode = "" }, false},
		{"seq -1", func(s *state) { s.Seq = -1 }, false},
		{"ord -1", func(s *state) { s.Ord = -1 }, false},
		{"rec -1", func(s *state) { s.Rec = -1 }, false},
		{"invalid -1", func(s *state) { s.Invalid = -1 }, false},
		{"invalid 1", func(s *state) { s.Invalid = 1 }, true},
		{"key of 128 bytes", func(s *state) { s.Keys[0] = strings.Repeat("k", 128) }, true},
		{"key of 129 bytes", func(s *state) { s.Keys[0] = strings.Repeat("k", 129) }, false},
		{"summary of the bound", func(s *state) { s.Summary = strings.Repeat("s", 1<<20) }, true},
		{"summary over the bound", func(s *state) { s.Summary = strings.Repeat("s", 1<<20+1) }, false},
		{"turn 0", func(s *state) { s.Window[0].Turn = 0 }, false},
		{"turn 1", func(s *state) { s.Window[0].Turn = 1 }, true},
		{"turn at seq", func(s *state) { s.Window[0].Turn = s.Seq }, true},
		{"turn above seq", func(s *state) { s.Window[0].Turn = s.Seq + 1 }, false},
		{"evicted turn above seq", func(s *state) { s.Evicted[0].Turn = s.Seq + 1 }, false},
		{"turn ord at ord", func(s *state) { s.Window[0].Ord = s.Ord }, true},
		{"turn ord above ord", func(s *state) { s.Window[0].Ord = s.Ord + 1 }, false},
		{"user record at rec", func(s *state) { s.Window[0].UserRec = s.Rec }, true},
		{"user record above rec", func(s *state) { s.Window[0].UserRec = s.Rec + 1 }, false},
		{"evicted user record above rec", func(s *state) { s.Evicted[0].UserRec = s.Rec + 1 }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := sampleState(6)
			c.edit(s)
			got, err := readState(carryOf(t, s), maxBytes, replaySize)
			if !c.valid {
				assert.ErrorIs(t, err, ErrInvalidCarry)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, string(carryOf(t, s)), string(carryOf(t, got)), "the whole state reads back")
			assert.Equal(t, replaySize, got.Replay.Capacity())
		})
	}
}

// TestReadStateZeroCounters reads the smallest valid carry: every counter 0, no turn.
func TestReadStateZeroCounters(t *testing.T) {
	in := []byte(`{"v":1,"owner":{"actor":"a"},"mode":"owner","seq":0,"ord":0,"rec":0,"invalid":0}`)
	s, err := readState(in, 1024, 4)
	require.NoError(t, err)
	assert.Equal(t, int64(0), s.Seq)
	assert.Equal(t, int64(0), s.Ord)
	assert.Equal(t, int64(0), s.Rec)
	assert.Equal(t, int64(0), s.Invalid)
	require.NotNil(t, s.Replay)
	assert.Equal(t, 4, s.Replay.Capacity())
	assert.Equal(t, 0, s.Replay.Len())
}

// TestReadStateTurnCounts: a window (or evicted list) of exactly 4096 turns is read, one more is
// refused.
func TestReadStateTurnCounts(t *testing.T) {
	build := func(n int, evicted bool) *state {
		s := &state{V: 1, Owner: loomtype.Identity{Actor: "a"}, Mode: ModeOwner, Seq: int64(n), Ord: int64(n), Rec: int64(2 * n)}
		for i := 1; i <= n; i++ {
			tm := turnMem{Ord: int64(i), Turn: int64(i), UserRec: int64(2*i - 1), Asker: s.Owner, Status: loomtype.StatusComplete}
			if evicted {
				s.Evicted = append(s.Evicted, tm)
			} else {
				s.Window = append(s.Window, tm)
			}
		}
		return s
	}
	const maxBytes = 1 << 20
	for _, evicted := range []bool{false, true} {
		s, err := readState(carryOf(t, build(4096, evicted)), maxBytes, 8)
		require.NoError(t, err, "evicted %v", evicted)
		assert.Equal(t, 4096, len(s.Window)+len(s.Evicted))
		_, err = readState(carryOf(t, build(4097, evicted)), maxBytes, 8)
		assert.ErrorIs(t, err, ErrInvalidCarry, "evicted %v", evicted)
	}
}

// TestReadStateTurnTextBound: the texts of one turn together may hold 4 MiB, not one byte
// more, whichever of user, reply and prompt carries them.
func TestReadStateTurnTextBound(t *testing.T) {
	const maxBytes = 2 << 20 // the input bound 4*maxBytes+1MiB admits the largest turn
	const bound = 4 << 20
	for _, field := range []string{"user", "reply", "prompt"} {
		for _, total := range []int{bound, bound + 1} {
			s := sampleState(3)
			w := &s.Window[0]
			w.User, w.Reply, w.Prompt = "u", "", ""
			switch field {
			case "user":
				w.User = strings.Repeat("x", total)
			case "reply":
				w.Reply = strings.Repeat("x", total-1)
			case "prompt":
				w.Prompt = strings.Repeat("x", total-1)
			}
			require.Equal(t, total, len(w.User)+len(w.Reply)+len(w.Prompt))
			_, err := readState(carryOf(t, s), maxBytes, 8)
			if total <= bound {
				assert.NoError(t, err, "%s: %d bytes", field, total)
			} else {
				assert.ErrorIs(t, err, ErrInvalidCarry, "%s: %d bytes", field, total)
			}
		}
	}
}

// TestReadStateInputBound: an input of exactly 4*maxBytes+1MiB bytes is read, one byte more is
// refused before it is decoded.
func TestReadStateInputBound(t *testing.T) {
	for _, maxBytes := range []int{300, 1 << 20} {
		bound := 4*maxBytes + (1 << 20)
		base := carryOf(t, sampleState(2))
		pad := func(n int) []byte {
			return append(append([]byte(nil), base...), bytes.Repeat([]byte(" "), n-len(base))...)
		}
		_, err := readState(pad(bound), maxBytes, 8)
		assert.NoError(t, err, "maxBytes %d: exactly the bound", maxBytes)
		_, err = readState(pad(bound+1), maxBytes, 8)
		assert.ErrorIs(t, err, ErrInvalidCarry, "maxBytes %d: one byte over", maxBytes)
	}
}

// TestReadStateKeysAndReplay: more than RecentKeys keys keep the newest RecentKeys; exactly
// RecentKeys are kept as they are; the replay set is read with the configured capacity, and an
// absent or null one is an empty set of that capacity.
func TestReadStateKeysAndReplay(t *testing.T) {
	for _, n := range []int{RecentKeys - 1, RecentKeys, RecentKeys + 1, RecentKeys + 7} {
		s := sampleState(2)
		s.Keys = nil
		for i := 0; i < n; i++ {
			s.Keys = append(s.Keys, fmt.Sprintf("key-%d", i))
		}
		got, err := readState(carryOf(t, s), 1<<20, 8)
		require.NoError(t, err)
		want := s.Keys
		if n > RecentKeys {
			want = s.Keys[n-RecentKeys:]
		}
		assert.Equal(t, want, got.Keys, "%d keys", n)
	}

	s := sampleState(4)
	got, err := readState(carryOf(t, s), 4096, 3)
	require.NoError(t, err)
	assert.Equal(t, 3, got.Replay.Capacity())
	assert.True(t, got.Replay.Contains("env-4"))
	assert.False(t, got.Replay.Contains("env-1"), "beyond the capacity, evicted")
	assert.Equal(t, int64(1001), got.Replay.Floor())

	for _, in := range []string{
		`{"v":1,"owner":{"actor":"a"},"mode":"owner","replay":null}`,
		`{"v":1,"owner":{"actor":"a"},"mode":"owner"}`,
	} {
		got, err := readState([]byte(in), 1024, 5)
		require.NoError(t, err, in)
		require.NotNil(t, got.Replay, in)
		assert.Equal(t, 5, got.Replay.Capacity(), in)
		assert.Equal(t, 0, got.Replay.Len(), in)
	}
	_, err = readState([]byte(`{"v":1,"owner":{"actor":"a"},"mode":"owner","replay":{"floor":0,"seen":[["a",1],["a",2]]}}`), 1024, 5)
	assert.ErrorIs(t, err, ErrInvalidCarry)
	assert.ErrorIs(t, err, envelope.ErrInvalidCarry)
	_, err = readState([]byte(`{"v":1,`), 1024, 5)
	assert.ErrorIs(t, err, ErrInvalidCarry)
}

// carryCandidates lists what carry may produce, in the order it gives things up: the whole
// state, then each oldest evicted turn dropped, then each oldest window turn, then the summary.
func carryCandidates(s *state) []state {
	var out []state
	c := *s
	out = append(out, c)
	for len(c.Evicted) > 0 {
		c.Evicted = c.Evicted[1:]
		out = append(out, c)
	}
	for len(c.Window) > 0 {
		c.Window = c.Window[1:]
		out = append(out, c)
	}
	if c.Summary != "" {
		c.Summary = ""
		out = append(out, c)
	}
	return out
}

// TestCarryTrimsAtEveryBound: for every bound from below the smallest possible carry to above
// the whole one, carry returns exactly the first candidate that fits (the last one when none
// does), and leaves the state it trims unchanged.
func TestCarryTrimsAtEveryBound(t *testing.T) {
	for _, withSummary := range []bool{true, false} {
		s := sampleState(6)
		if !withSummary {
			s.Summary = ""
		}
		before := carryOf(t, s)
		cands := carryCandidates(s)
		var enc [][]byte
		for i := range cands {
			enc = append(enc, carryOf(t, &cands[i]))
		}
		smallest, whole := len(enc[len(enc)-1]), len(enc[0])
		for bound := smallest - 3; bound <= whole+2; bound++ {
			want := enc[len(enc)-1]
			for _, e := range enc {
				if len(e) <= bound {
					want = e
					break
				}
			}
			got := s.carry(bound)
			if !assert.Equal(t, string(want), string(got), "bound %d (summary %v)", bound, withSummary) {
				return
			}
		}
		assert.Equal(t, string(before), string(carryOf(t, s)), "carry leaves its state unchanged")
	}
}

// TestTurnMemModelMessages: the user message is the prompt when one was recorded, else the user
// text; the reply is the recorded one, else the placeholder of how the turn ended.
func TestTurnMemModelMessages(t *testing.T) {
	assert.Equal(t, "p", turnMem{User: "u", Prompt: "p"}.modelUser())
	assert.Equal(t, "u", turnMem{User: "u"}.modelUser())
	assert.Equal(t, "y", turnMem{Reply: "y", Status: loomtype.StatusInterrupted}.modelReply())
	assert.Equal(t, "y", turnMem{Reply: "y", Status: loomtype.StatusComplete}.modelReply())
	assert.Equal(t, PlaceholderInterrupted, turnMem{Status: loomtype.StatusInterrupted}.modelReply())
	assert.Equal(t, PlaceholderFailed, turnMem{Status: loomtype.StatusFailed}.modelReply())
	assert.Equal(t, PlaceholderFailed, turnMem{Status: loomtype.StatusComplete}.modelReply())
}

// TestRememberKeepsTheNewestKeys: an empty key is not remembered; up to RecentKeys are kept, then
// the oldest go.
func TestRememberKeepsTheNewestKeys(t *testing.T) {
	var s state
	s.remember("")
	assert.Empty(t, s.Keys)
	var all []string
	for i := 0; i < 3*RecentKeys+3; i++ { // several growths of the list's array
		k := fmt.Sprintf("k%d", i)
		all = append(all, k)
		s.remember(k)
		want := all
		if len(all) > RecentKeys {
			want = all[len(all)-RecentKeys:]
		}
		require.Equal(t, want, s.Keys, "after %d keys", i+1)
	}
}

// TestEvictKeepsTheNewestTurns: evict moves exactly the oldest n turns to the evicted ones, in
// order, and nothing for n <= 0; a window held at its bound turn after turn, well past several
// growths of its array, always holds the newest turns, and a snapshot of the window taken before
// an evict still reads what it held.
func TestEvictKeepsTheNewestTurns(t *testing.T) {
	mem := func(i int) turnMem { return turnMem{Ord: int64(i), Turn: int64(i), User: fmt.Sprintf("u%d", i)} }
	var s state
	for i := range 5 {
		s.Window = append(s.Window, mem(i))
	}
	s.evict(0)
	s.evict(-2)
	require.Equal(t, []turnMem{mem(0), mem(1), mem(2), mem(3), mem(4)}, s.Window)
	require.Empty(t, s.Evicted)
	snap := s.Window[2:]
	s.evict(2)
	require.Equal(t, []turnMem{mem(2), mem(3), mem(4)}, s.Window)
	require.Equal(t, []turnMem{mem(0), mem(1)}, s.Evicted)
	require.Equal(t, []turnMem{mem(2), mem(3), mem(4)}, snap)

	const bound = 8
	s = state{}
	var all []turnMem
	for i := range 5 * bound {
		all = append(all, mem(i))
		s.Window = append(s.Window, mem(i))
		s.evict(len(s.Window) - bound)
		lo := max(0, len(all)-bound)
		require.Equal(t, all[lo:], s.Window, "after %d turns", i+1)
		require.Equal(t, all[:lo], append([]turnMem{}, s.Evicted...), "after %d turns", i+1)
	}
}

// TestReadStateNegativeCounterAlone: with no turn to contradict it, each counter below zero alone
// is refused, and each at zero alone is read.
func TestReadStateNegativeCounterAlone(t *testing.T) {
	for _, field := range []string{"seq", "ord", "rec", "invalid"} {
		for _, v := range []int64{-1, 0} {
			s := &state{V: 1, Owner: loomtype.Identity{Actor: "a"}, Mode: ModeOwner, Seq: 3, Ord: 3, Rec: 3, Invalid: 3,
				Replay: envelope.NewReplaySet(4)}
			switch field {
			case "seq":
				s.Seq = v
			case "ord":
				s.Ord = v
			case "rec":
				s.Rec = v
			case "invalid":
				s.Invalid = v
			}
			got, err := readState(carryOf(t, s), 1024, 4)
			if v < 0 {
				assert.ErrorIs(t, err, ErrInvalidCarry, "%s %d", field, v)
				assert.Nil(t, got)
			} else if assert.NoError(t, err, "%s %d", field, v) {
				assert.Equal(t, string(carryOf(t, s)), string(carryOf(t, got)))
			}
		}
	}
}
