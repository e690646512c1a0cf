package dialogue

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
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
