package resume

import (
	"encoding/json"
	"testing"
	"time"
)

func delta(cur int64, text string) Frame {
	d, _ := json.Marshal(map[string]string{"text": text})
	return Frame{Cur: cur, Type: "session.text-delta", Data: d}
}

func merged(cur int64, parts ...string) Frame {
	d, _ := json.Marshal(map[string][]string{"parts": parts})
	return Frame{Cur: cur, Span: len(parts), Type: "session.text-delta", Data: d}
}

// The reader's whole transcript: each frame in, its verdict, what it delivered and Last after.
func TestReaderTranscript(t *testing.T) {
	r := Reader{}
	steps := []struct {
		in   Frame
		want Verdict
		data string
		last int64
	}{
		{delta(1, "a"), Deliver, `{"text":"a"}`, 1},
		{delta(1, "a"), Drop, ``, 1},                                      // a repeat
		{delta(3, "c"), Gap, ``, 1},                                       // 2 is missing
		{Frame{Cur: 0, Type: "session.heartbeat"}, Pass, ``, 1},           // control: Last stays
		{merged(4, "b", "c", "d"), Deliver, `{"parts":["b","c","d"]}`, 4}, // 2..4 follows 1
		{merged(5, "c", "d", "e"), Trim, `{"text":"e"}`, 5},               // 3..5: keep 5
		{merged(8, "f", "g", "h"), Deliver, `{"parts":["f","g","h"]}`, 8}, // 6..8 starts at Last+1: whole
		{merged(8, "x", "y"), Drop, ``, 8},
		{merged(11, "i", "j"), Gap, ``, 8}, // 10..11 after 8
	}
	for i, s := range steps {
		f, v := r.Take(s.in)
		if v != s.want || r.Last != s.last || (s.data != "" && string(f.Data) != s.data) {
			t.Fatalf("step %d (frame %d..%d): got %v %s last %d; want %v %s last %d", i+1, s.in.First(), s.in.Cur, v, f.Data, r.Last, s.want, s.data, s.last)
		}
	}
}

func TestTrimKeepsTheSpanOfWhatIsLeft(t *testing.T) {
	r := Reader{Last: 2}
	f, v := r.Take(merged(6, "a", "b", "c", "d", "e")) // 2..6
	if v != Trim || f.Span != 4 || f.First() != 3 || string(f.Data) != `{"parts":["b","c","d","e"]}` {
		t.Fatalf("trim: %v span %d first %d %s", v, f.Span, f.First(), f.Data)
	}
	r = Reader{Last: 2}
	if _, v := r.Take(Frame{Cur: 4, Span: 3, Type: "session.text-delta", Data: json.RawMessage(`{"parts":["x"]}`)}); v != Gap || r.Last != 2 {
		t.Fatalf("a merged frame whose parts do not match its span: %v last %d, want a gap and Last kept", v, r.Last)
	}
}

func TestBackoffFirstAtOnceThenDoublingCappedWithJitter(t *testing.T) {
	b := Backoff{Base: 100 * time.Millisecond, Max: 450 * time.Millisecond, Jitter: 0.5, rand: func() float64 { return 1 }}
	want := []time.Duration{0, 150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond, 675 * time.Millisecond, 675 * time.Millisecond}
	for i, w := range want {
		if got := b.Next(); got != w {
			t.Fatalf("attempt %d: %v, want %v", i+1, got, w)
		}
	}
	b.Reset()
	if got := b.Next(); got != 0 {
		t.Fatalf("after a reset the first attempt waits %v, want none", got)
	}
	b = Backoff{Base: 100 * time.Millisecond, Max: time.Second, Jitter: 0.5, rand: func() float64 { return 0 }}
	b.Next()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Fatalf("no jitter drawn: %v, want the base", got)
	}
}
