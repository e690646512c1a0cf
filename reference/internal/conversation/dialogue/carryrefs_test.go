package dialogue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// keyedState is a state whose replay set holds ids env-1..env-n (env-n the newest) and whose keys
// are keys, in order.
func keyedState(n, capacity int, keys ...string) *state {
	s := sampleState(0)
	s.Replay = envelope.NewReplaySet(capacity)
	for i := 1; i <= n; i++ {
		s.Replay.Add(fmt.Sprintf("env-%d", i), int64(1000+i))
	}
	s.Keys = keys
	return s
}

// carriedIDs is the "ids" member of a carry.
func carriedIDs(t *testing.T, carry []byte) string {
	t.Helper()
	var c struct {
		IDs json.RawMessage `json:"ids"`
	}
	require.NoError(t, json.Unmarshal(carry, &c))
	return string(c.IDs)
}

// TestCarryNamesKeysTheReplaySetHolds: a key the replay set holds is written as its place in the
// set, consecutive places as one run, any other key as itself, in the keys' order; the carry
// reads back to the same keys.
func TestCarryNamesKeysTheReplaySetHolds(t *testing.T) {
	cases := []struct {
		name string
		keys []string
		ids  string
	}{
		{"every key held, oldest to newest", []string{"env-3", "env-4", "env-5"}, `[[2,3]]`},
		{"one key held", []string{"env-5"}, `[[0,1]]`},
		{"none held", []string{"k1", "k2"}, `["k1","k2"]`},
		{"a key between runs", []string{"env-1", "env-2", "k", "env-4", "env-5"}, `[[4,2],"k",[1,2]]`},
		{"out of order", []string{"env-2", "env-1", "env-3"}, `[[3,1],[4,1],[2,1]]`},
		{"a run that would pass the newest", []string{"env-4", "env-5", "env-5"}, `[[1,2],[0,1]]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := keyedState(5, 8, c.keys...)
			carry := carryOf(t, s)
			assert.Equal(t, c.ids, carriedIDs(t, carry))
			got, err := readState(carry, 1<<20, 8)
			require.NoError(t, err)
			assert.Equal(t, c.keys, got.Keys)
		})
	}
	s := keyedState(5, 8)
	assert.NotContains(t, string(carryOf(t, s)), `"ids"`, "no keys, no member")
}

// TestCarryKeysAreWrittenOnce: a carry whose keys the replay set holds writes each id once.
func TestCarryKeysAreWrittenOnce(t *testing.T) {
	var keys []string
	for i := 1; i <= RecentKeys; i++ {
		keys = append(keys, fmt.Sprintf("env-%d", i+100))
	}
	s := keyedState(RecentKeys+100, 1024, keys...)
	carry := string(carryOf(t, s))
	assert.Equal(t, 1, strings.Count(carry, `"env-300"`))
	assert.Equal(t, `[[255,256]]`, carriedIDs(t, []byte(carry)))
}

// TestCarryKeysOfEarlierVersionsRead: keys written as strings (versions 1 and 2) read as they
// are, with or without a replay set.
func TestCarryKeysOfEarlierVersionsRead(t *testing.T) {
	for _, in := range []string{
		`{"v":1,"owner":{"actor":"a"},"mode":"owner","ids":["env-1","k"],"replay":{"floor":0,"seen":[["env-1",1]]}}`,
		`{"v":1,"owner":{"actor":"a"},"mode":"owner","ids":["env-1","k"]}`,
	} {
		got, err := readState([]byte(in), 1024, 8)
		require.NoError(t, err, in)
		assert.Equal(t, []string{"env-1", "k"}, got.Keys, in)
	}
}

// TestCarryKeysAfterTheCapacityWasLowered: a run naming places beyond a replay set read at a
// lower capacity than it was written with still reads the keys it named.
func TestCarryKeysAfterTheCapacityWasLowered(t *testing.T) {
	s := keyedState(6, 8, "env-1", "env-2", "k")
	carry := carryOf(t, s)
	require.Equal(t, `[[5,2],"k"]`, carriedIDs(t, carry))
	got, err := readState(carry, 1<<20, 3)
	require.NoError(t, err)
	assert.Equal(t, []string{"env-1", "env-2", "k"}, got.Keys)
	assert.Equal(t, 3, got.Replay.Len())
	assert.False(t, got.Replay.Contains("env-1"), "the set itself keeps its capacity")
}

// TestCarryKeysRefusesRunsItDoesNotHold: a run that is not two integers, names no id or a place
// beyond the carried set is refused; each neighbouring valid run reads.
func TestCarryKeysRefusesRunsItDoesNotHold(t *testing.T) {
	const seen = `"replay":{"floor":0,"seen":[["e1",1],["e2",2],["e3",3]]}`
	cases := []struct {
		ids   string
		valid bool
		keys  []string
	}{
		{`[[2,3]]`, true, []string{"e1", "e2", "e3"}},
		{`[[2,4]]`, false, nil},
		{`[[3,1]]`, false, nil},
		{`[[0,1]]`, true, []string{"e3"}},
		{`[[0,0]]`, false, nil},
		{`[[-1,1]]`, false, nil},
		{`[[1]]`, false, nil},
		{`[[1,1,1]]`, false, nil},
		{`[["1",1]]`, false, nil},
		{`[1]`, false, nil},
		{`[null]`, false, nil},
		{`[[1.5,1]]`, false, nil},
		{`{"a":1}`, false, nil},
	}
	for _, c := range cases {
		in := `{"v":1,"owner":{"actor":"a"},"mode":"owner","ids":` + c.ids + `,` + seen + `}`
		got, err := readState([]byte(in), 1024, 8)
		if !c.valid {
			assert.ErrorIs(t, err, ErrInvalidCarry, c.ids)
			continue
		}
		require.NoError(t, err, c.ids)
		assert.Equal(t, c.keys, got.Keys, c.ids)
	}
	in := `{"v":1,"owner":{"actor":"a"},"mode":"owner","ids":[[0,1]]}`
	_, err := readState([]byte(in), 1024, 8)
	assert.ErrorIs(t, err, ErrInvalidCarry, "a run without a replay set")
}

// TestCarryKeysKeepTheNewest: runs that name more than RecentKeys keys in all keep the newest.
func TestCarryKeysKeepTheNewest(t *testing.T) {
	runs := strings.TrimSuffix(strings.Repeat(`[1,2],`, RecentKeys+5), ",")
	in := `{"v":1,"owner":{"actor":"a"},"mode":"owner","ids":[` + runs + `,"last"],"replay":{"floor":0,"seen":[["e1",1],["e2",2]]}}`
	got, err := readState([]byte(in), 1<<20, 8)
	require.NoError(t, err)
	require.Len(t, got.Keys, RecentKeys)
	assert.Equal(t, "last", got.Keys[RecentKeys-1])
	assert.Equal(t, "e2", got.Keys[RecentKeys-2])
	assert.Equal(t, "e1", got.Keys[RecentKeys-3])
}

// fakeInbox holds signed envelopes at inbox positions; read counts the positions read.
type fakeInbox struct {
	at   map[int64]json.RawMessage
	read int
}

func (f *fakeInbox) put(t *testing.T, seq int64, id string, iat int64) {
	t.Helper()
	e := envelope.Sign(bytes.Repeat([]byte{7}, 32), envelope.Envelope{ConversationID: "c1", Kind: envelope.KindUser,
		ID: id, IAT: iat, Text: "hello", Asker: envelope.Identity{Actor: "a"}})
	b, err := json.Marshal(record.WireEnvelope(e))
	require.NoError(t, err)
	if f.at == nil {
		f.at = map[int64]json.RawMessage{}
	}
	f.at[seq] = b
}

func (f *fakeInbox) messages(seqs []int64) ([]kernel.Message, error) {
	var out []kernel.Message
	for _, s := range seqs {
		f.read++
		p, ok := f.at[s]
		if !ok {
			return nil, fmt.Errorf("%w: no entry %d", kernel.ErrUnreadable, s)
		}
		out = append(out, kernel.Message{Seq: s, Payload: p})
	}
	return out, nil
}

// refState is a state whose replay set holds, oldest first, "old" (no position), then the
// envelopes of inbox positions 3, 4, 5 and 9, which in holds; its keys name all but "old".
func refState(t *testing.T, in *fakeInbox) *state {
	s := sampleState(0)
	s.Replay = envelope.NewReplaySet(8)
	s.Replay.Add("old", 900)
	for _, p := range []int64{3, 4, 5, 9} {
		id := fmt.Sprintf("env-%d", p)
		in.put(t, p, id, 1000+p)
		s.Replay.AddRef(id, 1000+p, p)
	}
	s.Replay.RaiseFloor(850)
	s.Keys = []string{"k", "env-3", "env-4", "env-5", "env-9"}
	s.Pending = nil
	return s
}

// TestCarryNamesAcceptedEnvelopesByInboxPosition: an entry of the replay set whose inbox position
// is known is carried as that position (consecutive ones as one run), not as its id and issue
// time; the next generation reads them from the inbox back to the same set, positions and all,
// and carries them the same way again.
func TestCarryNamesAcceptedEnvelopesByInboxPosition(t *testing.T) {
	in := &fakeInbox{}
	s := refState(t, in)
	carry := carryOf(t, s)
	var c struct {
		Replay json.RawMessage `json:"replay"`
	}
	require.NoError(t, json.Unmarshal(carry, &c))
	assert.Equal(t, `{"floor":850,"seen":[["old",900],[3,3],[9,1]]}`, string(c.Replay))
	assert.Equal(t, `["k",[3,4]]`, carriedIDs(t, carry))
	assert.NotContains(t, string(carry), "env-", "no id the inbox holds is copied")

	got, err := readStateFrom(carry, 1<<20, 8, in.messages)
	require.NoError(t, err)
	assert.Equal(t, 4, in.read, "each named position read once")
	require.Equal(t, 5, got.Replay.Len())
	for i, want := range []struct {
		id       string
		iat, ref int64
	}{{"old", 900, 0}, {"env-3", 1003, 3}, {"env-4", 1004, 4}, {"env-5", 1005, 5}, {"env-9", 1009, 9}} {
		id, iat, ref, ok := got.Replay.EntryAt(i)
		require.True(t, ok)
		assert.Equal(t, want.id, id, i)
		assert.Equal(t, want.iat, iat, i)
		assert.Equal(t, want.ref, ref, i)
	}
	assert.Equal(t, int64(850), got.Replay.Floor())
	assert.Equal(t, s.Keys, got.Keys)
	assert.Equal(t, string(carry), string(carryOf(t, got)), "carried again the same way")
}

// TestCarryRefsMissingFromTheInboxAreDamage: a position the inbox does not hold, or holds no
// envelope at, fails the read with ErrInvalidCarry and kernel.ErrUnreadable; a carry that names
// positions read without an inbox is refused; a run past the bound is refused before any read.
func TestCarryRefsMissingFromTheInboxAreDamage(t *testing.T) {
	in := &fakeInbox{}
	carry := carryOf(t, refState(t, in))

	delete(in.at, 4)
	_, err := readStateFrom(carry, 1<<20, 8, in.messages)
	assert.ErrorIs(t, err, ErrInvalidCarry)
	assert.ErrorIs(t, err, kernel.ErrUnreadable)

	in.at[4] = json.RawMessage(`{"not":"an envelope"}`)
	_, err = readStateFrom(carry, 1<<20, 8, in.messages)
	assert.ErrorIs(t, err, ErrInvalidCarry)
	assert.ErrorIs(t, err, kernel.ErrUnreadable)

	_, err = readStateFrom(carry, 1<<20, 8, nil)
	assert.ErrorIs(t, err, ErrInvalidCarry, "no inbox")

	for _, seen := range []string{`[[1,1000000000]]`, `[[0,1]]`, `[[-2,1]]`, `[[1,0]]`, `[[1,1,1]]`, `[[1.5,1]]`, `[["a"]]`} {
		in := &fakeInbox{}
		input := `{"v":1,"owner":{"actor":"a"},"mode":"owner","replay":{"floor":0,"seen":` + seen + `}}`
		_, err := readStateFrom([]byte(input), 1<<20, 8, in.messages)
		assert.ErrorIs(t, err, ErrInvalidCarry, seen)
		assert.Zero(t, in.read, seen)
	}
}

// TestCarryRefsAtALoweredCapacity: a set carried with more entries than the capacity it is read
// at keeps the newest, and the keys naming the evicted ones still read.
func TestCarryRefsAtALoweredCapacity(t *testing.T) {
	in := &fakeInbox{}
	carry := carryOf(t, refState(t, in))
	got, err := readStateFrom(carry, 1<<20, 2, in.messages)
	require.NoError(t, err)
	assert.Equal(t, 2, got.Replay.Len())
	assert.True(t, got.Replay.Contains("env-9"))
	assert.False(t, got.Replay.Contains("env-4"))
	assert.Equal(t, int64(1004), got.Replay.Floor(), "raised by the evicted entries")
	assert.Equal(t, []string{"k", "env-3", "env-4", "env-5", "env-9"}, got.Keys)
}

// TestCarryNamesThePendingMessageByInboxPosition: a pending message is carried as its position
// alone and read back from the inbox whole; one carried whole (versions 1 and 2) reads as it was
// written; a position the inbox does not hold, or a carry read without an inbox, is refused.
func TestCarryNamesThePendingMessageByInboxPosition(t *testing.T) {
	s := sampleState(2)
	carry := carryOf(t, s)
	var c struct {
		Pending json.RawMessage `json:"pending"`
	}
	require.NoError(t, json.Unmarshal(carry, &c))
	assert.Equal(t, `{"seq":9}`, string(c.Pending))
	got, err := readState(carry, 1<<20, 8)
	require.NoError(t, err)
	assert.Equal(t, s.Pending, got.Pending)

	whole := `{"v":1,"owner":{"actor":"a"},"mode":"owner","pending":{"seq":4,"sender":{"actor":"a"},"messageId":"m4","key":"k4","payload":{"kind":"user"},"time":7}}`
	got, err = readStateFrom([]byte(whole), 1<<20, 8, nil)
	require.NoError(t, err)
	assert.Equal(t, &kernel.Message{Seq: 4, Sender: loomtype.Identity{Actor: "a"}, MessageID: "m4", Key: "k4", Payload: json.RawMessage(`{"kind":"user"}`), Time: 7}, got.Pending)

	for name, in := range map[string]inboxReader{"no inbox": nil, "not held": (&fakeInbox{}).messages} {
		_, err := readStateFrom(carry, 1<<20, 8, in)
		assert.ErrorIs(t, err, ErrInvalidCarry, name)
	}
	_, err = readStateFrom(carry, 1<<20, 8, (&fakeInbox{}).messages)
	assert.ErrorIs(t, err, kernel.ErrUnreadable)
	zero := `{"v":1,"owner":{"actor":"a"},"mode":"owner","pending":{"seq":0}}`
	_, err = readStateFrom([]byte(zero), 1<<20, 8, sampleInbox)
	assert.ErrorIs(t, err, ErrInvalidCarry, "position 0")
}
