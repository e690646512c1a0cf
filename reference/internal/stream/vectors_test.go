package stream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

type replayVectors struct {
	Vectors []struct {
		Name      string
		MaxFrames int
		Append    []struct {
			Kind, Message, Author, Text string
			Turn                        int64
			Stopping                    bool
		}
		From int64
		Want []struct {
			First, Cur int64
			Kind, Text string
			Parts      []string
		}
		Reset *struct{ Floor, Head int64 }
	}
}

// The shared replay vectors (fixtures/stream/replays.json), which the kit's reader checks too.
func TestReplayVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", "stream", "replays.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vs replayVectors
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			l := stream.NewLog("c1", stream.Limits{MaxFrames: v.MaxFrames})
			for _, a := range v.Append {
				var data any = map[string]string{"text": a.Text}
				if a.Stopping {
					data = map[string]bool{"stopping": true}
				}
				if _, err := l.Append(stream.Spec{Kind: stream.Kind(a.Kind), Turn: a.Turn, Message: a.Message, Author: a.Author, Data: data}, time.Unix(0, 0)); err != nil {
					t.Fatal(err)
				}
			}
			frames, reset := l.Replay(v.From)
			if v.Reset != nil {
				if !reset || l.Floor() != v.Reset.Floor || l.Head() != v.Reset.Head {
					t.Fatalf("replay from %d: reset %v floor %d head %d; want a reset at floor %d head %d", v.From, reset, l.Floor(), l.Head(), v.Reset.Floor, v.Reset.Head)
				}
				return
			}
			if reset || len(frames) != len(v.Want) {
				t.Fatalf("replay from %d: reset %v, %d frames; want %d", v.From, reset, len(frames), len(v.Want))
			}
			for i, w := range v.Want {
				f := frames[i]
				var d struct {
					Text  string
					Parts []string
				}
				_ = json.Unmarshal(f.Data, &d)
				if f.First() != w.First || f.Cur != w.Cur || string(f.Kind()) != w.Kind || d.Text != w.Text || len(d.Parts) != len(w.Parts) {
					t.Fatalf("frame %d: %d..%d %s %q %q; want %d..%d %s %q %q", i, f.First(), f.Cur, f.Kind(), d.Text, d.Parts, w.First, w.Cur, w.Kind, w.Text, w.Parts)
				}
				for k := range w.Parts {
					if d.Parts[k] != w.Parts[k] {
						t.Fatalf("frame %d part %d: %q, want %q", i, k, d.Parts[k], w.Parts[k])
					}
				}
			}
		})
	}
}
