package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// streamGrace is how long past its lifetime a stream's slot counts when the stream could not give
// it back (a failed release): the slot then expires by itself.
const streamGrace = time.Minute

// acquireStream takes a stream slot for who, within the total (gateway.maxStreams, everyone's
// streams) and per-principal (gateway.maxStreamsPerPrincipal) limits, both counted by
// Config.Quotas: this engine's memory when it runs its store alone, every engine's count in the
// store when the store is shared out in partitions. ok is false when either is reached; the two
// slots share one id (slot names the principal's, system the total's).
func (g *Gateway) acquireStream(ctx context.Context, who loomtype.Identity) (slot quota.Slot, ok bool, err error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	now := time.Now()
	slot = quota.Slot{Kind: quota.Streams, Who: who, ID: hex.EncodeToString(b[:]),
		Expires: now.Add(g.cfg.StreamLifetime + streamGrace).UnixMilli()}
	all := systemSlot(slot)
	err = g.cfg.Quotas.Admit(ctx, all, g.cfg.MaxStreams, now.UnixMilli())
	if err == nil {
		err = g.cfg.Quotas.Admit(ctx, slot, g.cfg.MaxStreamsPerPrincipal, now.UnixMilli())
		if err != nil {
			g.giveBack(ctx, all)
		}
	}
	switch {
	case err == nil:
		g.mu.Lock()
		g.streams++ // this engine's, for Memory
		g.mu.Unlock()
		return slot, true, nil
	case errors.Is(err, loomtype.ErrLimit):
		return slot, false, nil
	}
	return slot, false, err
}

// systemSlot is the slot of the total bound that goes with the principal's stream slot s.
func systemSlot(s quota.Slot) quota.Slot {
	return quota.Slot{Kind: quota.AllStreams, Who: quota.System, ID: s.ID, Expires: s.Expires}
}

// releaseStream gives back the slots acquireStream took, even when the request is over.
func (g *Gateway) releaseStream(ctx context.Context, slot quota.Slot) {
	g.mu.Lock()
	g.streams--
	g.mu.Unlock()
	g.giveBack(ctx, slot)
	g.giveBack(ctx, systemSlot(slot))
}

// giveBack releases one slot of a stream; one that cannot be released expires by itself.
func (g *Gateway) giveBack(ctx context.Context, slot quota.Slot) {
	if err := g.cfg.Quotas.Release(context.WithoutCancel(ctx), slot); err != nil {
		g.log.Warn("a stream's slot was not given back; it expires by itself", "error", err)
	}
}

// admitStream takes a stream slot for who, or answers 429 (Retry-After 1) when none is free. The
// caller gives the slot back with releaseStream when ok.
func (g *Gateway) admitStream(w http.ResponseWriter, r *http.Request, who loomtype.Identity) (slot quota.Slot, ok bool) {
	slot, ok, err := g.acquireStream(r.Context(), who)
	switch {
	case err != nil && r.Context().Err() != nil: // the client went away: no internal error
	case err != nil:
		g.fail(w, err)
	case !ok:
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many requests", "")
	}
	return slot, ok
}

// keepAlive is how often the conversation's event stream sends a keep-alive comment.
const keepAlive = 15 * time.Second

// followConfig is what both streams share: their lifetime, their re-authorization, the server's
// shutdown. The session stream beats after every idle Config.Heartbeat; the conversation's event
// stream sends a keep-alive every 15 s and polls the log every Config.Poll.
func (g *Gateway) followConfig(r *http.Request, who loomtype.Identity, id string, session bool) stream.FollowConfig {
	cfg := stream.FollowConfig{Lifetime: g.cfg.StreamLifetime, Reauth: g.cfg.Reauth,
		Reauthorize: g.reauthorize(r, who, id), Shutdown: g.shutdownCh, Beat: keepAlive, Poll: g.cfg.Poll}
	if session {
		cfg.Beat, cfg.BeatWhenIdle, cfg.Poll = g.cfg.Heartbeat, true, 0
		if cfg.Beat <= 0 {
			cfg.Beat = DefaultHeartbeat
		}
	}
	return cfg
}

// reauthorize asks again, every Config.Reauth, whether the stream's reader is still who (its
// credentials) and may still read conversation id.
func (g *Gateway) reauthorize(r *http.Request, who loomtype.Identity, id string) func(context.Context) stream.Ending {
	return func(ctx context.Context) stream.Ending {
		now, err := g.authenticate(r)
		if err != nil || !now.Equal(who) {
			return stream.EndUnauthenticated
		}
		if err := g.cv.Authorize(ctx, who, id); err != nil {
			return stream.EndRevoked
		}
		return stream.EndNone
	}
}

