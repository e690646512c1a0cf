package stream_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

// For any appends and any bounds, a replay covers exactly the cursors after from up to the head,
// each once and in order, with merged frames of deltas only; or it is a reset, exactly when a
// cursor after from is no longer held. The texts of a replay are those appended.
func TestReplayCoversEveryCursorOnceOrResets(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		lim := stream.Limits{MaxFrames: 1 + rng.IntN(12), MaxBytes: 200 + rng.IntN(2000)}
		l := stream.NewLog("c1", lim)
		texts := map[int64]string{}
		n := rng.IntN(40)
		for i := 0; i < n; i++ {
			spec := stream.Spec{Kind: stream.KindTextDelta, Turn: int64(1 + rng.IntN(2)), Author: []string{"", "assistant:a2"}[rng.IntN(2)]}
			if rng.IntN(4) == 0 {
				spec.Kind = stream.KindStatus
			}
			text := fmt.Sprintf("t%d", i)
			spec.Data = map[string]string{"text": text}
			f, err := l.Append(spec, time.Unix(0, 0))
			if err != nil || f.Cur != int64(i+1) {
				t.Fatalf("seed %d: append %d: cursor %d, %v", seed, i, f.Cur, err)
			}
			texts[f.Cur] = text
		}
		if l.Head() != int64(n) || l.Floor() < 1 || l.Floor() > l.Head()+1 || (n > 0 && l.Floor() > l.Head()) {
			t.Fatalf("seed %d: head %d floor %d after %d appends", seed, l.Head(), l.Floor(), n)
		}
		for from := int64(0); from <= l.Head()+1; from++ {
			frames, reset := l.Replay(from)
			if reset != (from+1 < l.Floor()) {
				t.Fatalf("seed %d: replay from %d: reset %v with floor %d", seed, from, reset, l.Floor())
			}
			if reset {
				continue
			}
			next := from + 1
			for _, f := range frames {
				if f.First() != next || f.Cur < f.First() {
					t.Fatalf("seed %d: replay from %d: frame %d..%d, want it to start at %d", seed, from, f.First(), f.Cur, next)
				}
				if f.Span > 1 {
					var d struct{ Parts []string }
					_ = json.Unmarshal(f.Data, &d)
					if f.Kind() != stream.KindTextDelta || len(d.Parts) != f.Span {
						t.Fatalf("seed %d: merged frame %d..%d of kind %s with %d parts", seed, f.First(), f.Cur, f.Kind(), len(d.Parts))
					}
					for k, p := range d.Parts {
						if p != texts[f.First()+int64(k)] {
							t.Fatalf("seed %d: part %d of %d..%d is %q, want %q", seed, k, f.First(), f.Cur, p, texts[f.First()+int64(k)])
						}
					}
				}
				next = f.Cur + 1
			}
			if from < l.Head() && next != l.Head()+1 {
				t.Fatalf("seed %d: replay from %d ends at %d, head %d", seed, from, next-1, l.Head())
			}
		}
	}
}

func TestControlKindsAreNotLogged(t *testing.T) {
	l := stream.NewLog("c1", stream.Limits{})
	for _, k := range []stream.Kind{stream.KindReset, stream.KindHeartbeat, "presence"} {
		if _, err := l.Append(stream.Spec{Kind: k}, time.Unix(0, 0)); err != stream.ErrNotLogged {
			t.Fatalf("append of %s: %v, want ErrNotLogged", k, err)
		}
	}
	if l.Head() != 0 {
		t.Fatalf("head %d after control frames, want 0", l.Head())
	}
	f := stream.Control(stream.KindReset, "c1", time.Unix(0, 0), map[string]int64{"floor": 3})
	if f.Cur != 0 || f.Type != "session.reset" {
		t.Fatalf("control frame: cursor %d type %s", f.Cur, f.Type)
	}
}

// A replay merges the deltas of one message; a live frame goes out as it was appended.
func ExampleLog_Replay() {
	l := stream.NewLog("c1", stream.Limits{MaxFrames: 100})
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, text := range []string{"Pump", " 3", " is fine."} {
		f, _ := l.Append(stream.Spec{Kind: stream.KindTextDelta, Turn: 1, Message: "a:1", Data: map[string]string{"text": text}}, now)
		fmt.Println("live", f.Cur, string(f.Data))
	}
	frames, reset := l.Replay(0)
	fmt.Println("replay", len(frames), frames[0].First(), frames[0].Cur, string(frames[0].Data), reset)
	// Output:
	// live 1 {"text":"Pump"}
	// live 2 {"text":" 3"}
	// live 3 {"text":" is fine."}
	// replay 1 1 3 {"parts":["Pump"," 3"," is fine."]} false
}

// DropBelow raises the floor and never lowers it: a replay from below the new floor is a reset,
// one from floor-1 on is what the log holds after it, and a floor past the head leaves the log
// empty until the next append, which it holds.
func TestDropBelowRaisesTheFloor(t *testing.T) {
	l := stream.NewLog("c1", stream.DefaultLimits)
	for i := 0; i < 5; i++ {
		if _, err := l.Append(stream.Spec{Kind: stream.KindStatus, Data: map[string]int{"i": i}}, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	l.DropBelow(4)
	if l.Floor() != 4 || l.Head() != 5 || len(l.Frames()) != 2 || l.Frames()[0].Cur != 4 {
		t.Fatalf("floor %d head %d frames %d", l.Floor(), l.Head(), len(l.Frames()))
	}
	if _, reset := l.Replay(2); !reset {
		t.Fatal("a replay from 2 below floor 4 is not a reset")
	}
	if frames, reset := l.Replay(3); reset || len(frames) != 2 {
		t.Fatalf("replay from 3: %d frames, reset %v", len(frames), reset)
	}
	l.DropBelow(2) // never down
	if l.Floor() != 4 {
		t.Fatalf("floor went down to %d", l.Floor())
	}
	l.DropBelow(100) // past the head: empty, floor head+1
	if l.Floor() != 6 || len(l.Frames()) != 0 {
		t.Fatalf("floor %d frames %d", l.Floor(), len(l.Frames()))
	}
	if _, reset := l.Replay(4); !reset {
		t.Fatal("a replay from 4 below floor 6 is not a reset")
	}
	f, err := l.Append(stream.Spec{Kind: stream.KindStatus, Data: map[string]int{"i": 5}}, time.Unix(0, 0))
	if err != nil || f.Cur != 6 || l.Floor() != 6 {
		t.Fatalf("append after: cur %d floor %d err %v", f.Cur, l.Floor(), err)
	}
	if frames, reset := l.Replay(5); reset || len(frames) != 1 || frames[0].Cur != 6 {
		t.Fatalf("replay from 5: %v reset %v", frames, reset)
	}
}
