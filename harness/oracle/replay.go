package oracle

import (
	"errors"
	"strings"
)

// ErrInvalidCarry is wrapped by every error [ReadReplaySet] returns.
var ErrInvalidCarry = errors.New("oracle: invalid replay-set carry")

// ReplaySet is the bounded set of consumed envelope ids with its floor (spec/envelopes.md §6). The
// zero value is not usable; make one with [NewReplaySet]. Not safe for concurrent use.
//
//	s := oracle.NewReplaySet(8)
//	s.Add("m1", 1767225599000)
type ReplaySet struct {
	limit int
	floor int64
	ids   []string
	iats  []int64
	held  map[string]bool
}

// NewReplaySet returns an empty set holding at most capacity ids (the default 1 024 when
// capacity <= 0), with floor 0.
//
//	s := oracle.NewReplaySet(0) // capacity 1 024
func NewReplaySet(capacity int) *ReplaySet {
	if capacity <= 0 {
		capacity = DefaultReplayLimit
	}
	return &ReplaySet{limit: capacity, held: map[string]bool{}}
}

// Add records (id, iat) and reports whether it was new. A held id changes nothing; otherwise the
// oldest entries are evicted while the set is full, each raising the floor to its iat if higher.
//
//	fresh := s.Add(e.ID, e.IAT)
func (s *ReplaySet) Add(id string, iat int64) bool {
	if s.held[id] {
		return false
	}
	for len(s.ids) >= s.limit {
		if s.iats[0] > s.floor {
			s.floor = s.iats[0]
		}
		delete(s.held, s.ids[0])
		s.ids, s.iats = s.ids[1:], s.iats[1:]
	}
	s.ids, s.iats = append(s.ids, id), append(s.iats, iat)
	s.held[id] = true
	return true
}

// Contains reports whether id is held.
//
//	if s.Contains(e.ID) { /* replayed */ }
func (s *ReplaySet) Contains(id string) bool { return s.held[id] }

// Floor is the highest issue time evicted so far (0 at first).
//
//	stale := e.IAT <= s.Floor()
func (s *ReplaySet) Floor() int64 { return s.floor }

// Held lists the held ids, oldest first.
//
//	ids := s.Held()
func (s *ReplaySet) Held() []string { return append([]string{}, s.ids...) }

// Carry returns the set's carry form (spec/envelopes.md §6.1), exactly:
// {"floor":F,"seen":[[id,iat],...]} with the oldest entry first.
//
//	b := s.Carry()
func (s *ReplaySet) Carry() []byte {
	var sb strings.Builder
	sb.WriteString(`{"floor":` + integer(s.floor) + `,"seen":[`)
	for i, id := range s.ids {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('[')
		quote(&sb, id)
		sb.WriteString("," + integer(s.iats[i]) + "]")
	}
	sb.WriteString("]}")
	return []byte(sb.String())
}

// ReadReplaySet reads a carry (spec/envelopes.md §6.1) into a set of the given capacity, replaying
// its entries as Add operations; the floor is the higher of the carried one and the one those
// evictions produce. A carry that breaks any rule of §6.1 is an error wrapping [ErrInvalidCarry].
//
//	s, err := oracle.ReadReplaySet(carry, 1024)
func ReadReplaySet(carry []byte, capacity int) (*ReplaySet, error) {
	bad := func(why string) (*ReplaySet, error) { return nil, errors.Join(ErrInvalidCarry, errors.New(why)) }
	v, why := decodeJSON(carry)
	if why != "" {
		return bad(why)
	}
	if v.kind != 'o' || len(v.members) != 2 {
		return bad("not an object with exactly floor and seen")
	}
	var floor *value
	var seen *value
	for i := range v.members {
		switch v.members[i].key {
		case "floor":
			floor = &v.members[i].val
		case "seen":
			seen = &v.members[i].val
		}
	}
	if floor == nil || seen == nil || seen.kind != 'a' {
		return bad("floor or seen missing, or seen not an array")
	}
	f, ok := safeInteger(*floor)
	if !ok {
		return bad("floor is not an integer in 0..2^53-1")
	}
	s := NewReplaySet(capacity)
	for _, it := range seen.items {
		if it.kind != 'a' || len(it.items) != 2 || it.items[0].kind != 's' || !validID(it.items[0].text) {
			return bad("an entry that is not [id, iat]")
		}
		iat, ok := safeInteger(it.items[1])
		if !ok {
			return bad("an entry's iat is not an integer in 0..2^53-1")
		}
		if !s.Add(it.items[0].text, iat) {
			return bad("an id repeated while held")
		}
	}
	if f > s.floor {
		s.floor = f
	}
	return s, nil
}

// CheckInput is what [Check] decides on. Keys are the accepted keys, the current one first; Voices
// admits the identities that may speak (nil admits nobody); Now is the receipt time in Unix
// milliseconds; MaxAgeMs and MaxSkewMs are 0 for the defaults and negative for 0; Seen is the
// replay set (nil: empty, floor 0).
//
//	in := oracle.CheckInput{Raw: payload, Keys: keys, ConversationID: "c1", Now: nowMs,
//		Voices: func(id oracle.Identity) bool { return id == owner }}
type CheckInput struct {
	Raw            []byte
	Keys           [][]byte
	ConversationID string
	Voices         func(Identity) bool
	Now            int64
	MaxAgeMs       int64
	MaxSkewMs      int64
	Seen           *ReplaySet
}

// Check applies the acceptance rule of spec/envelopes.md §5 and returns "" for an accepted
// envelope or the reason of the first step that fails. It changes nothing.
//
//	if reason := oracle.Check(in); reason != "" { /* a rejected record with this reason */ }
func Check(in CheckInput) string {
	e, err := Parse(in.Raw)
	if err != nil {
		return ReasonMalformed
	}
	if Verify(in.Keys, e) != nil || e.ConversationID != in.ConversationID || in.Voices == nil || !in.Voices(e.Asker) {
		return ReasonUnauthenticated
	}
	seen := in.Seen
	if seen == nil {
		seen = NewReplaySet(0)
	}
	if seen.Contains(e.ID) {
		return ReasonReplayed
	}
	bound := func(v, def int64) int64 {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	age, skew := bound(in.MaxAgeMs, DefaultMaxAgeMs), bound(in.MaxSkewMs, DefaultMaxSkewMs)
	if e.IAT <= seen.Floor() || e.IAT < in.Now-age || e.IAT > in.Now+skew {
		return ReasonStale
	}
	return ""
}