// eventsCursor is where a conversation's event stream resumes: the cursor parameter, else the
// Last-Event-ID header, else the start.
func eventsCursor(r *http.Request) (loomtype.Cursor, error) {
	if c := r.URL.Query().Get("cursor"); c != "" || r.Header.Get("Last-Event-ID") != "" {
		if c == "" {
			c = r.Header.Get("Last-Event-ID")
		}
		return loomtype.ParseCursor(c)
	}
	return loomtype.Cursor{}, nil
}

// events serves GET /conversations/{id}/events: the status, the durable messages after the
// cursor, the partial of a running turn, then everything live (stream.ConvAdapter decides what
// is sent, stream.Follow drives the stream). The log is the only source of durable events. The
// stream follows the conversation (conversation.Follower): what each commit appended is read
// from the conversation's tail in memory while the stream's cursor lies within it, and from the
// log otherwise (a stream that starts before the tail or falls behind it), and once every
// Config.Poll from the log whatever the tail holds, so a commit whose report went missing is
// still delivered. The stream's own memory is bounded by Config.MaxPendingBytes (its live
// queue; past it the stream ends with a reconnect event and the client resumes from its
// cursor); the tail it reads is the conversation's, shared by its streams and bounded by the
// hub's live.TailLimits.
func (g *Gateway) events(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	ctx := r.Context()
	id := r.PathValue("id")
	// A client that went away before the stream began is not an internal error.
	fail := func(err error) {
		if ctx.Err() == nil {
			g.fail(w, err)
		}
	}
	shared, err := g.cv.AuthorizeShared(ctx, who, id)
	if err != nil {
		fail(err)
		return
	}
	cursor, err := eventsCursor(r)
	if err != nil {
		fail(err)
		return
	}
	slot, ok := g.admitStream(w, r, who)
	if !ok {
		return
	}
	defer g.releaseStream(r.Context(), slot)
	share := 0 // in a shared conversation, a principal holds at most half its subscribers, rounded up
	if shared {
		share = (g.cv.Hub().MaxSubscribers() + 1) / 2
	}
	at, err := g.cv.Hub().AttachShare(id, who.Key(), share, g.cfg.MaxPendingBytes)
	if err != nil {
		fail(err)
		return
	}
	defer g.cv.Hub().Unsubscribe(id, at.Sub)
	fl := g.cv.Follow(id)
	defer fl.Close()
	cs := &convStream{g: g, who: who, fl: fl, wake: fl.Wake(), at: at, ad: stream.NewConvAdapter(who.Key(), cursor)}
	if cs.st, err = g.cv.Status(ctx, who, id); err != nil {
		fail(err)
		return
	}
	cs.out = startSSE(w)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go cutOnOverflow(ctx, at.Sub, cs.out.rc)
	stream.Follow(ctx, g.followConfig(r, who, id, false), cs)
}

// cutOnOverflow cuts off a slow reader that lets its live queue overflow: a write it blocks
// fails at once and the client recovers from the log with Last-Event-ID.
func cutOnOverflow(ctx context.Context, sub *live.Sub, rc *http.ResponseController) {
	select {
	case <-sub.Overflowed():
		_ = rc.SetWriteDeadline(time.Now())
	case <-ctx.Done():
	}
}

// convStream is one conversation's event stream as stream.Follow drives it: it reads records
// and live events, asks whether its reader may see each record, and writes what the adapter
// makes of them as server-sent events.
type convStream struct {
	g    *Gateway
	who  loomtype.Identity
	fl   *conversation.Follower
	wake <-chan struct{}
	at   live.Attached
	st   loomtype.Status
	ad   *stream.ConvAdapter
	out  *sse
	// errorID names the damage a delivery met, for the error event that ends the stream.
	errorID string
}

func (c *convStream) Signals() stream.Signals[struct{}] {
	return stream.Signals[struct{}]{Live: c.at.Sub.Notify(), Wake: c.wake}
}

// Start sends the status, the records after the cursor, then the reply in progress (unless the
// records already held its durable reply).
func (c *convStream) Start(ctx context.Context) stream.Ending {
	if c.out.retry() != nil || c.out.sendEvents(c.ad.Begin(c.st)) != nil {
		return stream.EndGone
	}
	if end := quietly(c.deliver(ctx, c.fl.Read, nil)); end != stream.EndNone {
		return end
	}
	if c.out.sendEvents(c.ad.Partial(c.at.Reply)) != nil {
		return stream.EndGone
	}
	return stream.EndNone
}

