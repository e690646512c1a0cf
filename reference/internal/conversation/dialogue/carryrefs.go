package dialogue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/loomcheck/loomcheck/reference/internal/envelope"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// What the carry names instead of copying (journal version 3). The replay set holds the id and
// issue time of each envelope the conversation accepted, and the inbox keeps every message it
// took, envelope and all: the carry names an entry the set noted the inbox position of by that
// position. "replay" is {"floor":F,"seen":[...]}, oldest first, each item either [id, iat] (an
// entry of no known position, as every entry of versions 1 and 2 is) or a run [p, n], the
// envelopes of the n inbox positions p, p+1, ..., p+n-1. The next generation reads those
// envelopes from the inbox (kernel.Context.InboxAt); a position the inbox does not hold is damage
// and the generation fails with it.
//
// The newest keys are mostly ids the set holds (a message the engine signed for its owner has its
// sender key as its envelope id): "ids" is an array, oldest key first, whose items are either a
// key (a string) or a run [b, n], the n ids of the replay set that start b places back from its
// newest id (0 is the newest) and go towards the newest, b, b-1, ..., b-n+1. A carry of version 1
// or 2 holds strings only in both, and reads as it always did.
//
// A message taken up and left for the next generation (pending) is carried as its inbox position
// alone, {"seq":N}, and read back from the inbox; versions 1 and 2 carried it whole.
//
//	{"ids":["k0",[5,3]],"replay":{"floor":0,"seen":[["e1",1700000000000],[12,40]]}}

// inboxReader reads the inbox entries at the positions given, in order (kernel.Context.InboxAt).
type inboxReader func(seqs []int64) ([]kernel.Message, error)

// maxCarryRefs bounds the inbox entries an untrusted carry may name, beyond the set's capacity.
const maxCarryRefs = 1 << 16

