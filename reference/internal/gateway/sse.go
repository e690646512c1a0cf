package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
)

// The transports of the streams are encoders over typed events: sse writes a conversation's
// events (stream.ConvEvent) and session frames (sseFrames), wsSender writes session frames as
// WebSocket messages.

// sse writes server-sent events. Every data line is one line of JSON: a user's words can never
// forge an SSE field, whatever newlines they hold. Event names, ids and comments are checked
// too, so what a reader parses back is always exactly what was sent.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE answers 200 with the headers of an event stream.
func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// retry asks browsers to reconnect after a second rather than their default three.
func (s *sse) retry() error {
	_, err := s.w.Write([]byte("retry: 1000\n\n"))
	return err
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

// writeEvents writes a conversation's events without flushing them (a keep-alive is a comment,
// flushed at once).
func (s *sse) writeEvents(evs []stream.ConvEvent) error {
	for _, ev := range evs {
		var err error
		if ev.Kind == stream.ConvKeepAlive {
			err = s.comment("keep-alive")
		} else {
			err = s.write(ev.Kind.String(), ev.ID, ev.Data())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sendEvents writes a conversation's events, each flushed to the client at once.
func (s *sse) sendEvents(evs []stream.ConvEvent) error {
	for _, ev := range evs {
		if err := s.writeEvents([]stream.ConvEvent{ev}); err != nil {
			return err
		}
		if err := s.rc.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// frameSender writes session frames to one transport. enc is f encoded as JSON when the caller
// has it (a live frame encoded once for all its readers), nil otherwise.
type frameSender interface {
	send(ctx context.Context, f stream.Frame, enc []byte) error
}

// encodeFrame is enc, or f encoded when enc is nil.
func encodeFrame(f stream.Frame, enc []byte) ([]byte, error) {
	if enc != nil {
		return enc, nil
	}
	return json.Marshal(f)
}

// wsWriteTimeout bounds one WebSocket write: a client that takes no more for that long has its
// connection closed.
const wsWriteTimeout = 10 * time.Second

// wsSender writes frames as WebSocket messages. One timer per connection bounds each write
// (rather than a context with a deadline per write): when it fires, the connection is closed and
// the write fails. stop releases it. A write is not handed the stream's context either, which
// would register a watch on it per write: the connection is closed as soon as that context ends
// (the reader the stream runs, websocket.Conn.CloseRead, closes it), and that fails the write.
type wsSender struct {
	c     *websocket.Conn
	guard *time.Timer
}

func newWSSender(c *websocket.Conn) *wsSender {
	t := time.AfterFunc(time.Hour, func() { c.CloseNow() })
	t.Stop()
	return &wsSender{c: c, guard: t}
}

func (s *wsSender) send(ctx context.Context, f stream.Frame, enc []byte) error {
	b, err := encodeFrame(f, enc)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.guard.Reset(wsWriteTimeout)
	defer s.guard.Stop()
	return s.c.Write(context.Background(), websocket.MessageText, b)
}

func (s *wsSender) stop() { s.guard.Stop() }

type sseFrames struct{ s *sse }

func (s sseFrames) send(_ context.Context, f stream.Frame, enc []byte) error {
	b, err := encodeFrame(f, enc)
	if err != nil {
		return err
	}
	var buf []byte
	if f.Cur > 0 {
		buf = append(buf, "id: "...)
		buf = strconv.AppendInt(buf, f.Cur, 10)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := s.s.w.Write(buf); err != nil {
		return err
	}
	return s.s.rc.Flush()
}
