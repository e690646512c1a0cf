package steps

import (
	"bytes"
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
	"github.com/loomcheck/loomcheck/harness/sutclient"
)

// The kit's client of the session stream (spec/stream.md, spec/http.md "The session stream"):
// an open (POST .../stream/open) that returns a ticket, a WebSocket or SSE connection that
// serves frames, and a follower that reads them through resume.Reader across reconnects.

// The transports a session stream is served on.
const (
	overWebSocket = "WebSocket"
	overSSE       = "SSE"
)

// sframe is one frame as the kit read it: the members it judges, and the frame's raw JSON.
type sframe struct {
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
	raw     []byte
	at      time.Time // when the kit received it
}

func (f sframe) kind() string { return strings.TrimPrefix(f.Type, "session.") }

func (f sframe) resumeFrame() resume.Frame {
	return resume.Frame{Cur: f.Cur, Span: f.Span, Type: f.Type, Message: f.Message, Data: f.Data}
}

// frameData is what the kit reads of a frame's data.
type frameData struct {
	Text    *string  `json:"text"`
	Parts   []string `json:"parts"`
	State   string   `json:"state"`
	Status  string   `json:"status"`
	Message string   `json:"message"`
	Floor   *int64   `json:"floor"`
	Head    *int64   `json:"head"`
}

func (f sframe) data() frameData {
	var d frameData
	_ = json.Unmarshal(f.Data, &d)
	return d
}

// parseFrame reads one frame's JSON; a frame that is not a JSON object with a cursor and a
// type is the system's fault.
func parseFrame(op string, b []byte) (sframe, error) {
	var f sframe
	if err := json.Unmarshal(b, &f); err != nil || f.Type == "" {
		return sframe{}, fail(op, "a frame that is not a frame object: "+clip(string(b), 200), "a frame per spec/stream.md")
	}
	f.raw = append([]byte(nil), b...)
	return f, nil
}

// openAnswer is the answer to POST /sessions/{id}/stream/open.
type openAnswer struct {
	Ticket    string `json:"ticket"`
	ExpiresIn int64  `json:"expiresIn"`
	Session   string `json:"session"`
	From      int64  `json:"from"`
	Head      int64  `json:"head"`
	Floor     int64  `json:"floor"`
}

func streamOpenPath(id string) string { return "/sessions/" + url.PathEscape(id) + "/stream/open" }
func streamPath(id string) string     { return "/sessions/" + url.PathEscape(id) + "/stream" }

// openSession asks for a ticket for who to read session id after from, on device (none when
// empty). It returns the answer as it came (any status) and, for a 200, the decoded answer.
func (s *scenario) openSession(ctx context.Context, who, id string, from int64, device string) (*response, *openAnswer, error) {
	body := map[string]any{"from": from}
	if device != "" {
		body["device"] = device
	}
	r, err := s.cl.Do(ctx, who, http.MethodPost, streamOpenPath(id), body, reqOpts{})
	if err != nil || r.Status != http.StatusOK {
		return r, nil, err
	}
	var a openAnswer
	if err := r.JSON(&a); err != nil {
		return r, nil, err
	}
	if a.Ticket == "" || a.Session != id || a.From != from || a.ExpiresIn <= 0 || a.ExpiresIn > 15 || a.Floor < 1 || a.Head < a.Floor-1 {
		return r, nil, fail(r.Op, clip(string(r.Body), 300), "200 {ticket, expiresIn (at most 15), session, from, head, floor} with floor >= 1 and head >= floor-1")
	}
	return r, &a, nil
}

// conn is one connection of a session stream: frames come on next until it ends.
type conn interface {
	// next is the next frame; io.EOF (or a network error) when the connection ended.
	next(ctx context.Context) (sframe, error)
	close()
}

// dialOpts say how one connection is made.
type dialOpts struct {
	transport string
	ticket    string // "" for SSE without a ticket
	device    string
	lastEvent *int64 // Last-Event-ID, when set (SSE)
}

// refusedErr is a connection the system refused with an HTTP answer.
type refusedErr struct {
	status int
	body   []byte
}

func (e *refusedErr) Error() string {
	return fmt.Sprintf("refused: %d %s", e.status, clip(string(e.body), 200))
}

