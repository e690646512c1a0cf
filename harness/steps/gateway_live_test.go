package steps

import "testing"

func TestLiveAtMost(t *testing.T) {
	status := eventRow{event: "status"}
	user := eventRow{event: "message", turn: "1", role: "user", status: "accepted", text: "q"}
	reply := eventRow{event: "message", turn: "1", role: "assistant", status: "complete", text: "mine only"}
	delta := func(text string) eventRow { return eventRow{event: "delta", turn: "1", text: text} }
	want := []eventRow{status, user, delta("mine only"), reply}
	for _, c := range []struct {
		name string
		got  []eventRow
		ok   bool
	}{
		{"every delta", []eventRow{status, user, delta("mine only"), reply}, true},
		{"a beginning", []eventRow{status, user, delta("mine "), reply}, true},
		{"no delta", []eventRow{status, user, reply}, true},
		{"other text", []eventRow{status, user, delta("mine INJECTED"), reply}, false},
		{"more than listed", []eventRow{status, user, delta("mine only!"), reply}, false},
		{"another turn's delta", []eventRow{status, user, {event: "delta", turn: "2", text: "mine"}, reply}, false},
		{"a record missing", []eventRow{status, delta("mine"), reply}, false},
		{"an event more", []eventRow{status, user, delta("mine"), reply, status}, false},
		{"records reordered", []eventRow{user, status, delta("mine"), reply}, false},
	} {
		if got := liveAtMost(c.got, want); got != c.ok {
			t.Errorf("%s: liveAtMost = %v, want %v", c.name, got, c.ok)
		}
	}
}
