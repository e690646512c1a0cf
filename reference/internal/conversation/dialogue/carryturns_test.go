package dialogue

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// fakeLog is the responses of earlier generations by generation and position.
type fakeLog map[[2]int64]kernel.LogEvent

func (l fakeLog) put(gen, seq int64, id, content string) {
	v, _ := json.Marshal(map[string]string{"content": content})
	l[[2]int64{gen, seq}] = kernel.LogEvent{Gen: gen, Seq: seq, Kind: "decision", Decision: &kernel.Decision{ID: id, Value: v}}
}

// at reads as kernel.Context.LogAt does: positions in ascending order only.
func (l fakeLog) at(gen int64, seqs []int64) ([]kernel.LogEvent, error) {
	var out []kernel.LogEvent
	for i, s := range seqs {
		if i > 0 && s <= seqs[i-1] {
			return nil, fmt.Errorf("%w: position %d after %d", kernel.ErrUnreadable, s, seqs[i-1])
		}
		ev, ok := l[[2]int64{gen, s}]
		if !ok {
			return nil, fmt.Errorf("%w: no event %d of generation %d", kernel.ErrUnreadable, s, gen)
		}
		out = append(out, ev)
	}
	return out, nil
}

// namedCarry is an owner's state whose turns name their texts (the messages at inbox positions 1
// to 3, the responses at 3 of generation 0 and 4 of generation 1 for the two window turns, and at
// 1 of generation 0, before them in the log, for the evicted one), with the inbox and the log
// that hold them.
func namedCarry(t *testing.T) (*state, *fakeInbox, fakeLog) {
	owner := loomtype.Identity{Actor: "a"}
	in := &fakeInbox{}
	in.put(t, 1, "e1", 1)
	in.put(t, 2, "e2", 2)
	in.put(t, 3, "e3", 3)
	lg := fakeLog{}
	lg.put(0, 1, "conv#o0#turn:1:response", "evicted answer")
	lg.put(0, 3, "conv#o1#turn:1:response", "first answer")
	lg.put(1, 4, "conv#o2#turn:1:response", "second answer")
	st := &state{V: 1, Owner: owner, Mode: ModeOwner, Seq: 3, Ord: 3, Rec: 6, Evicted: []turnMem{
		{Ord: 3, Turn: 3, UserRec: 5, Asker: owner, User: "hello", Reply: "evicted answer", Status: loomtype.StatusComplete,
			In: 3, Out: &respAt{Gen: 0, Seq: 1, Sum: record.TextSum("evicted answer")}},
	}, Window: []turnMem{
		{Ord: 1, Turn: 1, UserRec: 1, Asker: owner, User: "hello", Reply: "first answer", Status: loomtype.StatusComplete,
			In: 1, Out: &respAt{Gen: 0, Seq: 3, Sum: record.TextSum("first answer")}},
		{Ord: 2, Turn: 2, UserRec: 3, Asker: owner, User: "hello", Reply: "second answer", Status: loomtype.StatusComplete,
			Classes: []string{"x"}, In: 2, Out: &respAt{Gen: 1, Seq: 4, Sum: record.TextSum("second answer")}},
	}}
	return st, in, lg
}

// TestACarryNamesItsTurnsTextsAndReadsThemBack: a turn that names where its texts lie is carried
// without the user's text, the reply and the asker (journal version 5), and the next generation
// reads them back from the inbox and the log, to the same window.
func TestACarryNamesItsTurnsTextsAndReadsThemBack(t *testing.T) {
	st, in, lg := namedCarry(t)
	carry := st.carry(1 << 20)
	var raw struct {
		Turns []map[string]json.RawMessage `json:"turns"`
	}
	require.NoError(t, json.Unmarshal(carry, &raw))
	require.Len(t, raw.Turns, 2)
	for _, tm := range raw.Turns {
		for _, k := range []string{"u", "y", "a"} {
			require.NotContains(t, tm, k, "%s", carry)
		}
	}
	got, err := readStateFrom(carry, 1<<20, 8, in.messages)
	require.NoError(t, err)
	require.NoError(t, got.resolveTurns(in.messages, lg.at))
	require.Equal(t, st.Window, got.Window)
	require.Equal(t, st.Evicted, got.Evicted)
}

// TestACarryKeepsTheTurnsItKeptWithTheirTexts: the bound on the carry's size judges the turns
// with their texts, so a carry that names them keeps the turns a carry that copied them kept.
func TestACarryKeepsTheTurnsItKeptWithTheirTexts(t *testing.T) {
	st, _, _ := namedCarry(t)
	st.Evicted = nil
	whole := *st
	whole.Window = wholeTurns(st.Window)
	full := whole.carry(1 << 20)
	bound := len(full) - 1 // one byte short: the oldest turn goes
	var kept, keptWhole state
	require.NoError(t, json.Unmarshal(st.carry(bound), &kept))
	require.NoError(t, json.Unmarshal(whole.carry(bound), &keptWhole))
	require.Len(t, keptWhole.Window, 1)
	require.Len(t, kept.Window, 1)
	require.Equal(t, keptWhole.Window[0].Ord, kept.Window[0].Ord)
}

// TestACarriedTurnWhoseTextsAreMissingOrAlteredIsDamage: a turn's inbox entry or response that is
// missing, or a response other than the one named, fails the generation with ErrInvalidCarry
// (and kernel.ErrUnreadable; record.ErrOutRef for the response).
func TestACarriedTurnWhoseTextsAreMissingOrAlteredIsDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(in *fakeInbox, lg fakeLog)
		outRef bool
	}{
		{"inbox entry missing", func(in *fakeInbox, _ fakeLog) { delete(in.at, 2) }, false},
		{"response missing", func(_ *fakeInbox, lg fakeLog) { delete(lg, [2]int64{1, 4}) }, false},
		{"response altered", func(_ *fakeInbox, lg fakeLog) { lg.put(1, 4, "conv#o2#turn:1:response", "second answer!") }, true},
		{"another event", func(_ *fakeInbox, lg fakeLog) { lg.put(0, 3, "conv#o1:reply", "first answer") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, in, lg := namedCarry(t)
			carry := st.carry(1 << 20)
			tc.change(in, lg)
			got, err := readStateFrom(carry, 1<<20, 8, in.messages)
			require.NoError(t, err)
			err = got.resolveTurns(in.messages, lg.at)
			require.ErrorIs(t, err, ErrInvalidCarry)
			require.ErrorIs(t, err, kernel.ErrUnreadable)
			if tc.outRef {
				require.ErrorIs(t, err, record.ErrOutRef)
			}
		})
	}
}
