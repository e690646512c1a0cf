package stream

import (
	"encoding/json"
	"errors"
	"time"
)

// Limits bound a session's log: the oldest frames are dropped (and the floor moves up) when it
// holds more than MaxFrames frames or more than MaxBytes bytes of encoded frames.
type Limits struct {
	MaxFrames int
	MaxBytes  int
}

// DefaultLimits are the bounds of a log whose configuration names none.
var DefaultLimits = Limits{MaxFrames: 4096, MaxBytes: 4 << 20}

// ErrNotLogged is returned for a spec of a kind that takes no cursor (a control frame).
var ErrNotLogged = errors.New("stream: kind is not logged")

// Log is one session's frame log: cursors 1..Head with no gaps, of which Floor..Head are held.
//
// A Log is not safe for concurrent use; its owner serialises appends and replays.
//
//	l := stream.NewLog("c1", stream.DefaultLimits)
//	f, _ := l.Append(stream.Spec{Kind: stream.KindTextDelta, Turn: 1, Data: map[string]string{"text": "Hi"}}, now)
//	frames, reset := l.Replay(0)
type Log struct {
	session string
	limits  Limits
	frames  []Frame
	sizes   []int
	bytes   int
	head    int64
}

// NewLog returns the empty log of session. A limit of 0 or less takes the default's.
func NewLog(session string, lim Limits) *Log {
	if lim.MaxFrames <= 0 {
		lim.MaxFrames = DefaultLimits.MaxFrames
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultLimits.MaxBytes
	}
	return &Log{session: session, limits: lim}
}

// Head is the newest cursor given (0 before the first frame).
func (l *Log) Head() int64 { return l.head }

// Floor is the oldest cursor the log still holds (Head+1 when it holds none).
func (l *Log) Floor() int64 { return l.head - int64(len(l.frames)) + 1 }

// Append gives spec the next cursor, keeps the frame and returns it; the oldest frames go when
// the log is over its limits (the newest frame always stays, however big).
//
// Errors: ErrNotLogged for a control kind.
func (l *Log) Append(spec Spec, t time.Time) (Frame, error) {
	if !spec.Kind.Logged() {
		return Frame{}, ErrNotLogged
	}
	l.head++
	f := spec.frame(l.session, l.head, t)
	b, _ := json.Marshal(f)
	l.frames = append(l.frames, f)
	l.sizes = append(l.sizes, len(b))
	l.bytes += len(b)
	l.trim()
	return f, nil
}

// Replay returns the frames after cursor from, oldest first, with adjacent deltas merged
// (Merge). reset is true when a frame after from is no longer held (from+1 < Floor): the caller
// sends a reset frame, and the client resumes from the floor. A from beyond Head returns none.
func (l *Log) Replay(from int64) (frames []Frame, reset bool) {
	if from < 0 {
		from = 0
	}
	if from+1 < l.Floor() {
		return nil, true
	}
	start := int(from - (l.Floor() - 1))
	if start >= len(l.frames) {
		return nil, false
	}
	return Merge(l.frames[start:]), false
}

// Merge merges each run of adjacent text-delta frames (consecutive cursors, one message, one
// author, one turn, one reply handle, one parent) into one frame: the cursor, time and handle of
// the run's last frame, Span the run's length, data.parts the texts in order and data.parent the
// run's parent, when its deltas are a thread reply. A frame alone is returned as it is. Merge is
// for replays only; live frames go out one by one.
func Merge(frames []Frame) []Frame {
	out := make([]Frame, 0, len(frames))
	for i := 0; i < len(frames); {
		j := i + 1
		for j < len(frames) && mergeable(frames[j-1], frames[j]) {
			j++
		}
		if j-i == 1 {
			out = append(out, frames[i])
			i = j
			continue
		}
		parts := make([]string, 0, j-i)
		for _, f := range frames[i:j] {
			parts = append(parts, deltaText(f))
		}
		m := frames[j-1]
		m.Span = j - i
		d := map[string]any{"parts": parts}
		if p := deltaParent(m); p != "" {
			d["parent"] = p
		}
		m.Data, _ = json.Marshal(d)
		out = append(out, m)
		i = j
	}
	return out
}

func mergeable(a, b Frame) bool {
	return a.Kind() == KindTextDelta && b.Kind() == KindTextDelta && a.Span <= 1 && b.Span <= 1 &&
		b.Cur == a.Cur+1 && a.Message == b.Message && a.Author == b.Author && a.Turn == b.Turn &&
		a.Rid == b.Rid && a.Ver == b.Ver && deltaParent(a) == deltaParent(b)
}

// deltaParent is the parent a frame's data names ("": none).
func deltaParent(f Frame) string {
	var d struct {
		Parent string `json:"parent"`
	}
	_ = json.Unmarshal(f.Data, &d)
	return d.Parent
}

func deltaText(f Frame) string {
	var d struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(f.Data, &d)
	return d.Text
}

// Restore makes an empty log hold frames, the newest frames of a log written before (oldest
// first, consecutive cursors ending at the log's head), as if they had been appended. Frames
// beyond the log's limits are dropped from the oldest, as Append would.
//
// Errors: ErrRestore when the log is not empty or the cursors are not consecutive.
//
//	l := stream.NewLog("c1", stream.DefaultLimits)
//	err := l.Restore(framesReadFromDisk)
func (l *Log) Restore(frames []Frame) error {
	if l.head != 0 || len(l.frames) != 0 {
		return ErrRestore
	}
	for i := 1; i < len(frames); i++ {
		if frames[i].Cur != frames[i-1].Cur+1 {
			return ErrRestore
		}
	}
	if len(frames) == 0 {
		return nil
	}
	if frames[0].Cur < 1 {
		return ErrRestore
	}
	for _, f := range frames {
		b, _ := json.Marshal(f)
		l.frames = append(l.frames, f)
		l.sizes = append(l.sizes, len(b))
		l.bytes += len(b)
	}
	l.head = frames[len(frames)-1].Cur
	l.trim()
	return nil
}

// DropBelow raises the floor to floor: the frames below it are no longer held, so a replay from
// a cursor below floor-1 answers a reset. The floor never goes down, nor above Head+1 (then the
// log holds no frame; the next one appended is held as ever).
//
//	l.DropBelow(l.Head() + 1) // every reader with a cursor below the head is reset
func (l *Log) DropBelow(floor int64) {
	floor = min(floor, l.head+1)
	for len(l.frames) > 0 && l.Floor() < floor {
		l.bytes -= l.sizes[0]
		l.frames, l.sizes = l.frames[1:], l.sizes[1:]
	}
}

// ErrRestore is returned by Restore for a log that is not empty or frames that are not
// consecutive.
var ErrRestore = errors.New("stream: restore needs an empty log and consecutive frames")

// Frames returns the frames the log holds, oldest first, unmerged (the caller must not change
// them).
func (l *Log) Frames() []Frame { return l.frames }

func (l *Log) trim() {
	for len(l.frames) > 1 && (len(l.frames) > l.limits.MaxFrames || l.bytes > l.limits.MaxBytes) {
		l.bytes -= l.sizes[0]
		l.frames, l.sizes = l.frames[1:], l.sizes[1:]
	}
}
