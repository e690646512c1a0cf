package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/harness/resume"
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
	r, err := s.cl.do(ctx, who, http.MethodPost, streamOpenPath(id), body, reqOpts{})
	if err != nil || r.status != http.StatusOK {
		return r, nil, err
	}
	var a openAnswer
	if err := r.json(&a); err != nil {
		return r, nil, err
	}
	if a.Ticket == "" || a.Session != id || a.From != from || a.ExpiresIn <= 0 || a.ExpiresIn > 15 || a.Floor < 1 || a.Head < a.Floor-1 {
		return r, nil, fail(r.op, clip(string(r.body), 300), "200 {ticket, expiresIn (at most 15), session, from, head, floor} with floor >= 1 and head >= floor-1")
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
		sc.err = readSSE(resp.Body, func(ev sseEvent) bool {
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
			case errors.As(err, &ref) && ref.status < 500 && ref.status != http.StatusTooManyRequests:
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
		c.close()
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
	o := dialOpts{transport: f.transport, device: f.device}
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
			return nil, &refusedErr{status: r.status, body: r.body}
		}
		o.ticket = a.Ticket
	} else if from > 0 {
		o.lastEvent = &from
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
		fr, err := c.next(ctx)
		if err != nil {
			var fl *Failure
			if errors.As(err, &fl) {
				f.setErr(err, nil)
				return delivered, true
			}
			return delivered, ctx.Err() != nil
		}
		fr.at = time.Now()
		f.mu.Lock()
		last := f.r.Last
		out, v := f.r.Take(fr.resumeFrame())
		f.raw = append(f.raw, fr)
		f.verdicts = append(f.verdicts, v)
		now := time.Now()
		gap := false
		switch v {
		case resume.Pass:
			if fr.kind() == "heartbeat" {
				f.beats = append(f.beats, now)
				f.mu.Unlock()
				f.wake()
				continue
			}
			f.delivered = append(f.delivered, fr)
			if d := fr.data(); fr.kind() == "reset" && d.Floor != nil {
				f.r.Last = *d.Floor - 1
			}
			if fr.kind() == "end" {
				// The stream ended for good (spec/stream.md): the reader does not resume.
				f.lastFrame = now
				f.mu.Unlock()
				f.wake()
				return delivered, true
			}
		case resume.Drop:
			if asked {
				f.problems = append(f.problems, resume.Problem{What: "repeat", Last: last, First: fr.resumeFrame().First(), Cur: fr.Cur})
			}
		case resume.Gap:
			f.problems = append(f.problems, resume.Problem{What: "gap", Last: last, First: fr.resumeFrame().First(), Cur: fr.Cur})
			gap = true
		default:
			d := fr
			d.Span, d.Data = out.Span, out.Data
			f.delivered = append(f.delivered, d)
			f.foldLocked(d)
			f.view.Take(d.resumeFrame())
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
	d := fr.data()
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
	switch fr.kind() {
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
