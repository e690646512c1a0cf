package gateway

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// sessionStream serves GET /sessions/{id}/stream: a WebSocket upgrade that presents a ticket, or
// SSE (with a ticket, or authorized as the caller on every connection, so that a browser's
// EventSource can reconnect by itself with Last-Event-ID).
func (g *Gateway) sessionStream(w http.ResponseWriter, r *http.Request, who loomtype.Identity) {
	id := r.PathValue("id")
	ws := strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	from, ok := g.sessionFrom(w, r, who, id, ws)
	if !ok {
		return
	}
	slot, admitted := g.admitStream(w, r, who)
	if !admitted {
		return
	}
	defer g.releaseStream(r.Context(), slot)
	if err := g.cfg.Sessions.Hold(r.Context(), who, id); err != nil {
		if !quotaRefused(w, err) {
			g.fail(w, err)
		}
		return
	}
	sf := &sessionFollow{g: g, who: who, id: id}
	var err error
	if sf.viewer, err = g.cfg.Sessions.ViewerOf(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return
	}
	sf.sub, sf.replay, sf.reset, sf.head, sf.floor, err = g.cfg.Sessions.SubscribeAs(r.Context(), who, id, from)
	if err != nil {
		if errors.Is(err, sessions.ErrTooManySubscribers) {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusTooManyRequests, "too many requests", "")
			return
		}
		g.fail(w, err)
		return
	}
	defer sf.sub.Close()
	ctx := r.Context()
	if ws {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // Origin was checked at the door
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx = c.CloseRead(ctx) // nothing is read from the client: it acks nothing
		out := newWSSender(c)
		defer out.stop()
		sf.out = out
	} else {
		s := startSSE(w)
		if s.retry() != nil || s.rc.Flush() != nil { // the answer starts now, even with nothing to send yet
			return
		}
		sf.out = sseFrames{s}
	}
	stream.Follow(ctx, g.followConfig(r, who, id, true), sf)
}

// sessionFrom is where a session stream starts, from its ticket, its from parameter and its
// Last-Event-ID; it answers the refusal itself (ok false) when the ticket is refused, the reader
// may not read the session, or a position does not parse.
func (g *Gateway) sessionFrom(w http.ResponseWriter, r *http.Request, who loomtype.Identity, id string, ws bool) (from int64, ok bool) {
	q := r.URL.Query()
	device := q.Get("device")
	if device == "" {
		device = r.Header.Get("Loom-Device")
	}
	if tk := q.Get("ticket"); tk != "" {
		gr, err := g.cfg.Sessions.Redeem(tk, who, device)
		var te *sessions.TicketError
		if errors.As(err, &te) {
			ticketRefused(w, te.Reason)
			return 0, false
		}
		if gr.Session != id {
			ticketRefused(w, sessions.TicketUnknown)
			return 0, false
		}
		from = gr.From
	} else if ws {
		ticketRefused(w, sessions.TicketUnknown)
		return 0, false
	}
	// Who may read is asked again on every connection, ticket or not: a reader removed since
	// the open is refused (the uniform 404).
	if err := g.cv.Authorize(r.Context(), who, id); err != nil {
		g.fail(w, err)
		return 0, false
	}
	if v := q.Get("from"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad request", "from")
			return 0, false
		}
		from = n
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" && !ws {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid cursor", "")
			return 0, false
		}
		from = n
	}
	return from, true
}

// sessionFollow is one session stream as stream.Follow drives it: the reset (when the reader is
// behind the floor), the replay, the reader's read marker, then every live frame, each drawn for
// the viewer, with heartbeats while idle. It ends when the client goes, the subscriber is cut
// off (the client resumes from its cursor), the viewer may no longer read, or the gateway shuts
// down; only a reader removed for good is told, with an end frame.
type sessionFollow struct {
	g           *Gateway
	out         frameSender
	who         loomtype.Identity
	id          string
	viewer      sessions.Viewer
	sub         *sessions.Sub
	replay      []stream.Frame
	reset       bool
	head, floor int64
	// gate holds back a read marker that would not move forward (never an older marker after a
	// newer one).
	gate sessions.MarkerGate
}

func (s *sessionFollow) Signals() stream.Signals[sessions.Item] {
	return stream.Signals[sessions.Item]{Live: s.sub.Frames(), Cut: s.sub.Done()}
}

func (s *sessionFollow) Start(ctx context.Context) stream.Ending {
	if s.reset {
		f := stream.Control(stream.KindReset, s.id, time.Now(), map[string]int64{"floor": s.floor, "head": s.head})
		if s.out.send(ctx, f, nil) != nil {
			return stream.EndGone
		}
	}
	for _, f := range s.replay {
		v, err := s.g.cfg.Sessions.Render(ctx, s.id, s.viewer, s.sub.GuardOf(f))
		if err != nil || s.out.send(ctx, v, nil) != nil {
			return stream.EndGone
		}
	}
	// The reader's own read marker as it stood when the subscription started, after the frames
	// it refers to; the live markers queued since move it further.
	if f, ok := s.sub.ReadMarker(); ok {
		if s.send(ctx, f, nil) != nil {
			return stream.EndGone
		}
	}
	return stream.EndNone
}

// send sends f (enc: its encoding, when known) unless it is a read marker the gate holds back.
func (s *sessionFollow) send(ctx context.Context, f stream.Frame, enc []byte) error {
	if !s.gate.Pass(f) {
		return nil
	}
	return s.out.send(ctx, f, enc)
}

// Live sends a live frame meant for the reader, drawn for its viewer.
func (s *sessionFollow) Live(ctx context.Context, it sessions.Item) (stream.Ending, bool) {
	if !it.For(s.who) {
		return stream.EndNone, false
	}
	v, enc, err := s.g.cfg.Sessions.Draw(ctx, s.id, s.viewer, it)
	if err != nil || s.send(ctx, v, enc) != nil {
		return stream.EndGone, false
	}
	return stream.EndNone, true
}

// Records is never signalled: the session's frames come live, records included.
func (s *sessionFollow) Records(context.Context, bool) stream.Ending { return stream.EndNone }

// Cut drains what is queued: cut off (a full queue, or the session stopped), the stream ends and
// the reader resumes; ended for good (the reader's person was removed), it ends with an end frame
// (Finish) and the reader does not resume.
func (s *sessionFollow) Cut(ctx context.Context) stream.Ending {
	for {
		select {
		case it := <-s.sub.Frames():
			if end, _ := s.Live(ctx, it); end != stream.EndNone {
				return end
			}
			continue
		default:
		}
		if s.sub.Ended() != "" {
			return stream.EndFinished
		}
		return stream.EndOverflow
	}
}

func (s *sessionFollow) Beat(ctx context.Context, now time.Time) stream.Ending {
	if s.out.send(ctx, stream.Control(stream.KindHeartbeat, s.id, now, struct{}{}), nil) != nil {
		return stream.EndGone
	}
	return stream.EndNone
}

// Finish sends the end frame of a reader removed for good; a session stream says nothing of its
// other endings.
func (s *sessionFollow) Finish(ctx context.Context, end stream.Ending) {
	if end == stream.EndFinished {
		_ = s.out.send(ctx, stream.Control(KindEnd, s.id, time.Now(), map[string]string{"reason": string(s.sub.Ended())}), nil)
	}
}