// dialSession connects who to session id's stream. A refusal is a *refusedErr; a network
// failure is returned as it is (the follower retries it); a kit fault is a HarnessError.
func (s *scenario) dialSession(ctx context.Context, who, id string, o dialOpts) (conn, error) {
	q := url.Values{}
	if o.ticket != "" {
		q.Set("ticket", o.ticket)
	}
	if o.device != "" {
		q.Set("device", o.device)
	}
	path := streamPath(id)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	h := http.Header{}
	if who != "" {
		tok, err := s.token(who)
		if err != nil {
			return nil, err
		}
		h.Set("Authorization", "Bearer "+tok)
	}
	op := "GET " + streamPath(id) + " (" + o.transport + ")"
	if o.transport == overWebSocket {
		u := "ws" + strings.TrimPrefix(s.sutURL(), "http") + path
		c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h, HTTPClient: &http.Client{Transport: s.streamTr}})
		if err != nil {
			if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
				var b []byte
				if resp.Body != nil {
					b, _ = io.ReadAll(resp.Body)
				}
				return nil, &refusedErr{status: resp.StatusCode, body: b}
			}
			return nil, err
		}
		c.SetReadLimit(16 << 20)
		return &wsConn{c: c, op: op}, nil
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, s.sutURL()+path, nil)
	if err != nil {
		cancel()
		return nil, harnessErr("build request: %v", err)
	}
	req.Header = h
	req.Header.Set("Accept", "text/event-stream")
	if o.lastEvent != nil {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(*o.lastEvent, 10))
	}
	resp, err := (&http.Client{Transport: s.streamTr}).Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		return nil, &refusedErr{status: resp.StatusCode, body: b}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		cancel()
		return nil, fail(op, "Content-Type "+ct, "text/event-stream")
	}
	sc := &sseConn{op: op, cancel: cancel, events: make(chan sseEvent, 64), done: make(chan struct{})}
	go func() {
		defer close(sc.done)
		defer resp.Body.Close()
		sc.err = sutclient.ReadSSE(resp.Body, func(ev sseEvent) bool {
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

func (w *wsConn) next(ctx context.Context) (sframe, error) {
	typ, b, err := w.c.Read(ctx)
	if err != nil {
		return sframe{}, err
	}
	if typ != websocket.MessageText {
		return sframe{}, fail(w.op, "a binary message", "one text message per frame")
	}
	return parseFrame(w.op, b)
}

func (w *wsConn) close() { _ = w.c.CloseNow() }

type sseConn struct {
	op     string
	cancel context.CancelFunc
	events chan sseEvent
	done   chan struct{}
	err    error
}

func (c *sseConn) next(ctx context.Context) (sframe, error) {
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
			return sframe{}, c.err
		}
		return sframe{}, io.EOF
	case <-ctx.Done():
		return sframe{}, ctx.Err()
	}
}

// frame reads one event's frame: a logged frame's event carries its cursor as the id, a
// control frame's none, and no event is named.
func (c *sseConn) frame(ev sseEvent) (sframe, error) {
	f, err := parseFrame(c.op, []byte(ev.Data))
	if err != nil {
		return f, err
	}
	want := ""
	if f.Cur > 0 {
		want = strconv.FormatInt(f.Cur, 10)
	}
	if ev.ID != want || ev.Event != "message" {
		return sframe{}, fail(c.op, fmt.Sprintf("event %q with id %q for a frame at cursor %d", ev.Event, ev.ID, f.Cur), fmt.Sprintf("an unnamed event with id %q", want))
	}
	return f, nil
}

func (c *sseConn) close() { c.cancel() }

// frameRow is one frame as a feature's table shows it.
func frameRow(f sframe) []string {
	d := f.data()
	span := ""
	if f.Span > 0 {
		span = strconv.Itoa(f.Span)
	}
	text := ""
	switch f.kind() {
	case "text-delta", "user-message", "text-done":
		if d.Parts != nil {
			q := make([]string, len(d.Parts))
			for i, p := range d.Parts {
				q[i] = strconv.Quote(p)
			}
			text = strings.Join(q, " + ")
		} else if d.Text != nil {
			text = strconv.Quote(*d.Text)
		}
		if f.kind() == "user-message" && d.State != "" && d.State != "sent" {
			text = strings.TrimSpace(d.State + " " + text)
		}
	case "status":
		text = d.State
	case "reset":
		if d.Floor != nil && d.Head != nil {
			text = fmt.Sprintf("floor %d, head %d", *d.Floor, *d.Head)
		}
	case "hidden":
		if d.Parts != nil {
			text = fmt.Sprintf("%d empty parts", len(d.Parts))
		} else if !bytes.Equal(bytes.TrimSpace(f.Data), []byte("{}")) && len(f.Data) > 0 {
			text = "data " + string(f.Data)
		}
	}
	cur := strconv.FormatInt(f.Cur, 10)
	return []string{cur, span, f.kind(), f.Message, text}
}

func describeFrames(fs []sframe) string {
	if len(fs) == 0 {
		return "no frame"
	}
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(strings.Join(frameRow(f), " "))
	}
	return clip(b.String(), 1500)
}
