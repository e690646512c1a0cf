package stream_test

import (
	"encoding/json"
	"testing"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

func participant(k stream.Kind, cur int64, who string) stream.Frame {
	d, _ := json.Marshal(map[string]string{"who": who, "by": "person:alice"})
	return stream.Frame{Cur: cur, Type: k.Type(), Data: d}
}

func TestRoomVersionsAndMayReceive(t *testing.T) {
	r := stream.NewRoom()
	if r.Ver != 1 || !r.MayReceive("person:bob", 1) {
		t.Fatalf("a new room: %+v", r)
	}
	r1 := r.Apply(participant(stream.KindParticipantJoined, 4, "person:carol")) // version 2
	if r.Ver != 1 || len(r.Stays) != 0 {
		t.Fatalf("Apply changed its receiver: %+v", r)
	}
	r2 := r1.Apply(stream.Frame{Cur: 5, Type: stream.KindTextDone.Type(), Data: json.RawMessage("{}")})
	r3 := r2.Apply(participant(stream.KindParticipantLeft, 6, "person:bob"))   // version 3
	r4 := r3.Apply(participant(stream.KindParticipantJoined, 7, "person:bob")) // version 4
	cases := []struct {
		room stream.Room
		who  string
		ver  int64
		want bool
	}{
		{r1, "person:carol", 1, false}, // opened before she joined
		{r1, "person:carol", 2, true},  // opened as she joined
		{r1, "person:alice", 1, true},  // in from the start
		{r2, "person:carol", 2, true},  // another frame changes nothing
		{r3, "person:bob", 1, false},   // out now
		{r4, "person:bob", 1, true},    // in at version 1, and again now
		{r4, "person:bob", 3, false},   // out at version 3
		{r4, "person:bob", 4, true},
	}
	for i, c := range cases {
		if got := c.room.MayReceive(c.who, c.ver); got != c.want {
			t.Errorf("case %d: MayReceive(%s, %d) = %v", i, c.who, c.ver, got)
		}
	}
	if r2.Ver != 2 || r4.Ver != 4 {
		t.Fatalf("versions %d %d", r2.Ver, r4.Ver)
	}
	if r4.MayReceiveAt("person:bob", 6) || !r4.MayReceiveAt("person:bob", 7) || r3.MayReceiveAt("person:bob", 9) {
		t.Fatal("MayReceiveAt judges by the newest joined frame and by being in now")
	}
}

func TestRoomKeepsWholeStays(t *testing.T) {
	r := stream.NewRoom()
	for i := int64(0); i < 40; i++ {
		r = r.Apply(participant(stream.KindParticipantJoined, 2*i+1, "person:bob"))
		r = r.Apply(participant(stream.KindParticipantLeft, 2*i+2, "person:bob"))
	}
	r = r.Apply(participant(stream.KindParticipantJoined, 100, "person:bob"))
	if !r.MayReceive("person:bob", r.Ver) || r.MayReceive("person:bob", r.Ver-1) {
		t.Fatalf("the newest stay: %+v", r.Stays["person:bob"])
	}
	if s := r.Stays["person:bob"]; len(s)%2 != 1 || len(s) > 32 {
		t.Fatalf("stays %v", s)
	}
}

func TestHandleID(t *testing.T) {
	if stream.HandleID(12) != "r12" {
		t.Fatal(stream.HandleID(12))
	}
}
