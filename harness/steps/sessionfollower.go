package steps

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/harness/resume"
)

// folded is what a reader made of one message's frames.
type folded struct {
	deltas string
	done   *string
	status string // the text-done's status
}

// follower reads one session's stream for one viewer through resume.Reader, reconnecting from
// Last whenever a connection ends or shows a gap; it records every frame it received, what the
// reader did with each, the problems it saw and each message's folded text.
type follower struct {
	s         *scenario
	who       string
	id        string
	transport string
	device    string
	ticketed  bool // SSE: open a ticket first (a WebSocket always does)
	once      bool // one connection only, no reconnect
	askFrom   *int64

	cancel context.CancelFunc
	ended  chan struct{}

	mu        sync.Mutex
	r         resume.Reader
	raw       []sframe
	verdicts  []resume.Verdict
	delivered []sframe // delivered frames (trimmed where they were) and control frames but heartbeats
	beats     []time.Time
	lastFrame time.Time
	problems  []resume.Problem
	connects  int
	fold      map[string]*folded
	view      resume.View // what a screen shows of the delivered frames (door holdback)
	sutErr    error
	kitErr    error
	notify    chan struct{}
}

func (s *scenario) follow(who, id, transport string, f *follower) *follower {
	ctx, cancel := context.WithCancel(context.WithoutCancel(s.ctx))
	f.s, f.who, f.id, f.transport, f.cancel = s, who, id, transport, cancel
	f.ended, f.fold, f.notify = make(chan struct{}), map[string]*folded{}, make(chan struct{}, 1)
	s.addCloser(f)
	go f.run(ctx)
	return f
}

// Close stops the follower and waits for it.
func (f *follower) Close() error {
	f.cancel()
	<-f.ended
	return nil
}

func (f *follower) wake() {
	select {
	case f.notify <- struct{}{}:
	default:
	}
}

