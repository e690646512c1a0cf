package envelope

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// DefaultReplayCapacity is the number of consumed ids a [ReplaySet] remembers when no capacity is
// given.
const DefaultReplayCapacity = 1024

// ReplaySet remembers the ids of consumed envelopes, in the order they were added, up to a fixed
// capacity, together with a high-water floor.
//
// When the set is full, adding an id evicts the oldest one and raises the floor to the larger of
// the floor and the evicted id's issue time. [Check] treats an issue time at or below the floor as
// stale, so an evicted id can never be accepted again: flooding the set only raises the floor,
// never lowers it and never reopens an id.
//
// The zero value is an empty set with [DefaultReplayCapacity] and floor 0; a nil *ReplaySet reads
// as empty. A ReplaySet is not safe for concurrent use; a conversation owns exactly one. Its JSON
// form (the carry format of spec/envelopes.md) is produced by MarshalJSON and read by UnmarshalJSON
// or [ParseReplaySet].
//
//	s := envelope.NewReplaySet(0)
//	s.Add("m1", 1700000000000)
//	s.Contains("m1") // true
type ReplaySet struct {
	capacity int
	queue    []replayEntry // oldest first
	index    map[string]struct{}
	floor    int64
}

type replayEntry struct {
	id  string
	iat int64
	ref int64 // where the caller keeps the envelope (AddRef), 0 for none
}

// NewReplaySet returns an empty set holding up to capacity ids; capacity <= 0 selects
// [DefaultReplayCapacity].
//
//	seen := envelope.NewReplaySet(0) // 1 024 ids
func NewReplaySet(capacity int) *ReplaySet {
	s := &ReplaySet{}
	s.init(capacity)
	return s
}

func (s *ReplaySet) init(capacity int) {
	if capacity <= 0 {
		capacity = DefaultReplayCapacity
	}
	s.capacity = capacity
	s.index = make(map[string]struct{})
}

// Capacity returns the most ids the set holds.
//
//	envelope.NewReplaySet(8).Capacity() // 8
func (s *ReplaySet) Capacity() int {
	if s == nil || s.capacity <= 0 {
		return DefaultReplayCapacity
	}
	return s.capacity
}

// Len returns the number of ids held.
//
//	n := seen.Len() // at most seen.Capacity()
func (s *ReplaySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.queue)
}

// Back returns the id held i places back from the newest (0 is the newest), and false when the
// set holds no id that far back.
//
//	id, ok := seen.Back(0) // the id added last
func (s *ReplaySet) Back(i int) (string, bool) {
	if s == nil || i < 0 || i >= len(s.queue) {
		return "", false
	}
	return s.queue[len(s.queue)-1-i].id, true
}

// EntryAt returns the i-th id held, oldest first (0 is the oldest), with its issue time and the
// ref AddRef noted (0 for none); ok is false past the newest.
//
//	id, iat, ref, ok := seen.EntryAt(0)
func (s *ReplaySet) EntryAt(i int) (id string, iat, ref int64, ok bool) {
	if s == nil || i < 0 || i >= len(s.queue) {
		return "", 0, 0, false
	}
	e := s.queue[i]
	return e.id, e.iat, e.ref, true
}

// RaiseFloor sets the floor to f when f is above it: a set restored entry by entry gets back the
// floor of the set it was carried from.
//
//	seen.RaiseFloor(carriedFloor)
func (s *ReplaySet) RaiseFloor(f int64) {
	if f > s.floor {
		s.floor = f
	}
}

// Floor returns the largest issue time of any id evicted so far (or restored as the floor), 0 if
// none. [Check] treats an issue time at or below it as stale.
//
//	f := seen.Floor()
func (s *ReplaySet) Floor() int64 {
	if s == nil {
		return 0
	}
	return s.floor
}

// Contains reports whether id is held. An evicted id is no longer held; its issue time is at or
// below Floor.
//
//	if seen.Contains(id) { /* replayed */ }
func (s *ReplaySet) Contains(id string) bool {
	if s == nil || s.index == nil {
		return false
	}
	_, ok := s.index[id]
	return ok
}

// Add records id, issued at iat, as consumed and reports whether it was added. It is a no-op
// returning false when id is already held or is not a [ValidID] (no such id can pass [Check]).
// When the set is full the oldest id is evicted first and the floor becomes
// max(floor, evicted iat).
//
//	if v.OK { seen.Add(v.Envelope.ID, v.Envelope.IAT) }
func (s *ReplaySet) Add(id string, iat int64) bool { return s.AddRef(id, iat, 0) }

