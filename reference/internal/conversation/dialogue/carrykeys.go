package dialogue

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
)

// The carry's keys. A message the engine signed for its owner has the sender key as its envelope
// id, so the newest keys are mostly ids the carried replay set holds already. Since journal
// version 3 the carry names those by their place in the set instead of writing them a second
// time: "ids" is an array, oldest key first, whose items are either a key (a string) or a run
// [b, n], the n ids of the replay set that start b places back from its newest id (0 is the
// newest) and go towards the newest, b, b-1, ..., b-n+1. A carry of version 1 or 2 holds strings
// only, and reads as it always did.
//
//	{"ids":["k0",[5,3]],"replay":{"floor":0,"seen":[...]}} // k0, then the ids 5, 4 and 3 back

// MarshalJSON writes the state as the carry: its fields by their JSON names, the keys as above.
func (s state) MarshalJSON() ([]byte, error) {
	type plain state
	w := struct {
		plain
		Keys json.RawMessage `json:"ids,omitempty"`
	}{plain: plain(s), Keys: encodeKeys(s.Keys, s.Replay)}
	return json.Marshal(w)
}

// UnmarshalJSON reads a carry written by MarshalJSON or by an earlier version. The replay set is
// read into s.Replay as it is (its capacity kept), and the keys' runs are read from it.
func (s *state) UnmarshalJSON(b []byte) error {
	type plain state
	w := struct {
		*plain
		Keys json.RawMessage `json:"ids"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	keys, err := decodeKeys(w.Keys, s.Replay, b)
	if err != nil {
		return err
	}
	s.Keys = keys
	return nil
}

// encodeKeys is the "ids" of the carry of keys, each named by its place in replay when it
// holds it; nil for no keys.
func encodeKeys(keys []string, replay *envelope.ReplaySet) json.RawMessage {
	if len(keys) == 0 {
		return nil
	}
	back := make(map[string]int, replay.Len())
	for i := range replay.Len() {
		id, _ := replay.Back(i)
		back[id] = i
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i := 0; i < len(keys); {
		if i > 0 {
			b.WriteByte(',')
		}
		at, held := back[keys[i]]
		if !held {
			k, _ := json.Marshal(keys[i]) // a string always encodes
			b.Write(k)
			i++
			continue
		}
		n := 1
		for i+n < len(keys) && at-n >= 0 {
			if next, ok := back[keys[i+n]]; !ok || next != at-n {
				break
			}
			n++
		}
		fmt.Fprintf(&b, "[%d,%d]", at, n)
		i += n
	}
	b.WriteByte(']')
	return b.Bytes()
}

// decodeKeys reads the "ids" of a carry against its replay set (read with the configured
// capacity), keeping the newest RecentKeys keys. When the configuration lowered the capacity
// since the carry was written, a run may name a place that set no longer holds: the set is then
// read again from the carry (whole, from carry) for the keys alone. A run that names a place the
// carry does not hold, or is not two integers with n >= 1, is refused (ErrInvalidCarry).
func decodeKeys(raw json.RawMessage, replay *envelope.ReplaySet, carry []byte) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%w: ids: %w", ErrInvalidCarry, err)
	}
	var keys []string
	for _, it := range items {
		if len(it) > 0 && it[0] == '"' {
			var k string
			if err := json.Unmarshal(it, &k); err != nil {
				return nil, fmt.Errorf("%w: ids: %w", ErrInvalidCarry, err)
			}
			keys = append(keys, k)
		} else {
			var run []int
			if err := json.Unmarshal(it, &run); err != nil || len(run) != 2 || run[1] < 1 || run[0]-run[1]+1 < 0 {
				return nil, fmt.Errorf("%w: ids: %s is no run", ErrInvalidCarry, it)
			}
			if run[0] >= replay.Len() && carry != nil && replay.Len() == replay.Capacity() {
				replay, carry = wholeReplay(carry), nil
			}
			if run[0] >= replay.Len() {
				return nil, fmt.Errorf("%w: ids: %s names a place the replay set does not hold", ErrInvalidCarry, it)
			}
			for b := run[0]; b > run[0]-run[1]; b-- {
				id, _ := replay.Back(b)
				keys = append(keys, id)
			}
		}
		if len(keys) > 2*RecentKeys {
			keys = append(keys[:0], keys[len(keys)-RecentKeys:]...)
		}
	}
	return keys, nil
}

// wholeReplay is the replay set of a carry read with a capacity that holds every id it names
// (each takes at least 8 bytes of it: ["a",0],); nil when it has none or it does not read.
func wholeReplay(carry []byte) *envelope.ReplaySet {
	var c struct {
		Replay json.RawMessage `json:"replay"`
	}
	if json.Unmarshal(carry, &c) != nil || len(c.Replay) == 0 {
		return nil
	}
	s, err := envelope.ParseReplaySet(c.Replay, len(c.Replay)/8+1)
	if err != nil {
		return nil
	}
	return s
}