// MarshalJSON writes the state as the carry: its fields by their JSON names, the replay set and
// the keys as above.
func (s state) MarshalJSON() ([]byte, error) {
	type plain state
	w := struct {
		plain
		Keys    json.RawMessage `json:"ids,omitempty"`
		Pending json.RawMessage `json:"pending,omitempty"`
		Replay  json.RawMessage `json:"replay,omitempty"`
	}{plain: plain(s), Keys: encodeKeys(s.Keys, s.Replay), Replay: encodeReplay(s.Replay)}
	switch {
	case s.Pending != nil && s.Pending.Seq > 0:
		w.Pending = strconv.AppendInt([]byte(`{"seq":`), s.Pending.Seq, 10)
		w.Pending = append(w.Pending, '}')
	case s.Pending != nil:
		p, err := json.Marshal(s.Pending)
		if err != nil {
			return nil, err
		}
		w.Pending = p
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a carry's fields, keeping its replay set and keys as they were written:
// restore reads them, with the inbox the replay set may name.
func (s *state) UnmarshalJSON(b []byte) error {
	type plain state
	w := struct {
		*plain
		Keys    json.RawMessage `json:"ids"`
		Pending *kernel.Message `json:"pending"`
		Replay  json.RawMessage `json:"replay"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	s.rawKeys, s.rawReplay, s.Pending = w.Keys, w.Replay, w.Pending
	return nil
}

// restore reads the replay set (at capacity replaySize) and the keys of a carry read by
// UnmarshalJSON, the set's runs from inbox (nil refuses any run).
func (s *state) restore(replaySize int, inbox inboxReader) error {
	rawKeys, rawReplay := s.rawKeys, s.rawReplay
	s.rawKeys, s.rawReplay = nil, nil
	s.Replay = envelope.NewReplaySet(replaySize)
	if len(rawReplay) > 0 && string(rawReplay) != "null" {
		r, err := decodeReplay(rawReplay, replaySize, inbox)
		if err != nil {
			return err
		}
		s.Replay = r
	}
	keys, err := decodeKeys(rawKeys, s.Replay, func() *envelope.ReplaySet {
		whole, err := decodeReplay(rawReplay, -1, inbox)
		if err != nil {
			return nil
		}
		return whole
	})
	if err != nil {
		return err
	}
	s.Keys = keys
	if p := s.Pending; p != nil && p.Payload == nil {
		if inbox == nil || p.Seq < 1 {
			return fmt.Errorf("%w: pending message %d and no inbox to read it from", ErrInvalidCarry, p.Seq)
		}
		msgs, err := inbox([]int64{p.Seq})
		if err == nil && len(msgs) != 1 {
			err = kernel.ErrUnreadable
		}
		if err != nil {
			return fmt.Errorf("%w: pending message: %w", ErrInvalidCarry, err)
		}
		s.Pending = &msgs[0]
	}
	return nil
}

// encodeReplay is the carry of the replay set; nil for none.
func encodeReplay(r *envelope.ReplaySet) json.RawMessage {
	if r == nil {
		return nil
	}
	b := []byte(`{"floor":`)
	b = strconv.AppendInt(b, r.Floor(), 10)
	b = append(b, `,"seen":[`...)
	for i := 0; i < r.Len(); {
		if i > 0 {
			b = append(b, ',')
		}
		id, iat, ref, _ := r.EntryAt(i)
		if ref <= 0 {
			k, _ := json.Marshal(id) // a string always encodes
			b = append(append(append(append(b, '['), k...), ','), strconv.FormatInt(iat, 10)...)
			b = append(b, ']')
			i++
			continue
		}
		n := 1
		for ; i+n < r.Len(); n++ {
			if _, _, next, _ := r.EntryAt(i + n); next != ref+int64(n) {
				break
			}
		}
		b = fmt.Appendf(b, "[%d,%d]", ref, n)
		i += n
	}
	return append(b, "]}"...)
}

// replayItem is one entry of a carried replay set: an id and its issue time, or an inbox
// position.
type replayItem struct {
	id  string
	iat int64
	ref int64
}

// decodeReplay reads a carried replay set at capacity (below 0: every entry it holds), the
// envelopes its runs name read from inbox.
func decodeReplay(raw json.RawMessage, capacity int, inbox inboxReader) (*envelope.ReplaySet, error) {
	strict, perr := envelope.ParseReplaySet(raw, capacity)
	if perr == nil && capacity >= 0 {
		return strict, nil // ids and issue times only, as versions 1 and 2 wrote
	}
	var c struct {
		Floor *int64            `json:"floor"`
		Seen  []json.RawMessage `json:"seen"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Floor == nil || *c.Floor < 0 || c.Seen == nil {
		return nil, fmt.Errorf("%w: replay set", ErrInvalidCarry)
	}
	items, refs, err := replayItems(c.Seen, max(capacity, 0))
	if err != nil {
		return nil, err
	}
	if len(refs) == 0 && perr != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidCarry, perr)
	}
	if len(refs) > 0 {
		if inbox == nil {
			return nil, fmt.Errorf("%w: replay set names inbox entries and no inbox was given", ErrInvalidCarry)
		}
		msgs, err := inbox(refs)
		if err != nil {
			return nil, fmt.Errorf("%w: replay set: %w", ErrInvalidCarry, err)
		}
		if len(msgs) != len(refs) {
			return nil, fmt.Errorf("%w: replay set: %d inbox entries read for %d named: %w", ErrInvalidCarry, len(msgs), len(refs), kernel.ErrUnreadable)
		}
		k := 0
		for i := range items {
			if items[i].ref == 0 {
				continue
			}
			e, err := envelope.Parse(msgs[k].Payload)
			if err != nil {
				return nil, fmt.Errorf("%w: replay set: inbox entry %d holds no envelope: %w", ErrInvalidCarry, items[i].ref, kernel.ErrUnreadable)
			}
			items[i].id, items[i].iat = e.ID, e.IAT
			k++
		}
	}
	if capacity < 0 {
		capacity = len(items)
	}
	r := envelope.NewReplaySet(capacity)
	for _, it := range items {
		if it.iat < 0 || !r.AddRef(it.id, it.iat, it.ref) {
			return nil, fmt.Errorf("%w: replay set: id %q twice or not an id", ErrInvalidCarry, it.id)
		}
	}
	r.RaiseFloor(*c.Floor)
	return r, nil
}

// replayItems reads the items of a carried replay set, and the inbox positions its runs name in
// order.
func replayItems(seen []json.RawMessage, capacity int) ([]replayItem, []int64, error) {
	var items []replayItem
	var refs []int64
	for _, it := range seen {
		var pair []json.RawMessage
		if err := json.Unmarshal(it, &pair); err != nil || len(pair) != 2 {
			return nil, nil, fmt.Errorf("%w: replay set: %s", ErrInvalidCarry, it)
		}
		var iat int64
		if err := json.Unmarshal(pair[1], &iat); err != nil {
			return nil, nil, fmt.Errorf("%w: replay set: %s", ErrInvalidCarry, it)
		}
		var id string
		if json.Unmarshal(pair[0], &id) == nil {
			items = append(items, replayItem{id: id, iat: iat})
			continue
		}
		var p int64
		if err := json.Unmarshal(pair[0], &p); err != nil || p < 1 || iat < 1 || len(refs)+int(min(iat, maxCarryRefs+1)) > max(capacity, maxCarryRefs) {
			return nil, nil, fmt.Errorf("%w: replay set: %s names no inbox entries", ErrInvalidCarry, it)
		}
		for j := range iat {
			refs = append(refs, p+j)
			items = append(items, replayItem{ref: p + j})
		}
	}
	return items, refs, nil
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
// read again whole (wholeSet) for the keys alone. A run that names a place the carry does not
// hold, or is not two integers with n >= 1, is refused (ErrInvalidCarry).
func decodeKeys(raw json.RawMessage, replay *envelope.ReplaySet, wholeSet func() *envelope.ReplaySet) ([]string, error) {
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
			if run[0] >= replay.Len() && wholeSet != nil && replay.Len() == replay.Capacity() {
				replay, wholeSet = wholeSet(), nil
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