func (f *follower) run(ctx context.Context) {
	defer close(f.ended)
	defer f.wake()
	b := resume.Backoff{Base: 50 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	for ctx.Err() == nil {
		c, err := f.connect(ctx)
		if err != nil {
			var ref *refusedErr
			var he *HarnessError
			var fl *Failure
			switch {
			case ctx.Err() != nil:
				return
			case errors.As(err, &he):
				f.setErr(nil, err)
				return
			case errors.As(err, &fl):
				f.setErr(err, nil)
				return
			case errors.As(err, &ref) && ref.Status < 500 && ref.Status != http.StatusTooManyRequests:
				f.setErr(fail("open and read the session stream", ref.Error(), "the stream served"), nil)
				return
			}
			// The system is down or restarting: try again.
			if !f.sleep(ctx, b.Next()) {
				return
			}
			continue
		}
		delivered, stop := f.read(ctx, c)
		c.Close()
		if stop || f.once {
			return
		}
		if delivered {
			b.Reset()
		}
		if !f.sleep(ctx, b.Next()) {
			return
		}
	}
}

func (f *follower) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (f *follower) setErr(sut, kit error) {
	f.mu.Lock()
	if sut != nil && f.sutErr == nil {
		f.sutErr = sut
	}
	if kit != nil && f.kitErr == nil {
		f.kitErr = kit
	}
	f.mu.Unlock()
	f.wake()
}

// connect opens (when the transport needs a ticket) and dials from the reader's Last.
func (f *follower) connect(ctx context.Context) (conn, error) {
	f.mu.Lock()
	from := f.r.Last
	f.mu.Unlock()
	o := dialOpts{Transport: f.transport, Device: f.device}
	if f.askFrom != nil {
		from = *f.askFrom
	}
	if f.transport == overWebSocket || f.ticketed {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, a, err := f.s.openSession(octx, f.who, f.id, from, f.device)
		cancel()
		if err != nil {
			var fl *Failure
			if errors.As(err, &fl) && r == nil {
				return nil, errors.New(fl.Got) // no answer: the system is down
			}
			return nil, err
		}
		if a == nil {
			return nil, &refusedErr{Status: r.Status, Body: r.Body}
		}
		o.Ticket = a.Ticket
	} else if from > 0 {
		o.LastEvent = &from
	}
	c, err := f.s.dialSession(ctx, f.who, f.id, o)
	if err == nil {
		f.mu.Lock()
		f.connects++
		f.mu.Unlock()
	}
	return c, err
}

// read takes the frames of one connection through the reader until it ends, shows a gap, or
// the follower stops. It reports whether it delivered a frame, and whether to stop for good.
func (f *follower) read(ctx context.Context, c conn) (delivered, stop bool) {
	f.mu.Lock()
	asked := f.askFrom == nil // the connection asked from Last: a drop is a repeat
	f.mu.Unlock()
	for {
		fr, err := c.Next(ctx)
		if err != nil {
			var fl *Failure
			if errors.As(err, &fl) {
				f.setErr(err, nil)
				return delivered, true
			}
			return delivered, ctx.Err() != nil
		}
		fr.At = time.Now()
		f.mu.Lock()
		last := f.r.Last
		out, v := f.r.Take(fr.ResumeFrame())
		f.raw = append(f.raw, fr)
		f.verdicts = append(f.verdicts, v)
		now := time.Now()
		gap := false
		switch v {
		case resume.Pass:
			if fr.Kind() == "heartbeat" {
				f.beats = append(f.beats, now)
				f.mu.Unlock()
				f.wake()
				continue
			}
			f.delivered = append(f.delivered, fr)
			if d := fr.Payload(); fr.Kind() == "reset" && d.Floor != nil {
				f.r.Last = *d.Floor - 1
			}
			if fr.Kind() == "end" {
				// The stream ended for good (spec/stream.md): the reader does not resume.
				f.lastFrame = now
				f.mu.Unlock()
				f.wake()
				return delivered, true
			}
		case resume.Drop:
			if asked {
				f.problems = append(f.problems, resume.Problem{What: "repeat", Last: last, First: fr.ResumeFrame().First(), Cur: fr.Cur})
			}
		case resume.Gap:
			f.problems = append(f.problems, resume.Problem{What: "gap", Last: last, First: fr.ResumeFrame().First(), Cur: fr.Cur})
			gap = true
		default:
			d := fr
			d.Span, d.Data = out.Span, out.Data
			f.delivered = append(f.delivered, d)
			f.foldLocked(d)
			f.view.Take(d.ResumeFrame())
			delivered = true
		}
		f.lastFrame = now
		f.mu.Unlock()
		f.wake()
		if gap {
			return delivered, false // ask again from Last
		}
	}
}

// foldLocked folds a delivered frame into its message's text.
func (f *follower) foldLocked(fr sframe) {
	d := fr.Payload()
	key := fr.Message
	if key == "" {
		key = d.Message
	}
	if key == "" && fr.Turn > 0 {
		key = fmt.Sprintf("a:%d", fr.Turn)
	}
	m := f.fold[key]
	if m == nil {
		m = &folded{}
		f.fold[key] = m
	}
	switch fr.Kind() {
	case "text-delta":
		if d.Text != nil {
			m.deltas += *d.Text
		}
		for _, p := range d.Parts {
			m.deltas += p
		}
	case "text-done":
		t := ""
		if d.Text != nil {
			t = *d.Text
		}
		m.done, m.status = &t, d.Status
	case "status":
		if d.State == "restarted" {
			m.deltas, m.done = "", nil
		}
	case "text-cut":
		// What streamed is not the reply (spec/stream.md): dropped.
		m.deltas = ""
	}
}

// snapshot is a copy of what the follower recorded.
type followed struct {
	raw, delivered []sframe
	verdicts       []resume.Verdict
	beats          []time.Time
	problems       []resume.Problem
	connects       int
	last           int64
	fold           map[string]folded
	rows           []resume.Row // the rendering view's rows
	sutErr, kitErr error
}

func (f *follower) snapshot() followed {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := followed{raw: append([]sframe(nil), f.raw...), delivered: append([]sframe(nil), f.delivered...),
		verdicts: append([]resume.Verdict(nil), f.verdicts...), beats: append([]time.Time(nil), f.beats...),
		problems: append([]resume.Problem(nil), f.problems...), connects: f.connects, last: f.r.Last,
		fold: map[string]folded{}, rows: f.view.Rows(), sutErr: f.sutErr, kitErr: f.kitErr}
	for k, v := range f.fold {
		out.fold[k] = *v
	}
	return out
}

// waitFor waits until pred holds of what the follower recorded, the step's wait runs out
// (a failure naming what) or the follower broke (its error).
func (f *follower) waitFor(ctx context.Context, what string, pred func(followed) bool) (followed, error) {
	for {
		fw := f.snapshot()
		if fw.kitErr != nil {
			return fw, fw.kitErr
		}
		if pred(fw) {
			return fw, nil
		}
		if fw.sutErr != nil {
			return fw, fw.sutErr
		}
		select {
		case <-f.notify:
		case <-f.ended:
			fw = f.snapshot()
			if pred(fw) {
				return fw, nil
			}
			if fw.sutErr != nil {
				return fw, fw.sutErr
			}
			got := "the stream ended after " + describeFrames(fw.delivered)
			for _, p := range fw.problems {
				got += "; " + p.Error()
			}
			return fw, fail("read the session stream of "+f.who, got, what)
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fw, fail("read the session stream of "+f.who, describeFrames(fw.delivered), what)
		}
	}
}
