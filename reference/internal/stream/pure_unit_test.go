package stream_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

func TestWhoAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		in   stream.RouteInput
		want []string
	}{
		{"mentioned assistants in order, once", stream.RouteInput{Mentions: []string{"assistant:b", "person:carol", "assistant:a", "assistant:b"}, Assigned: "assistant:x", Default: "assistant:d", Sender: "person:alice"}, []string{"assistant:b", "assistant:a"}},
		{"a mention beats the assigned one", stream.RouteInput{Mentions: []string{"assistant:a"}, Assigned: "assistant:x"}, []string{"assistant:a"}},
		{"assigned when no assistant is mentioned", stream.RouteInput{Assigned: "assistant:x", Default: "assistant:d", Sender: "person:alice"}, []string{"assistant:x"}},
		{"assigned even when a person is mentioned", stream.RouteInput{Mentions: []string{"person:bob"}, Assigned: "assistant:x", Sender: "person:alice"}, []string{"assistant:x"}},
		{"assigned even after another person spoke", stream.RouteInput{Assigned: "assistant:x", PreviousSpeaker: "person:bob", Sender: "person:alice"}, []string{"assistant:x"}},
		{"default when nobody else talks", stream.RouteInput{Default: "assistant:d", Sender: "person:alice"}, []string{"assistant:d"}},
		{"default after the sender spoke last", stream.RouteInput{Default: "assistant:d", PreviousSpeaker: "person:alice", Sender: "person:alice"}, []string{"assistant:d"}},
		{"default after an assistant spoke last", stream.RouteInput{Default: "assistant:d", PreviousSpeaker: "assistant:d", Sender: "person:alice"}, []string{"assistant:d"}},
		{"nobody after another person spoke last", stream.RouteInput{Default: "assistant:d", PreviousSpeaker: "person:bob", Sender: "person:alice"}, nil},
		{"nobody when a person is mentioned", stream.RouteInput{Mentions: []string{"person:bob"}, Default: "assistant:d", Sender: "person:alice"}, nil},
		{"the sender mentioning themself is not talking to a person", stream.RouteInput{Mentions: []string{"person:alice"}, Default: "assistant:d", Sender: "person:alice"}, []string{"assistant:d"}},
		{"nobody without a default", stream.RouteInput{Sender: "person:alice"}, nil},
		{"a private message reaches no assistant, mentioned or not", stream.RouteInput{Mentions: []string{"assistant:a"}, Assigned: "assistant:x", Default: "assistant:d", Private: true}, nil},
		{"a private message in a quiet chat reaches none", stream.RouteInput{Default: "assistant:d", Sender: "person:alice", Private: true}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := stream.WhoAnswers(c.in); !slices.Equal(got, c.want) {
				t.Fatalf("WhoAnswers = %q, want %q", got, c.want)
			}
		})
	}
}

func TestKinds(t *testing.T) {
	logged := []stream.Kind{stream.KindTextDelta, stream.KindTextDone, stream.KindToolStarted, stream.KindToolProgress,
		stream.KindToolFinished, stream.KindTermChunk, stream.KindTermCommand, stream.KindFileChanged, stream.KindAsk,
		stream.KindAskAnswered, stream.KindUserMessage, stream.KindStatus, stream.KindParticipantJoined,
		stream.KindParticipantLeft, stream.KindReaction, stream.KindPin, stream.KindMention, stream.KindFanout,
		stream.KindFanoutKeep, stream.KindTextCut}
	for _, k := range logged {
		if !k.Logged() || k.Ephemeral() {
			t.Errorf("%s: logged %v, ephemeral %v", k, k.Logged(), k.Ephemeral())
		}
	}
	for _, k := range []stream.Kind{stream.KindPresence, stream.KindReadMarker} {
		if k.Logged() || !k.Ephemeral() {
			t.Errorf("%s: logged %v, ephemeral %v", k, k.Logged(), k.Ephemeral())
		}
	}
	for _, k := range []stream.Kind{stream.KindReset, stream.KindHeartbeat, stream.KindHidden, "nope"} {
		if k.Logged() || k.Ephemeral() {
			t.Errorf("%s: logged %v, ephemeral %v", k, k.Logged(), k.Ephemeral())
		}
	}
}

func TestHidden(t *testing.T) {
	f := stream.Frame{V: 1, ID: "c1:7", Cur: 7, Session: "c1", Turn: 2, Type: "session.tool-finished", Time: "2026-12-01T09:00:00Z",
		Corr: "k", Author: "assistant:a", ActsFor: "person:p", Message: "a:2", Data: json.RawMessage(`{"x":1}`)}
	h := stream.Hidden(f)
	want := stream.Frame{V: 1, ID: "c1:7", Cur: 7, Session: "c1", Turn: 2, Type: "session.hidden", Time: "2026-12-01T09:00:00Z", Data: json.RawMessage(`{}`)}
	hb, _ := json.Marshal(h)
	wb, _ := json.Marshal(want)
	if string(hb) != string(wb) {
		t.Fatalf("Hidden = %s, want %s", hb, wb)
	}
	if string(f.Data) != `{"x":1}` || f.Author != "assistant:a" {
		t.Fatal("Hidden changed its input")
	}
}