// Live sends the live events waiting. Records committed before this live text was produced go
// first: the follower's wake-up is signalled once a commit is durable and before its writer goes
// on (so before any live text made after it), so a pending one means records this stream has
// not sent. They stop before the reply of the text's turn, which was written after it.
func (c *convStream) Live(ctx context.Context, _ struct{}) (stream.Ending, bool) {
	evs, overflow := c.at.Sub.Drain()
	if overflow {
		return stream.EndOverflow, false
	}
	rewake := false
	if before := c.ad.HoldBack(evs); before != nil {
		select {
		case <-c.wake:
			rewake = true
			if end := c.loudly(c.deliver(ctx, c.fl.Read, before)); end != stream.EndNone {
				return end, false
			}
		default:
		}
	}
	out := c.ad.Live(evs)
	if c.out.sendEvents(out) != nil {
		return stream.EndGone, false
	}
	if rewake {
		return c.loudly(c.deliver(ctx, c.fl.Read, nil)), len(out) > 0
	}
	return stream.EndNone, len(out) > 0
}

// Records sends what the tail holds after a wake-up, or what the log holds on a poll.
func (c *convStream) Records(ctx context.Context, polled bool) stream.Ending {
	if polled {
		return quietly(c.deliver(ctx, c.fl.ReadLog, nil))
	}
	return c.loudly(c.deliver(ctx, c.fl.Read, nil))
}

// Cut is never signalled: an overflow is read from the live queue (Live).
func (c *convStream) Cut(context.Context) stream.Ending { return stream.EndOverflow }

func (c *convStream) Beat(context.Context, time.Time) stream.Ending {
	if c.out.writeEvents(c.ad.Beat()) != nil {
		return stream.EndGone
	}
	return stream.EndNone
}

func (c *convStream) Finish(_ context.Context, end stream.Ending) {
	_ = c.out.sendEvents(c.ad.End(end, c.errorID))
}

// reader reads the records after a cursor: the conversation's tail, or its log.
type reader func(context.Context, loomtype.Cursor, int) ([]loomtype.Entry, loomtype.Cursor, bool, error)

// deliver sends the records after the stream's cursor that read gives, stopping before the
// first one stop holds (nil: none), which a later call sends. The records of one delivery go out
// in one flush, before the stream waits again. closed says the conversation's closing record
// went out.
func (c *convStream) deliver(ctx context.Context, read reader, stop func(loomtype.Entry) bool) (closed bool, err error) {
	defer func() {
		if ferr := c.out.rc.Flush(); err == nil && ferr != nil {
			closed, err = false, ferr
		}
	}()
	for {
		entries, next, done, err := read(ctx, c.ad.Cursor(), 100)
		if err != nil {
			return false, err
		}
		for _, e := range entries {
			if stop != nil && stop(e) {
				return false, nil
			}
			v, err := c.fl.View(ctx, c.who, e)
			if err != nil {
				return false, err // membership is re-checked for every delivered entry
			}
			evs, err := c.ad.Record(e, v)
			if err != nil {
				return false, err
			}
			if err := c.out.writeEvents(evs); err != nil {
				return false, err
			}
			if c.ad.Closed() {
				return true, nil
			}
		}
		c.ad.ReadTo(next)
		if done {
			return false, nil
		}
	}
}

// quietly is how a delivery ends the stream at its start and on a poll: the conversation closed,
// or it failed (the reader is told nothing then).
func quietly(closed bool, err error) stream.Ending {
	switch {
	case err != nil:
		return stream.EndGone
	case closed:
		return stream.EndFinished
	}
	return stream.EndNone
}

// loudly is how a delivery ends the stream after a wake-up: the conversation closed, or the
// delivery failed (damaged storage gets its own error event, reported like a 500; a viewer no
// longer allowed, or a client gone, ends silently; another failure is an internal error).
func (c *convStream) loudly(closed bool, err error) stream.Ending {
	switch {
	case err == nil && closed:
		return stream.EndFinished
	case err == nil:
		return stream.EndNone
	case errors.Is(err, context.Canceled), errors.Is(err, loomtype.ErrNotFound):
		return stream.EndGone
	case errors.Is(err, loomtype.ErrCorrupt):
		c.errorID = loomtype.NewErrorID()
		if c.g.cfg.OnError != nil {
			c.g.cfg.OnError(c.errorID, err)
		} else {
			c.g.log.Error("gateway: storage damaged", "errorId", c.errorID, "err", err)
		}
		return stream.EndDamaged
	}
	return stream.EndFailed
}
