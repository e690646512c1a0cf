// Package resume is the kit's resumable reader of a session stream, written from spec/stream.md
// alone: it holds one number, Last, the cursor of the newest frame it delivered, and decides for
// each frame that arrives whether to deliver it, drop it, trim it or ask again from Last.
//
// The Reader is the pure core (frames in, decisions out); Backoff is the reconnect policy. The
// kit checks a system's stream against them: a frame the reader must ask again for is a gap, a
// frame it drops is a repeat, and both are the system's fault when the transport did not lose
// anything.
package resume

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"
)

// Frame is what the reader needs of a frame: its cursor, its span and, for a merged delta
// frame, its parts; and the message it belongs to, which the rendering view (View) needs.
type Frame struct {
	Cur     int64           `json:"cur"`
	Span    int             `json:"span,omitempty"`
	Type    string          `json:"type"`
	Message string          `json:"message,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// First is the first cursor the frame covers (Cur-Span+1 for a merged frame).
func (f Frame) First() int64 {
	if f.Span > 1 {
		return f.Cur - int64(f.Span) + 1
	}
	return f.Cur
}

// Control reports whether f is a control or ephemeral frame (cursor 0): it never moves Last.
func (f Frame) Control() bool { return f.Cur == 0 }

// Verdict is what the reader does with a frame.
type Verdict int

const (
	// Deliver: the frame is new and follows Last; Last moves to its cursor.
	Deliver Verdict = iota
	// Trim: a merged frame whose start the reader already holds; its parts after Last are
	// delivered (Frame.Data rewritten) and Last moves to its cursor.
	Trim
	// Drop: every cursor of the frame is at or below Last; nothing is delivered.
	Drop
	// Gap: the frame starts after Last+1; nothing is delivered and the reader asks again from
	// Last.
	Gap
	// Pass: a control or ephemeral frame, handed on without touching Last.
	Pass
)

func (v Verdict) String() string {
	return [...]string{"deliver", "trim", "drop", "gap", "pass"}[v]
}

// Reader is the resume state of one reader of one session. Not safe for concurrent use.
//
//	r := resume.Reader{Last: 0}
//	f, v := r.Take(frame)
//	if v == resume.Gap { reconnect(r.Last) }
type Reader struct {
	// Last is the cursor of the newest frame delivered (0: none yet).
	Last int64
}

// Take decides what to do with f and returns the frame to deliver (trimmed where it must be).
func (r *Reader) Take(f Frame) (Frame, Verdict) {
	switch {
	case f.Control():
		return f, Pass
	case f.Cur <= r.Last:
		return Frame{}, Drop
	case f.First() > r.Last+1:
		return Frame{}, Gap
	case f.First() == r.Last+1:
		r.Last = f.Cur
		return f, Deliver
	}
	// A merged frame that starts at or below Last and ends after it: keep the parts after Last.
	var d struct {
		Parts []string `json:"parts"`
	}
	if err := json.Unmarshal(f.Data, &d); err != nil || len(d.Parts) != f.Span {
		return Frame{}, Gap // not a well-formed merged frame: ask again rather than guess
	}
	keep := d.Parts[r.Last-f.First()+1:]
	t := f
	t.Span = len(keep)
	if t.Span == 1 {
		t.Span = 0
		t.Data, _ = json.Marshal(map[string]string{"text": keep[0]})
	} else {
		t.Data, _ = json.Marshal(map[string][]string{"parts": keep})
	}
	r.Last = f.Cur
	return t, Trim
}

// Backoff is the reconnect policy: the first attempt after a drop at once, then delays that
// double from Base up to Max, each with up to Jitter of it added at random. A delivered frame
// resets it.
//
//	b := resume.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.2}
//	time.Sleep(b.Next())
type Backoff struct {
	Base, Max time.Duration
	Jitter    float64
	attempt   int
	rand      func() float64
}

// Next is the delay before the next attempt.
func (b *Backoff) Next() time.Duration {
	b.attempt++
	if b.attempt == 1 {
		return 0
	}
	d := b.Base
	for i := 2; i < b.attempt && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	rnd := b.rand
	if rnd == nil {
		rnd = rand.Float64
	}
	return d + time.Duration(float64(d)*b.Jitter*rnd())
}

// Reset starts the policy over (after a frame was delivered).
func (b *Backoff) Reset() { b.attempt = 0 }

// Problem is what a stream did wrong, seen by a reader on a transport that lost nothing.
type Problem struct {
	// What: "gap" or "repeat".
	What string
	// Last is the reader's cursor when it came; Got the frame's range.
	Last, First, Cur int64
}

func (p Problem) Error() string {
	return fmt.Sprintf("stream %s: frame %d..%d after cursor %d", p.What, p.First, p.Cur, p.Last)
}
