package stream_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A thread reply's parent is in the data of its user-message and of its reply's deltas and
// text-done; a message without one has no parent member.
func TestAdapterCarriesParent(t *testing.T) {
	a := stream.NewAdapter()
	text, reply := "and pump 5?", "Yes."
	user := loomtype.Entry{Ord: 3, Turn: 2, Role: loomtype.RoleUser, Status: loomtype.StatusAccepted, Text: &text, MessageID: "m2"}
	done := loomtype.Entry{Ord: 4, Turn: 2, Role: loomtype.RoleAssistant, Status: loomtype.StatusComplete, Text: &reply}
	var got []string
	for _, ev := range []stream.Event{
		{Kind: stream.EventRecord, Turn: 2, Entry: &user, Parent: "a:1"},
		{Kind: stream.EventDelta, Turn: 2, Text: "Yes.", Parent: "a:1"},
		{Kind: stream.EventRecord, Turn: 2, Entry: &done, Parent: "a:1"},
		{Kind: stream.EventDelta, Turn: 3, Text: "No."},
	} {
		for _, sp := range a.Apply(ev) {
			b, _ := json.Marshal(sp.Data)
			got = append(got, string(sp.Kind)+" "+string(b))
		}
	}
	want := []string{
		`user-message {"message":"m2","parent":"a:1","state":"sent","text":"and pump 5?"}`,
		`text-delta {"parent":"a:1","text":"Yes."}`,
		`text-done {"parent":"a:1","status":"complete","text":"Yes."}`,
		`text-delta {"text":"No."}`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("spec %d: got %s, want %s", i, got[i], want[i])
		}
	}
}

// A merged replay keeps the parent of its deltas beside their parts, and never merges deltas of
// two parents.
func TestMergeKeepsParent(t *testing.T) {
	l := stream.NewLog("c1", stream.DefaultLimits)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, d := range []map[string]string{
		{"text": "Yes, ", "parent": "a:1"}, {"text": "it is", "parent": "a:1"}, {"text": "!"},
	} {
		if _, err := l.Append(stream.Spec{Kind: stream.KindTextDelta, Turn: 2, Message: "a:2", Data: d}, now); err != nil {
			t.Fatal(err)
		}
	}
	frames, _ := l.Replay(0)
	if len(frames) != 2 {
		t.Fatalf("got %d frames, want 2", len(frames))
	}
	if frames[0].Span != 2 || string(frames[0].Data) != `{"parent":"a:1","parts":["Yes, ","it is"]}` {
		t.Errorf("merged frame: span %d data %s", frames[0].Span, frames[0].Data)
	}
	if frames[1].Span != 0 || string(frames[1].Data) != `{"text":"!"}` {
		t.Errorf("lone frame: span %d data %s", frames[1].Span, frames[1].Data)
	}
}
