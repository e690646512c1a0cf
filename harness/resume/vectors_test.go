package resume

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The shared replay vectors (fixtures/stream/replays.json), read as the kit's reader reads a
// replay: starting at from, every answer ends at the head with nothing dropped and no gap, and
// a reset is asked for exactly where a frame after from is gone.
func TestReaderTakesTheReplayVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "stream", "replays.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vs struct {
		Vectors []struct {
			Name   string
			Append []json.RawMessage
			From   int64
			Want   []struct {
				First, Cur int64
				Parts      []string
				Text       string
			}
			Reset *struct{ Floor, Head int64 }
		}
	}
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Vectors {
		head := int64(len(v.Append))
		if v.Reset != nil {
			if v.Reset.Head != head || v.From+1 >= v.Reset.Floor {
				t.Errorf("%s: a reset at floor %d head %d after from %d: the spec resets only when from+1 < floor", v.Name, v.Reset.Floor, v.Reset.Head, v.From)
			}
			continue
		}
		r := Reader{Last: v.From}
		for _, w := range v.Want {
			f := Frame{Cur: w.Cur, Span: int(w.Cur - w.First + 1)}
			if f.Span == 1 {
				f.Span = 0
			}
			f.Data, _ = json.Marshal(map[string]any{"parts": w.Parts, "text": w.Text})
			if _, verdict := r.Take(f); verdict != Deliver {
				t.Errorf("%s: frame %d..%d after %d: %v, want it delivered", v.Name, w.First, w.Cur, r.Last, verdict)
			}
			if f.Span > 1 && len(w.Parts) != f.Span {
				t.Errorf("%s: frame %d..%d has %d parts", v.Name, w.First, w.Cur, len(w.Parts))
			}
		}
		if want := max(head, v.From); r.Last != want {
			t.Errorf("%s: the reader ends at %d, want the head %d", v.Name, r.Last, want)
		}
	}
}
