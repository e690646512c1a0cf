package stream

import (
	"encoding/json"
	"strconv"
)

// FirstRoomVersion is the room version of a session whose log holds no participant change: the
// room as the chat began.
const FirstRoomVersion int64 = 1

// maxStays bounds the stays a Room remembers of one person; past it the oldest are forgotten
// (what an assistant said during a forgotten stay is then not received again).
const maxStays = 32

// HandleID is the id of turn's reply handle, the rid of every frame the assistant puts into the
// room for that turn: "r" and the turn. It depends on the turn alone, so a replay, a restart or
// a second process gives the same rid.
//
//	stream.HandleID(3) // "r3"
func HandleID(turn int64) string { return "r" + strconv.FormatInt(turn, 10) }

// Room is who is in a chat, by room version. The version is FirstRoomVersion when the session's
// log starts and goes up by one with each participant-joined or participant-left frame logged.
// A Room is a value: Apply returns a new one and never changes its receiver, so a Room handed to
// a reader stays as it was.
//
// A person the Room holds nothing of has been in the room since its first version (the chat's
// owner and the participants it started with); the door (who may open the session) decides who
// is in it at all.
type Room struct {
	// Ver is the room version now.
	Ver int64 `json:"ver"`
	// Stays holds, per person ("person:<actor>"), the versions at which they joined and left,
	// alternating, starting with a join (FirstRoomVersion for one in the room from its start);
	// an even count means they are out now.
	Stays map[string][]int64 `json:"stays,omitempty"`
	// Joined holds, per person, the cursor of the frame that logged their newest joining; it
	// judges frames logged before reply handles existed (no rid), which MayReceiveAt decides.
	Joined map[string]int64 `json:"joined,omitempty"`
}

// NewRoom is the room of a chat nobody joined or left: version FirstRoomVersion.
func NewRoom() Room { return Room{Ver: FirstRoomVersion} }

// Apply returns the room after frame f: a participant-joined or participant-left frame makes the
// next version, with its person in (joined) or out (left) from it; any other frame leaves the
// room as it is. A join of a person already in, or a leave of one already out, still makes a
// version (the frame was logged) and changes nobody's stays.
//
//	r = r.Apply(f)
func (r Room) Apply(f Frame) Room {
	if r.Ver < FirstRoomVersion {
		r.Ver = FirstRoomVersion
	}
	k := f.Kind()
	if k != KindParticipantJoined && k != KindParticipantLeft {
		return r
	}
	var d struct {
		Who string `json:"who"`
	}
	_ = json.Unmarshal(f.Data, &d)
	out := Room{Ver: r.Ver + 1, Stays: make(map[string][]int64, len(r.Stays)+1), Joined: make(map[string]int64, len(r.Joined)+1)}
	for p, s := range r.Stays {
		out.Stays[p] = s
	}
	for p, c := range r.Joined {
		out.Joined[p] = c
	}
	if d.Who == "" {
		return out
	}
	s := append([]int64(nil), out.Stays[d.Who]...)
	in := len(s)%2 == 1
	switch {
	case k == KindParticipantJoined && !in:
		s = append(s, out.Ver)
		out.Joined[d.Who] = f.Cur
	case k == KindParticipantLeft && len(s) == 0:
		s = []int64{FirstRoomVersion, out.Ver}
	case k == KindParticipantLeft && in:
		s = append(s, out.Ver)
	}
	if drop := len(s) - maxStays; drop > 0 {
		s = s[drop+drop%2:] // whole stays, so that the list still starts with a join
	}
	if len(s) > 0 {
		out.Stays[d.Who] = s
	}
	return out
}

// MayReceive reports whether person who receives what a reply handle opened at room version ver
// put into the room: who was in the room at version ver (joined at or before it, not left
// before it) and is in it now. A person the Room holds nothing of has been in it throughout.
//
//	ok := r.MayReceive("person:bob", f.Ver)
func (r Room) MayReceive(who string, ver int64) bool {
	s := r.Stays[who]
	if len(s) == 0 {
		return true
	}
	if len(s)%2 == 0 {
		return false // out now
	}
	for i := 0; i < len(s); i += 2 {
		if s[i] > ver {
			return false
		}
		if i+1 == len(s) || ver < s[i+1] {
			return true
		}
	}
	return false
}

// MayReceiveAt reports whether person who receives an assistant's frame logged before reply
// handles existed (it has no rid): whether it comes after the frame that logged who's newest
// joining, and who is in the room now.
func (r Room) MayReceiveAt(who string, cur int64) bool {
	s := r.Stays[who]
	if len(s)%2 == 0 && len(s) > 0 {
		return false
	}
	return cur >= r.Joined[who]
}
