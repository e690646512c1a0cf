package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

// fakeFollower records what the loop asked of it and ends as it is told.
type fakeFollower struct {
	sig      stream.Signals[int]
	start    stream.Ending
	onLive   func(int) stream.Ending
	records  map[bool]stream.Ending
	cut      stream.Ending
	beatEnd  stream.Ending
	beats    []time.Time
	finished []stream.Ending
	polled   []bool
}

func (f *fakeFollower) Start(context.Context) stream.Ending       { return f.start }
func (f *fakeFollower) Signals() stream.Signals[int]              { return f.sig }
func (f *fakeFollower) Cut(context.Context) stream.Ending         { return f.cut }
func (f *fakeFollower) Finish(_ context.Context, e stream.Ending) { f.finished = append(f.finished, e) }
func (f *fakeFollower) Live(_ context.Context, it int) (stream.Ending, bool) {
	return f.onLive(it), true
}
func (f *fakeFollower) Records(_ context.Context, polled bool) stream.Ending {
	f.polled = append(f.polled, polled)
	return f.records[polled]
}
func (f *fakeFollower) Beat(_ context.Context, now time.Time) stream.Ending {
	f.beats = append(f.beats, now)
	return f.beatEnd
}

// quiet is a configuration none of whose timers fires during a test.
func quiet() stream.FollowConfig {
	return stream.FollowConfig{Lifetime: time.Hour, Reauth: time.Hour, Beat: time.Hour,
		Reauthorize: func(context.Context) stream.Ending { return stream.EndNone }}
}

// TestFollowEndings: each way a followed stream ends is returned, and told to the reader through
// Finish, except a client that went away.
func TestFollowEndings(t *testing.T) {
	ctx := context.Background()
	closed := make(chan struct{})
	close(closed)

	t.Run("start", func(t *testing.T) {
		f := &fakeFollower{start: stream.EndFinished}
		if got := stream.Follow(ctx, quiet(), f); got != stream.EndFinished {
			t.Fatalf("got %v", got)
		}
		if len(f.finished) != 1 || f.finished[0] != stream.EndFinished {
			t.Fatalf("finished %v", f.finished)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		cfg := quiet()
		cfg.Shutdown = closed
		f := &fakeFollower{}
		if got := stream.Follow(ctx, cfg, f); got != stream.EndShutdown || len(f.finished) != 1 || f.finished[0] != stream.EndShutdown {
			t.Fatalf("got %v, finished %v", got, f.finished)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		gone, cancel := context.WithCancel(ctx)
		cancel()
		f := &fakeFollower{}
		if got := stream.Follow(gone, quiet(), f); got != stream.EndGone || len(f.finished) != 0 {
			t.Fatalf("got %v, finished %v", got, f.finished)
		}
	})
	t.Run("lifetime", func(t *testing.T) {
		cfg := quiet()
		cfg.Lifetime = time.Nanosecond
		f := &fakeFollower{}
		if got := stream.Follow(ctx, cfg, f); got != stream.EndLifetime || f.finished[0] != stream.EndLifetime {
			t.Fatalf("got %v, finished %v", got, f.finished)
		}
	})
	t.Run("reauthorization", func(t *testing.T) {
		cfg := quiet()
		cfg.Reauth = time.Nanosecond
		asked := 0
		cfg.Reauthorize = func(context.Context) stream.Ending {
			if asked++; asked < 3 {
				return stream.EndNone
			}
			return stream.EndRevoked
		}
		f := &fakeFollower{}
		if got := stream.Follow(ctx, cfg, f); got != stream.EndRevoked || asked != 3 || f.finished[0] != stream.EndRevoked {
			t.Fatalf("got %v after %d, finished %v", got, asked, f.finished)
		}
	})
	t.Run("cut", func(t *testing.T) {
		f := &fakeFollower{sig: stream.Signals[int]{Cut: closed}, cut: stream.EndOverflow}
		if got := stream.Follow(ctx, quiet(), f); got != stream.EndOverflow {
			t.Fatalf("got %v", got)
		}
	})
}

// TestFollowSignals: live items reach Live in order, a wake-up asks for the records and a poll
// for the log's, and a heartbeat is made at the time the loop passes.
func TestFollowSignals(t *testing.T) {
	ctx := context.Background()
	items := make(chan int, 3)
	items <- 1
	items <- 2
	items <- 3
	var got []int
	f := &fakeFollower{sig: stream.Signals[int]{Live: items}, onLive: func(it int) stream.Ending {
		if got = append(got, it); it == 3 {
			return stream.EndFailed
		}
		return stream.EndNone
	}}
	if end := stream.Follow(ctx, quiet(), f); end != stream.EndFailed || len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("ended %v after %v", end, got)
	}

	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	f = &fakeFollower{sig: stream.Signals[int]{Wake: wake}, records: map[bool]stream.Ending{true: stream.EndDamaged}}
	cfg := quiet()
	cfg.Poll = time.Nanosecond
	if end := stream.Follow(ctx, cfg, f); end != stream.EndDamaged || f.polled[len(f.polled)-1] != true {
		t.Fatalf("ended %v after reads %v", end, f.polled)
	}

	cfg = quiet()
	cfg.Beat = time.Nanosecond
	before := time.Now()
	f = &fakeFollower{beatEnd: stream.EndGone}
	if end := stream.Follow(ctx, cfg, f); end != stream.EndGone || len(f.beats) != 1 || f.beats[0].Before(before) || len(f.finished) != 0 {
		t.Fatalf("ended %v after beats %v, finished %v", end, f.beats, f.finished)
	}
}
