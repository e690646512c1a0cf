package stream

import (
	"context"
	"time"
)

// Ending says why a followed stream ended. Each stream decides what its reader is told of it
// (Follower.Finish): the conversation's event stream says most endings in an event, the session
// stream only a reader's removal.
type Ending uint8

// The endings of a followed stream.
const (
	// EndNone: the stream goes on.
	EndNone Ending = iota
	// EndGone: the client went away, a write failed, or what came may no longer be read by the
	// reader (it is told nothing).
	EndGone
	// EndShutdown: the server is shutting down; the reader reconnects.
	EndShutdown
	// EndLifetime: the stream reached its lifetime; the reader reconnects.
	EndLifetime
	// EndOverflow: the reader fell behind its bounded live queue; it resumes from its cursor.
	EndOverflow
	// EndUnauthenticated: the reader's credentials no longer name the principal that opened it.
	EndUnauthenticated
	// EndRevoked: the principal may no longer read what the stream follows.
	EndRevoked
	// EndFinished: what the stream follows has ended (a closed conversation, a removed reader).
	EndFinished
	// EndDamaged: the storage the stream reads from is damaged.
	EndDamaged
	// EndFailed: reading failed otherwise.
	EndFailed
)

var endingNames = [...]string{"none", "gone", "shutdown", "lifetime", "overflow", "unauthenticated",
	"revoked", "finished", "damaged", "failed"}

// String names the ending (its reason in a transcript).
func (e Ending) String() string {
	if int(e) < len(endingNames) {
		return endingNames[e]
	}
	return "unknown"
}

// Signals are the channels a follower is woken by: Live when live items wait (an item itself,
// or a notification), Wake when durable records were committed, Cut when its subscription was
// cut off. A nil channel never fires.
type Signals[T any] struct {
	Live <-chan T
	Wake <-chan struct{}
	Cut  <-chan struct{}
}

// A Follower is one stream as Follow drives it: what it sends first, what it does on each
// signal, and how it tells its reader that it ends. Each method writes to the stream's own
// transport and returns EndNone to go on.
type Follower[T any] interface {
	// Start sends what the stream begins with (a status, a replay, the reply in progress).
	Start(ctx context.Context) Ending
	// Signals are the channels the loop waits on besides its own timers.
	Signals() Signals[T]
	// Live handles one live signal; sent says whether it sent the reader something (the idle
	// heartbeat counts from there).
	Live(ctx context.Context, item T) (end Ending, sent bool)
	// Records sends the durable records committed since the last (polled: read from the log
	// itself, on the follow's poll, rather than on a wake-up).
	Records(ctx context.Context, polled bool) Ending
	// Cut handles the end of the subscription: what was queued before it, then its ending.
	Cut(ctx context.Context) Ending
	// Beat sends a heartbeat made at now.
	Beat(ctx context.Context, now time.Time) Ending
	// Finish tells the reader why the stream ends, when its transport says so; it is not called
	// when the client went away.
	Finish(ctx context.Context, end Ending)
}

// FollowConfig is what every followed stream shares: how long it lives, how often its reader is
// authorized again, how often it beats and polls, and the server's shutdown.
type FollowConfig struct {
	// Lifetime bounds a stream: past it, the stream ends with EndLifetime.
	Lifetime time.Duration
	// Reauth is how often Reauthorize is asked; the stream ends with what it answers, unless
	// EndNone.
	Reauth      time.Duration
	Reauthorize func(ctx context.Context) Ending
	// Beat is how often a heartbeat is sent; with BeatWhenIdle, only after Beat without a live
	// item sent (the beat counts from the last one).
	Beat         time.Duration
	BeatWhenIdle bool
	// Poll is how often Records is asked with polled true (0: never).
	Poll time.Duration
	// Shutdown is closed when the server shuts down.
	Shutdown <-chan struct{}
}

// Follow runs one stream: Start, then every signal, heartbeat, poll and re-authorization in
// turn, until the client goes (ctx), the server shuts down, the stream's lifetime passes, its
// reader may no longer read, or one of the follower's steps ends it. It returns why it ended,
// after Finish told the reader (unless the client went away).
//
//	end := stream.Follow(ctx, cfg, follower)
func Follow[T any](ctx context.Context, cfg FollowConfig, f Follower[T]) Ending {
	end := f.Start(ctx)
	if end == EndNone {
		end = follow(ctx, cfg, f)
	}
	if end != EndGone && ctx.Err() == nil {
		f.Finish(ctx, end)
	}
	return end
}

// follow waits on the follower's signals and on one timer, armed for the nearest of the stream's
// own deadlines (its lifetime, the next re-authorization, heartbeat and poll). One timer rather
// than one per deadline keeps the wait short, and a wait is made once per frame and reader; a
// frame sent moves the idle heartbeat's deadline on without touching the timer, which, when it
// fires before a deadline that moved, is armed again for the nearest one.
func follow[T any](ctx context.Context, cfg FollowConfig, f Follower[T]) Ending {
	now := time.Now()
	d := deadlines{life: now.Add(cfg.Lifetime), reauth: now.Add(cfg.Reauth), beat: now.Add(cfg.Beat)}
	if cfg.Poll > 0 {
		d.poll = now.Add(cfg.Poll)
	}
	timer := time.NewTimer(d.next().Sub(now))
	defer timer.Stop()
	sig := f.Signals()
	for {
		end := EndNone
		select {
		case <-ctx.Done():
			return EndGone
		case <-cfg.Shutdown:
			return EndShutdown
		case now := <-timer.C:
			if end = d.due(ctx, cfg, f, now); end == EndNone {
				timer.Reset(time.Until(d.next()))
			}
		case <-sig.Cut:
			end = f.Cut(ctx)
		case it := <-sig.Live:
			var sent bool
			if end, sent = f.Live(ctx, it); sent && cfg.BeatWhenIdle {
				d.beat = time.Now().Add(cfg.Beat)
			}
		case <-sig.Wake:
			end = f.Records(ctx, false)
		}
		if end != EndNone {
			return end
		}
	}
}

// deadlines are a followed stream's own: when it ends, and when it is next re-authorized, sent a
// heartbeat and polled (poll zero: never).
type deadlines struct{ life, reauth, beat, poll time.Time }

// next is the nearest deadline.
func (d *deadlines) next() time.Time {
	t := d.life
	for _, u := range [...]time.Time{d.reauth, d.beat, d.poll} {
		if !u.IsZero() && u.Before(t) {
			t = u
		}
	}
	return t
}

// due does what is due at now, in order: the lifetime's end, a re-authorization, a heartbeat, a
// poll; each one done is next due a period after now. It returns the first ending met.
func (d *deadlines) due(ctx context.Context, cfg FollowConfig, f dueFollower, now time.Time) Ending {
	if !now.Before(d.life) {
		return EndLifetime
	}
	if !now.Before(d.reauth) {
		d.reauth = now.Add(cfg.Reauth)
		if end := cfg.Reauthorize(ctx); end != EndNone {
			return end
		}
	}
	if !now.Before(d.beat) {
		d.beat = now.Add(cfg.Beat)
		if end := f.Beat(ctx, now); end != EndNone {
			return end
		}
	}
	if !d.poll.IsZero() && !now.Before(d.poll) {
		d.poll = now.Add(cfg.Poll)
		return f.Records(ctx, true)
	}
	return EndNone
}

// dueFollower is what due asks of a Follower.
type dueFollower interface {
	Records(ctx context.Context, polled bool) Ending
	Beat(ctx context.Context, now time.Time) Ending
}
