package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/conversation"
	"github.com/loomcheck/loomcheck/reference/conversation/live"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// acquireStream takes a stream slot for who, within the total and per-principal limits.
func (g *Gateway) acquireStream(who loomtype.Identity) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.streams >= g.cfg.MaxStreams || g.perPrinc[who] >= g.cfg.MaxStreamsPerPrincipal {
		return false
	}
	g.streams++
	g.perPrinc[who]++
	return true
}

func (g *Gateway) releaseStream(who loomtype.Identity) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.streams--
	if g.perPrinc[who]--; g.perPrinc[who] <= 0 {
		delete(g.perPrinc, who)
	}
}

// StreamCounts reports the open streams in total and for who (for tests and metrics).
func (g *Gateway) StreamCounts(who loomtype.Identity) (total, mine int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.streams, g.perPrinc[who]
}

// sse writes server-sent events. Every data line is one line of JSON: a user's words can never
// forge an SSE field, whatever newlines they hold. Event names, ids and comments are checked
// too, so what a reader parses back is always exactly what was sent.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// errSSEField refuses an event name, id or comment that would not read back as itself (it holds
// a line break or NUL, or is not UTF-8), and data that is not UTF-8. Nothing is written then.
var errSSEField = errors.New("gateway: SSE data that is not UTF-8, or a name, id or comment with a line break, NUL or bad UTF-8")

func sseSafe(s string) bool { return utf8.ValidString(s) && !strings.ContainsAny(s, "\r\n\x00") }

// send writes one event and flushes it to the client at once.
func (s *sse) send(event, id string, v any) error {
	if err := s.write(event, id, v); err != nil {
		return err
	}
	return s.rc.Flush()
}

