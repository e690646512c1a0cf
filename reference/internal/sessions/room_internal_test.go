package sessions

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

// TestStoredRoomEncodesAsTheRoom: the position's room, encoded once per room version, is
// written exactly as the room itself encodes, reads back as the room, and is encoded again when
// a join or a leave makes a new version (a stale encoding would store who was in the room
// before).
func TestStoredRoomEncodesAsTheRoom(t *testing.T) {
	join := func(cur int64, who string, k stream.Kind) stream.Frame {
		d, err := json.Marshal(map[string]string{"who": who, "by": "person:alice"})
		require.NoError(t, err)
		return stream.Frame{Cur: cur, Type: k.Type(), Data: d}
	}
	ss := &session{room: stream.NewRoom()}
	for i, f := range []stream.Frame{
		join(1, "person:bob", stream.KindParticipantJoined),
		join(2, "person:carol", stream.KindParticipantJoined),
		{Cur: 3, Type: stream.KindStatus.Type(), Data: json.RawMessage(`{"state":"working"}`)},
		join(4, "person:bob", stream.KindParticipantLeft),
	} {
		ss.room = ss.room.Apply(f)
		for range 2 { // made, then reused
			got, err := json.Marshal(posRecord{Next: "0.1", Room: ss.storedRoomLocked()})
			require.NoError(t, err)
			room := ss.room
			want, err := json.Marshal(struct {
				Next string       `json:"next"`
				Room *stream.Room `json:"room,omitempty"`
			}{"0.1", &room})
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(got), "frame %d", i)
			require.Equal(t, string(want), string(got), "frame %d: the same bytes", i)
			var back posRecord
			require.NoError(t, json.Unmarshal(got, &back))
			require.Equal(t, ss.room, back.Room.Room, "frame %d", i)
		}
	}
	require.Equal(t, []int64{2, 4}, ss.room.Stays["person:bob"], "bob joined at version 2 and left at 4")
}
