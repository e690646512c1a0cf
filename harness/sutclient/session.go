package sutclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/harness/resume"
	"github.com/loomcheck/loomcheck/harness/verdict"
)

// The session stream (spec/stream.md, spec/http.md "The session stream"): a connection made with
// a ticket that serves frames, over WebSocket or SSE.

// The transports a session stream is served on.
const (
	OverWebSocket = "WebSocket"
	OverSSE       = "SSE"
)

// SessionStreamPath is the path of session id's stream.
func SessionStreamPath(id string) string { return "/sessions/" + url.PathEscape(id) + "/stream" }

// Frame is one frame as the kit read it: the members it judges, and the frame's raw JSON.
type Frame struct {
	V       *int            `json:"v"`
	ID      string          `json:"id"`
	Cur     int64           `json:"cur"`
	Session string          `json:"session"`
	Turn    int64           `json:"turn"`
	Type    string          `json:"type"`
	Time    string          `json:"time"`
	Span    int             `json:"span"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Raw     []byte
	At      time.Time // when the kit received it
}

// Kind is the frame's type without its "session." prefix.
func (f Frame) Kind() string { return strings.TrimPrefix(f.Type, "session.") }

// ResumeFrame is the frame as the resume check (harness/resume) reads it.
func (f Frame) ResumeFrame() resume.Frame {
	return resume.Frame{Cur: f.Cur, Span: f.Span, Type: f.Type, Message: f.Message, Data: f.Data}
}

// FrameData is what the kit reads of a frame's data.
type FrameData struct {
	Text    *string  `json:"text"`
	Parts   []string `json:"parts"`
	State   string   `json:"state"`
	Status  string   `json:"status"`
	Message string   `json:"message"`
	Floor   *int64   `json:"floor"`
	Head    *int64   `json:"head"`
}

// Payload is what the kit reads of the frame's data (empty where it is not that JSON).
func (f Frame) Payload() FrameData {
	var d FrameData
	_ = json.Unmarshal(f.Data, &d)
	return d
}

// ParseFrame reads one frame's JSON; a frame that is not a JSON object with a cursor and a
// type is the system's fault.
func ParseFrame(op string, b []byte) (Frame, error) {
	var f Frame
	if err := json.Unmarshal(b, &f); err != nil || f.Type == "" {
		return Frame{}, fail(op, "a frame that is not a frame object: "+Clip(string(b), 200), "a frame per spec/stream.md")
	}
	f.Raw = append([]byte(nil), b...)
	return f, nil
}

// Conn is one connection of a session stream: frames come on Next until it ends.
type Conn interface {
	// Next is the next frame; io.EOF (or a network error) when the connection ended.
	Next(ctx context.Context) (Frame, error)
	Close()
}

// DialOpts say how one connection is made.
type DialOpts struct {
	Transport string
	Ticket    string // "" for SSE without a ticket
	Device    string
	LastEvent *int64 // Last-Event-ID, when set (SSE)
}

// RefusedError is a connection the system refused with an HTTP answer.
type RefusedError struct {
	Status int
	Body   []byte
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refused: %d %s", e.Status, Clip(string(e.Body), 200))
}

// DialSession connects who to session id's stream. A refusal is a *RefusedError; a network
// failure is returned as it is (a reader may retry it); a kit fault is a *verdict.HarnessError.
func (c *Client) DialSession(ctx context.Context, who, id string, o DialOpts) (Conn, error) {
	q := url.Values{}
	if o.Ticket != "" {
		q.Set("ticket", o.Ticket)
	}
	if o.Device != "" {
		q.Set("device", o.Device)
	}
	path := SessionStreamPath(id)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	h := http.Header{}
	if who != "" {
		tok, err := c.cfg.Token(who)
		if err != nil {
			return nil, err
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	op := "GET " + SessionStreamPath(id) + " (" + o.Transport + ")"
	if o.Transport == OverWebSocket {
		u := "ws" + strings.TrimPrefix(c.cfg.URL(), "http") + path
		ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h, HTTPClient: &http.Client{Transport: c.cfg.StreamTransport}})
		if err != nil {
			if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
				var b []byte
				if resp.Body != nil {
					b, _ = io.ReadAll(resp.Body)
				}
				return nil, &RefusedError{Status: resp.StatusCode, Body: b}
			}
			return nil, err
		}
		ws.SetReadLimit(16 << 20)
		return &wsConn{c: ws, op: op}, nil
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.cfg.URL()+path, nil)
	if err != nil {
		cancel()
		return nil, verdict.Harness("build request: %v", err)
	}
	req.Header = h
	req.Header.Set("Accept", "text/event-stream")
	if o.LastEvent != nil {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*o.LastEvent, 10))
	}
	resp, err := (&http.Client{Transport: c.cfg.StreamTransport}).Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		return nil, &RefusedError{Status: resp.StatusCode, Body: b}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		cancel()
		return nil, fail(op, "Content-Type "+ct, "text/event-stream")
	}
	sc := &sseConn{op: op, cancel: cancel, events: make(chan Event, 64), done: make(chan struct{})}
	go func() {
		defer close(sc.done)
		defer resp.Body.Close()
		sc.err = ReadSSE(resp.Body, func(ev Event) bool {
			select {
			case sc.events <- ev:
				return true
			case <-sctx.Done():
				return false
			}
		})
	}()
	return sc, nil
}

type wsConn struct {
	c  *websocket.Conn
	op string
}

func (w *wsConn) Next(ctx context.Context) (Frame, error) {
	typ, b, err := w.c.Read(ctx)
	if err != nil {
		return Frame{}, err
	}
	if typ != websocket.MessageText {
		return Frame{}, fail(w.op, "a binary message", "one text message per frame")
	}
	return ParseFrame(w.op, b)
}

func (w *wsConn) Close() { _ = w.c.CloseNow() }

type sseConn struct {
	op     string
	cancel context.CancelFunc
	events chan Event
	done   chan struct{}
	err    error
}

func (c *sseConn) Next(ctx context.Context) (Frame, error) {
	select {
	case ev := <-c.events:
		return c.frame(ev)
	case <-c.done:
		select {
		case ev := <-c.events: // handed on before the reader stopped
			return c.frame(ev)
		default:
		}
		if c.err != nil {
			return Frame{}, c.err
		}
		return Frame{}, io.EOF
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}

// frame reads one event's frame: a logged frame's event carries its cursor as the id, a
// control frame's none, and no event is named.
func (c *sseConn) frame(ev Event) (Frame, error) {
	f, err := ParseFrame(c.op, []byte(ev.Data))
	if err != nil {
		return f, err
	}
	want := ""
	if f.Cur > 0 {
		want = strconv.FormatInt(f.Cur, 10)
	}
	if ev.ID != want || ev.Event != "message" {
		return Frame{}, fail(c.op, fmt.Sprintf("event %q with id %q for a frame at cursor %d", ev.Event, ev.ID, f.Cur), fmt.Sprintf("an unnamed event with id %q", want))
	}
	return f, nil
}

func (c *sseConn) Close() { c.cancel() }