// write writes one event without flushing it: a caller writing several at once flushes after the
// last, and the client gets them in one write to the connection.
func (s *sse) write(event, id string, v any) error {
	if !sseSafe(event) || !sseSafe(id) {
		return errSSEField
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !utf8.Valid(b) { // a json.RawMessage is copied as it is
		return errSSEField
	}
	var buf []byte
	if id != "" {
		buf = append(buf, "id: "...)
		buf = append(buf, id...)
		buf = append(buf, '\n')
	}
	buf = append(buf, "event: "...)
	buf = append(buf, event...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	_, err = s.w.Write(buf)
	return err
}

func (s *sse) comment(text string) error {
	if !sseSafe(text) {
		return errSSEField
	}
	if _, err := s.w.Write([]byte(": " + text + "\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}

type turnText struct {
	Turn int64  `json:"turn"`
	Text string `json:"text"`
}

// events serves GET /conversations/{id}/events: the status, the partial of a running turn, the
// durable messages after the cursor, then everything live. The log is the only source of durable
// events. The stream follows the conversation (conversation.Follower): what each commit appended
// is read from the conversation's tail in memory while the stream's cursor lies within it, and
// from the log otherwise (a stream that starts before the tail or falls behind it), and once
// every Config.Poll from the log whatever the tail holds, so a commit whose report went missing
// is still delivered. The stream's own memory is bounded by Config.MaxPendingBytes (its live
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
	var cursor loomtype.Cursor
	if c := r.URL.Query().Get("cursor"); c != "" || r.Header.Get("Last-Event-ID") != "" {
		if c == "" {
			c = r.Header.Get("Last-Event-ID")
		}
		var err error
		if cursor, err = loomtype.ParseCursor(c); err != nil {
			fail(err)
			return
		}
	}
	if !g.acquireStream(who) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "too many requests", "")
		return
	}
	defer g.releaseStream(who)
	share := 0 // in a shared conversation, a principal holds at most half its subscribers, rounded up
	if shared {
		share = (g.cv.Hub().MaxSubscribers() + 1) / 2
	}
	at, err := g.cv.Hub().AttachShare(id, who.Key(), share, g.cfg.MaxPendingBytes)
	sub, pturn, ptext, pasker, rerun := at.Sub, at.Turn, at.Text, at.Asker, at.Rerun
	if err != nil {
		fail(err)
		return
	}
	defer g.cv.Hub().Unsubscribe(id, sub)
	fl := g.cv.Follow(id)
	defer fl.Close()
	wake := fl.Wake()

	st, err := g.cv.Status(ctx, who, id)
	if err != nil {
		fail(err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, rc: http.NewResponseController(w)}

	// A slow reader that lets its live queue overflow is cut off: a write it blocks fails at
	// once and the client recovers from the log with Last-Event-ID.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sub.Overflowed():
			_ = out.rc.SetWriteDeadline(time.Now())
		case <-ctx.Done():
		}
	}()

	// Ask browsers to reconnect after a second rather than their default three.
	if _, err := w.Write([]byte("retry: 1000\n\n")); err != nil {
		return
	}
	if err := out.send("status", "", st); err != nil {
		return
	}
	var lastReplyTurn int64
	// deliverUntil sends the records after cursor that read gives (the tail or the log), stopping
	// before the first one stop holds (nil: none), which is sent by a later call.
	type reader func(context.Context, loomtype.Cursor, int) ([]loomtype.Entry, loomtype.Cursor, bool, error)
	// The records of one delivery go out in one flush, before the stream waits again.
	deliverUntil := func(read reader, stop func(loomtype.Entry) bool) (closed bool, err error) {
		defer func() {
			if ferr := out.rc.Flush(); err == nil && ferr != nil {
				closed, err = false, ferr
			}
		}()
		for {
			entries, next, done, err := read(ctx, cursor, 100)
			if err != nil {
				return false, err
			}
			for _, e := range entries {
				if stop != nil && stop(e) {
					return false, nil
				}
				at, err := loomtype.ParseCursor(e.Cursor)
				if err != nil {
					return false, err
				}
				v, err := fl.View(ctx, who, e)
				if err != nil {
					return false, err // membership is re-checked for every delivered entry
				}
				if err := out.write("message", e.Cursor, v); err != nil {
					return false, err
				}
				cursor = at
				if e.Role == loomtype.RoleAssistant && e.Turn > lastReplyTurn {
					lastReplyTurn = e.Turn
				}
				if e.Status == loomtype.StatusClosed {
					_ = out.send("closed", "", struct{}{})
					return true, nil
				}
			}
			cursor = next
			if done {
				return false, nil
			}
		}
	}
	deliver := func() (bool, error) { return deliverUntil(fl.Read, nil) }
	deliverLog := func() (bool, error) { return deliverUntil(fl.ReadLog, nil) }
	if closed, err := deliver(); err != nil || closed {
		return
	}
	// The reply in progress, unless the replay already delivered its durable record.
	if pturn > lastReplyTurn && g.mayWatch(st, who, pasker) {
		if rerun {
			if err := out.send("reset", "", map[string]int64{"turn": pturn}); err != nil {
				return
			}
		}
		if err := out.send("partial", "", turnText{Turn: pturn, Text: ptext}); err != nil {
			return
		}
	}
	lifetime := time.NewTimer(g.cfg.StreamLifetime)
	defer lifetime.Stop()
	reauth := time.NewTicker(g.cfg.Reauth)
	defer reauth.Stop()
	poll := time.NewTicker(g.cfg.Poll)
	defer poll.Stop()
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.shutdownCh:
			_ = out.send("reconnect", "", map[string]string{"reason": "shutdown"})
			return
		case <-lifetime.C:
			_ = out.send("reconnect", "", map[string]string{"reason": "lifetime"})
			return
		case <-reauth.C:
			now, err := g.authenticate(r)
			if err != nil || !now.Equal(who) {
				_ = out.send("error", "", map[string]string{"error": "unauthenticated"})
				return
			}
			if err := g.cv.Authorize(ctx, who, id); err != nil {
				_ = out.send("error", "", map[string]string{"error": "not found"})
				return
			}
		case <-keepAlive.C:
			if err := out.comment("keep-alive"); err != nil {
				return
			}
		case <-sub.Notify():
			evs, overflow := sub.Drain()
			if overflow {
				_ = out.send("reconnect", "", map[string]string{"reason": "slow-consumer"})
				return
			}
			// Records committed before this live text was produced go first: the follower's
			// wake-up is signalled once a commit is durable and before its writer goes on (so
			// before any live text made after it), so a pending one means records this stream
			// has not sent.
			// They stop before the reply of the text's turn, which was written after it.
			rewake := false
			t, held := int64(0), false
			for _, ev := range evs {
				if ev.Kind == live.KindDelta {
					t, held = ev.Turn, true
					break
				}
			}
			if held {
				select {
				case <-wake:
					rewake = true
					if g.endAfterDelivery(out, func() (bool, error) {
						return deliverUntil(fl.Read, func(e loomtype.Entry) bool {
							return e.Role == loomtype.RoleAssistant && e.Turn >= t
						})
					}) {
						return
					}
				default:
				}
			}
			for _, ev := range evs {
				if !g.mayWatch(st, who, ev.Asker) {
					continue
				}
				switch ev.Kind {
				case live.KindDelta:
					if ev.Turn <= lastReplyTurn {
						continue // the durable reply already superseded it
					}
					if err := out.send("delta", "", turnText{Turn: ev.Turn, Text: ev.Text}); err != nil {
						return
					}
				case live.KindReset:
					if err := out.send("reset", "", map[string]int64{"turn": ev.Turn}); err != nil {
						return
					}
				}
			}
			if rewake && g.endAfterDelivery(out, deliver) {
				return
			}
		case <-wake:
			if g.endAfterDelivery(out, deliver) {
				return
			}
		case <-poll.C:
			if closed, err := deliverLog(); err != nil || closed {
				return
			}
		}
	}
}

// endAfterDelivery sends what the log holds after the stream's cursor and says whether the
// stream ends: the conversation closed, or the delivery failed (damaged storage gets its own
// error event, reported like a 500; a viewer no longer allowed, or a client gone, ends silently).
func (g *Gateway) endAfterDelivery(out *sse, deliver func() (bool, error)) bool {
	closed, err := deliver()
	if err == nil && !closed {
		return false
	}
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, loomtype.ErrNotFound):
	case errors.Is(err, loomtype.ErrCorrupt):
		id := loomtype.NewErrorID()
		if g.cfg.OnError != nil {
			g.cfg.OnError(id, err)
		} else {
			g.log.Error("gateway: storage damaged", "errorId", id, "err", err)
		}
		_ = out.send("error", "", map[string]string{"error": "storage damaged", "errorId": id})
	default:
		_ = out.send("error", "", map[string]string{"error": "internal"})
	}
	return true
}

// mayWatch says whether who may see the live output of a turn asked by asker: everyone in owner
// mode, only the asker in shared mode (the turn's class is not known until it ends).
func (g *Gateway) mayWatch(st loomtype.Status, who loomtype.Identity, asker string) bool {
	if st.Mode != conversation.ModeShared {
		return true
	}
	return asker == who.Key()
}