// Each block kind needs every one of its required members; without one it is a text block.
func TestBlockRequiredMembers(t *testing.T) {
	full := map[string]map[string]any{
		"terminal":    {"command": "ls", "output": "", "exit": 0},
		"diff":        {"path": "a", "patch": "+x"},
		"files":       {"paths": []string{"a"}},
		"record":      {"type": "t", "fields": map[string]any{}},
		"task":        {"id": "1", "title": "t", "state": "open"},
		"draft":       {"body": "b"},
		"flow-change": {"flow": "f", "change": "c"},
		"answer":      {"text": "a"},
		"screen":      {"title": "t", "text": "x"},
		"text":        {"text": "x"},
	}
	for kind, members := range full {
		b := map[string]any{"kind": kind}
		for k, v := range members {
			b[k] = v
		}
		raw, _ := json.Marshal(map[string]any{"block": b})
		if got := stream.BlockOf("t", raw).Kind(); string(got) != kind {
			t.Errorf("%s with all its members: kind %q", kind, got)
		}
		for drop := range members {
			partial := map[string]any{}
			for k, v := range b {
				if k != drop {
					partial[k] = v
				}
			}
			raw, _ := json.Marshal(map[string]any{"block": partial})
			got := stream.BlockOf("t", raw)
			if got.Kind() != stream.BlockText || got["text"] != string(raw) {
				t.Errorf("%s without %s: %v, want a text block of the result", kind, drop, got)
			}
		}
	}
}

func TestNoteSharedLeavesItsInput(t *testing.T) {
	b := stream.Block{"kind": "files", "paths": []any{"a"}, "note": "1 match"}
	out := stream.NoteShared(b, 2)
	if b["note"] != "1 match" || b["detail"] != nil {
		t.Fatalf("NoteShared changed its input: %v", b)
	}
	if out["note"] != stream.SharedNote || out["detail"] != "1 match" {
		t.Fatalf("NoteShared = %v", out)
	}
	for _, n := range []int{0, 1} {
		if got := stream.NoteShared(stream.Block{"kind": "terminal", "command": "x", "output": "", "exit": 0}, n); got["note"] != nil {
			t.Errorf("people=%d: a note in a chat of one: %v", n, got)
		}
	}
}

func TestRenderCopiesData(t *testing.T) {
	f := stream.Frame{Cur: 1, Type: "session.user-message", Data: json.RawMessage(`{"message":"m","state":"sent","text":"hi"}`)}
	g := stream.Render(f, stream.Viewer{ID: "person:b"})
	g.Data[2] = 'X'
	if string(f.Data) != `{"message":"m","state":"sent","text":"hi"}` {
		t.Fatalf("the rendered frame shares data with the original: %s", f.Data)
	}
}

func TestUnreadableErrorIsTyped(t *testing.T) {
	f := stream.Frame{Cur: 1, Type: "session.tool-finished", Data: json.RawMessage(
		`{"call":"c","tool":"t","ok":true,"block":{"kind":"record","type":"x","fields":{"a/b":{"role":"hr","value":1}}}}`)}
	err := stream.AssertAskerCanRead(f, stream.Viewer{ID: "person:a"})
	var ue *stream.UnreadableError
	if !errors.As(err, &ue) || ue.Field != "/block/fields/a~1b" {
		t.Fatalf("AssertAskerCanRead = %v, want an *UnreadableError at /block/fields/a~1b", err)
	}
	if err := stream.AssertAskerCanRead(f, stream.Viewer{ID: "person:a", ReadRoles: []string{"hr"}}); err != nil {
		t.Fatalf("an asker with the role: %v", err)
	}
}

func TestIsEncrypted(t *testing.T) {
	for _, c := range []struct {
		typ, data string
		want      bool
	}{
		{"session.user-message", `{"message":"m","state":"sent","enc":{"alg":"a","kid":"k","ct":"c"}}`, true},
		{"session.user-message", `{"message":"m","state":"sent","enc":true}`, true},
		{"session.user-message", `{"message":"m","state":"sent","enc":false}`, false},
		{"session.user-message", `{"message":"m","state":"sent","text":"hi"}`, false},
		{"session.text-delta", `{"enc":{"alg":"a","kid":"k","ct":"c"}}`, false},
		{"session.user-message", `not json`, false},
	} {
		if got := stream.IsEncrypted(stream.Frame{Type: c.typ, Data: json.RawMessage(c.data)}); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.typ, c.data, got, c.want)
		}
	}
}

func TestExpireLeavesItsInput(t *testing.T) {
	f := stream.Frame{Cur: 3, Type: "session.term-chunk", Time: "2026-12-01T09:00:00Z", Data: json.RawMessage(`{"text":"x"}`)}
	g := stream.Expire(f, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), stream.DefaultRetain)
	if !g.Expired || string(g.Data) != `{}` || g.Cur != 3 {
		t.Fatalf("Expire = %+v", g)
	}
	if f.Expired || string(f.Data) != `{"text":"x"}` {
		t.Fatalf("Expire changed its input: %+v", f)
	}
	bad := f
	bad.Time = "yesterday"
	if g := stream.Expire(bad, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Hour); g.Expired {
		t.Fatal("a frame whose time does not parse expired")
	}
}

func TestPrivateEventNeedsEnc(t *testing.T) {
	if specs := stream.NewAdapter().Apply(stream.Event{Kind: stream.EventPrivate, Message: "m1"}); len(specs) != 0 {
		t.Fatalf("a private event without enc gave %d specs", len(specs))
	}
}

func TestEphemeralFrameRefusesOtherKinds(t *testing.T) {
	if _, err := stream.EphemeralFrame(stream.Spec{Kind: stream.KindStatus}, "c1", time.Unix(0, 0)); !errors.Is(err, stream.ErrNotEphemeral) {
		t.Fatalf("EphemeralFrame(status) = %v, want ErrNotEphemeral", err)
	}
}