// AddRef is Add, with ref (a positive number) noted beside the id: where the caller keeps the
// envelope, so that a carry may name it there instead of copying it (EntryAt reads it back). The
// carry form of MarshalJSON does not hold it.
//
//	seen.AddRef(e.ID, e.IAT, inboxSeq)
func (s *ReplaySet) AddRef(id string, iat, ref int64) bool {
	if !ValidID(id) {
		return false
	}
	if s.index == nil {
		s.init(s.capacity)
	}
	if _, ok := s.index[id]; ok {
		return false
	}
	for len(s.queue) >= s.capacity {
		s.evict()
	}
	s.queue = append(s.queue, replayEntry{id: id, iat: iat, ref: ref})
	s.index[id] = struct{}{}
	return true
}

func (s *ReplaySet) evict() {
	old := s.queue[0]
	s.queue[0] = replayEntry{}
	s.queue = s.queue[1:]
	delete(s.index, old.id)
	if old.iat > s.floor {
		s.floor = old.iat
	}
}

// MarshalJSON returns the carry form {"floor":F,"seen":[[id,iat],...]}: ids oldest first, no
// whitespace, strings escaped as in [Canonical]. The output is deterministic and never fails.
//
//	carry, _ := json.Marshal(seen)
func (s ReplaySet) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 32+len(s.queue)*(24+16))
	b = append(b, `{"floor":`...)
	b = strconv.AppendInt(b, s.floor, 10)
	b = append(b, `,"seen":[`...)
	for i, e := range s.queue {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendString(b, e.id)
		b = append(b, ',')
		b = strconv.AppendInt(b, e.iat, 10)
		b = append(b, ']')
	}
	b = append(b, "]}"...)
	return b, nil
}

// ErrInvalidCarry is matched (errors.Is) by every [*CarryError].
//
//	if _, err := envelope.ParseReplaySet(b, 0); errors.Is(err, envelope.ErrInvalidCarry) { ... }
var ErrInvalidCarry = errors.New("envelope: invalid replay carry")

// CarryError says a replay carry was refused. Offset is the byte offset where reading stopped.
//
//	var ce *envelope.CarryError
//	if errors.As(err, &ce) { log(ce.Offset) }
type CarryError struct {
	Offset int
}

func (e *CarryError) Error() string {
	return "envelope: invalid replay carry at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns [ErrInvalidCarry].
func (e *CarryError) Unwrap() error { return ErrInvalidCarry }

// UnmarshalJSON replaces the set's contents with a carry, keeping the set's capacity (the default
// for a zero set). The input is treated as untrusted; see [ParseReplaySet] for the rules. On error
// the set is left unchanged. The JSON literal null is a no-op. Through encoding/json, a carry that
// is not JSON at all fails with *json.SyntaxError before this method runs.
//
//	seen := envelope.NewReplaySet(cfgCapacity)
//	err := json.Unmarshal(carry, seen)
func (s *ReplaySet) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	n, err := ParseReplaySet(data, s.capacity)
	if err != nil {
		return err
	}
	*s = *n
	return nil
}

// ParseReplaySet reads a carry into a new set with the given capacity (<= 0 selects
// [DefaultReplayCapacity]).
//
// The carry must be valid UTF-8 and one JSON object with exactly the members "floor" (an integer
// in 0..[MaxSafeInteger]) and "seen" (an array of two-element arrays [id, iat], id a [ValidID]
// string and iat an integer in 0..MaxSafeInteger, no id twice), oldest first. Integers have no
// fraction or exponent. Entries beyond the capacity are evicted as [ReplaySet.Add] would, oldest
// first, raising the floor, so memory stays bounded by the capacity whatever the input. Any
// breach returns a [*CarryError].
//
//	seen, err := envelope.ParseReplaySet(carry.Seen, 0)
func ParseReplaySet(data []byte, capacity int) (*ReplaySet, error) {
	s := NewReplaySet(capacity)
	p := &reader{s: data}
	fail := func() (*ReplaySet, error) { return nil, &CarryError{Offset: p.i} }
	if !utf8.Valid(data) {
		return fail()
	}
	var haveFloor, haveSeen bool
	var floor int64
	ok := p.object(func(key string) bool {
		switch key {
		case "floor":
			if haveFloor {
				return false
			}
			haveFloor = true
			var ok bool
			floor, ok = p.integer()
			return ok
		case "seen":
			if haveSeen {
				return false
			}
			haveSeen = true
			return p.array(func() bool {
				var id string
				var iat int64
				n := 0
				ok := p.array(func() bool {
					var ok bool
					switch n {
					case 0:
						id, ok = p.str()
					case 1:
						iat, ok = p.integer()
					}
					n++
					return ok
				})
				return ok && n == 2 && s.Add(id, iat)
			})
		}
		return false
	})
	if !ok || !haveFloor || !haveSeen {
		return fail()
	}
	p.ws()
	if p.i != len(p.s) {
		return fail()
	}
	if floor > s.floor {
		s.floor = floor
	}
	return s, nil
}
