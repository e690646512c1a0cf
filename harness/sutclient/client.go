// Package sutclient is the kit's client of a system under test: HTTP requests and event streams
// (SSE), each exchange checked against spec/openapi.yaml and kept, bounded, for the report, and
// connections to a session stream over SSE or WebSocket. A scenario makes one Client (New) and
// sends through it:
//
//	c := sutclient.New(sutclient.Config{URL: url, Token: token, Contract: v, Context: ctx, ...})
//	r, err := c.Do(ctx, "alice", http.MethodGet, "/conversations/c1", nil, sutclient.Opts{})
//	st, err := c.OpenStream(ctx, "alice", "/conversations/c1/events", nil)
//	evs, err := st.WaitFor(ctx, "a turn.completed event", pred)
//	cn, err := c.DialSession(ctx, "alice", "s1", sutclient.DialOpts{Transport: sutclient.OverWebSocket, Ticket: tk})
//	f, err := cn.Next(ctx)
//
// An error is a *verdict.Failure when the system broke a rule (no answer, a body cut short, a
// contract violation in a scenario that judges the contract) and a *verdict.HarnessError when the
// kit did (a request it could not build, or sent outside the contract).
package sutclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/harness/contract"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/verdict"
)

// Bounds on what a scenario keeps of its exchanges for the report.
const (
	maxExchanges = 300
	maxBodyKept  = 8 << 10
	maxEvents    = 200
)

// Config is what a Client needs of the scenario it serves.
type Config struct {
	// URL is where the system answers now (it may change when the system restarts).
	URL func() string
	// Token is the bearer token a request sent as who carries.
	Token func(who string) (string, error)
	// Contract judges every request, answer and event.
	Contract *contract.Validator
	// Context is the scenario's: a request that fails once it ended is a harness error (the run
	// was stopped), not the system's failure.
	Context context.Context
	// HTTP sends the requests; StreamTransport carries the event streams (no overall timeout).
	HTTP            *http.Client
	StreamTransport http.RoundTripper
	// JudgesContract reports whether a contract violation fails the step that met it at once
	// (the scenario judges the contract requirement); otherwise it is only kept, a finding.
	JudgesContract func() bool
	// AsyncFailure receives a failure an open stream met off the step's path (an event outside
	// the contract, in a scenario that judges it).
	AsyncFailure func(error)
	// Opened receives every stream that opened, to be closed when the scenario ends.
	Opened func(*Stream)
}

// Client talks to the SUT for one scenario: every exchange is checked against the contract and
// kept (bounded) for the report. It is safe for concurrent use.
type Client struct {
	cfg Config

	mu         sync.Mutex
	exchanges  []report.Exchange
	dropped    int
	validated  int
	events     int
	violations []string
	// seen holds each contract violation with the exchange that showed it, for the run's
	// contract findings and the scenario's notes.
	seen []SeenViolation
}

// New is a client for the scenario cfg describes.
func New(cfg Config) *Client { return &Client{cfg: cfg} }

// Observed is what a client saw: the exchanges kept for the report, how many exchanges and events
// it validated against the contract, how many violations, and each violation with the exchange
// that showed it.
type Observed struct {
	Exchanges  []report.Exchange
	Validated  int
	Events     int
	Violations int
	Seen       []SeenViolation
}

// Observed is what c saw so far.
func (c *Client) Observed() Observed {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Observed{Exchanges: append([]report.Exchange(nil), c.exchanges...), Validated: c.validated, Events: c.events,
		Violations: len(c.violations), Seen: append([]SeenViolation(nil), c.seen...)}
}

// SeenViolation is one contract violation and the exchange (or event) that showed it.
type SeenViolation struct {
	Violation contract.Violation
	Exchange  report.Exchange
}

// ContractRequirement is the requirement every exchange is checked against: a violation is one
// finding of the run under it, and fails only the scenarios that judge it.
const ContractRequirement = "ADR0122-D6-01"

// violated is what a violation does to the step that met it: the failure of a scenario that
// judges the contract, nothing for any other (the run reports it once, as a finding).
func (c *Client) violated(vs []contract.Violation) error {
	if len(vs) == 0 || !c.cfg.JudgesContract() {
		return nil
	}
	return contractFailure(vs)
}

// outsideContract is the error of a request the kit was about to send outside the contract: the
// kit's own fault, unless the system broke the contract earlier in the scenario. The request was
// then built from that broken answer (an id it left out, say), and the scenario fails under the
// contract requirement, as its behaviour cannot be judged any further.
func (c *Client) outsideContract(op string, v contract.Violation) error {
	c.mu.Lock()
	var earlier *contract.Violation
	if len(c.seen) > 0 {
		earlier = &c.seen[0].Violation
	}
	c.mu.Unlock()
	if earlier == nil {
		return verdict.Harness("the kit sent a request outside the contract: %s", v)
	}
	return &verdict.Failure{Requirement: ContractRequirement, Op: op,
		Got:  "nothing to go on after an earlier answer broke the contract (" + earlier.String() + ")",
		Want: "answers that follow spec/openapi.yaml"}
}

// note keeps vs with the exchange that showed them.
func (c *Client) note(vs []contract.Violation, ex report.Exchange) {
	if len(vs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range vs {
		c.seen = append(c.seen, SeenViolation{Violation: v, Exchange: ex})
	}
}

// Response is one answer of the SUT.
type Response struct {
	// Op names the exchange: the method and the path ("GET /conversations/c1").
	Op     string
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v; a body that is not that JSON is the system's failure.
func (r *Response) JSON(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fail(r.Op, fmt.Sprintf("a body that is not the expected JSON (%v): %s", err, Clip(string(r.Body), 200)), "JSON per spec/openapi.yaml")
	}
	return nil
}

// Opts tune one request.
type Opts struct {
	// Headers are set on the request; RawBody is sent as it is instead of the JSON of the body,
	// with ContentType (default application/json).
	Headers     map[string]string
	RawBody     []byte
	ContentType string
	// OffSpec marks a request the scenario sends outside the contract on purpose (its request
	// is not validated; its response still is).
	OffSpec bool
	// Quiet keeps the exchange out of the report (polling).
	Quiet bool
	// Host replaces the request's Host header.
	Host string
	// Chunked sends the body without a Content-Length (chunked transfer encoding), so the server
	// learns its size only by reading it.
	Chunked bool
	// Unrouted marks a request to a route the contract does not document on purpose: its
	// response has no documented shape to be validated against (the step checks it itself).
	Unrouted bool
	// Base, when set, is where the request goes instead of the system's URL (Config.URL): one
	// node of several, at its own address ("http://host:port").
	Base string
}

// Clip is s cut to n bytes, "..." marking a cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Do sends one request as who (a principal name, "" for none).
func (c *Client) Do(ctx context.Context, who, method, path string, body any, o Opts) (*Response, error) {
	var raw []byte
	switch {
	case o.RawBody != nil:
		raw = o.RawBody
	case body != nil:
		b, err := json.Marshal(body)
		if err != nil {
			return nil, verdict.Harness("encode request: %v", err)
		}
		raw = b
	}
	base := o.Base
	if base == "" {
		base = c.cfg.URL()
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(raw))
	if err != nil {
		return nil, verdict.Harness("build request: %v", err)
	}
	if o.Chunked && raw != nil {
		req.Body = io.NopCloser(bytes.NewReader(raw))
		req.ContentLength = -1
		req.GetBody = nil
	}
	if raw != nil {
		ct := o.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if who != "" {
		tok, err := c.cfg.Token(who)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range o.Headers {
		req.Header.Set(k, v)
	}
	if o.Host != "" {
		req.Host = o.Host
	}
	op := method + " " + path
	if !o.OffSpec {
		if vs := c.cfg.Contract.Request(req.Clone(ctx), raw); len(vs) > 0 {
			return nil, c.outsideContract(op, vs[0])
		}
	}
	start := time.Now()
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		if c.cfg.Context.Err() != nil {
			return nil, verdict.Harness("the run was stopped: %v", c.cfg.Context.Err())
		}
		if ctx.Err() != nil {
			return nil, fail(op, "no answer", "an HTTP answer")
		}
		return nil, fail(op, "no answer ("+err.Error()+")", "an HTTP answer")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fail(op, "a body cut short ("+err.Error()+")", "a whole body")
	}
	r := &Response{Op: op, Status: resp.StatusCode, Header: resp.Header, Body: b}
	var vs []contract.Violation
	if !o.Unrouted {
		vs = c.cfg.Contract.Response(req, raw, resp.StatusCode, resp.Header, b)
	}
	c.record(req, raw, r, nil, vs, time.Since(start), o.Quiet)
	return r, c.violated(vs)
}

func contractFailure(vs []contract.Violation) error {
	v := vs[0]
	more := ""
	if len(vs) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(vs)-1)
	}
	return &verdict.Failure{Requirement: ContractRequirement, Op: v.Route, Got: "a violation at " + v.Pointer + more, Want: v.Message}
}

func (c *Client) record(req *http.Request, reqBody []byte, r *Response, events []report.Event, vs []contract.Violation, d time.Duration, quiet bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.validated++
	for _, v := range vs {
		c.violations = append(c.violations, v.String())
	}
	ex := exchangeOf(req, reqBody, r, events, vs, d)
	if !quiet || len(vs) > 0 {
		if len(c.exchanges) >= maxExchanges {
			c.dropped++
		} else {
			c.exchanges = append(c.exchanges, ex)
		}
	}
	if events == nil { // an open stream's violations (events non-nil) were noted as they came
		for _, v := range vs {
			c.seen = append(c.seen, SeenViolation{Violation: v, Exchange: ex})
		}
	}
}

// exchangeOf is the report's account of one exchange.
func exchangeOf(req *http.Request, reqBody []byte, r *Response, events []report.Event, vs []contract.Violation, d time.Duration) report.Exchange {
	ex := report.Exchange{Method: req.Method, URL: req.URL.RequestURI(), RequestHeaders: req.Header.Clone(),
		RequestBody: Clip(string(reqBody), maxBodyKept), DurationMs: d.Milliseconds(), Events: events}
	if r != nil {
		ex.Status, ex.ResponseHeaders, ex.ResponseBody = r.Status, r.Header.Clone(), Clip(string(r.Body), maxBodyKept)
	}
	for _, v := range vs {
		ex.Violations = append(ex.Violations, v.String())
	}
	return ex
}

// Event is one server-sent event.
type Event struct {
	ID    string
	Event string
	Data  string
}

// Stream is an open event stream.
type Stream struct {
	c *Client
	// Op, Status and Header are the stream's answer; Body is the body of an answer other than 200
	// (the stream then ended at once).
	Op     string
	Status int
	Header http.Header
	Body   []byte

	cancel context.CancelFunc
	mu     sync.Mutex
	evs    []Event
	ended  bool
	endErr error
	notify chan struct{}
	viol   []contract.Violation
	req    *http.Request
	start  time.Time
	// endedAt is when the server ended the stream (zero while it is open).
	endedAt time.Time
}

// OpenStream opens GET path as an event stream. A non-200 answer is returned with its body.
func (c *Client) OpenStream(ctx context.Context, who, path string, headers map[string]string) (*Stream, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.cfg.URL()+path, nil)
	if err != nil {
		cancel()
		return nil, verdict.Harness("build request: %v", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if who != "" {
		tok, err := c.cfg.Token(who)
		if err != nil {
			cancel()
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	op := "GET " + path
	if vs := c.cfg.Contract.Request(req.Clone(sctx), nil); len(vs) > 0 {
		cancel()
		return nil, c.outsideContract(op, vs[0])
	}
	st := &Stream{c: c, Op: op, cancel: cancel, notify: make(chan struct{}, 1), req: req, start: time.Now()}
	hc := &http.Client{Transport: c.cfg.StreamTransport} // no overall timeout for a stream
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, fail(op, "no answer ("+err.Error()+")", "an HTTP answer")
	}
	st.Status, st.Header = resp.StatusCode, resp.Header
	vs := c.cfg.Contract.Response(req, nil, resp.StatusCode, resp.Header, nil)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		st.Body = b
		vs = c.cfg.Contract.Response(req, nil, resp.StatusCode, resp.Header, b)
		c.record(req, nil, &Response{Op: op, Status: resp.StatusCode, Header: resp.Header, Body: b}, nil, vs, time.Since(st.start), false)
		st.ended = true
		return st, c.violated(vs)
	}
	st.viol = vs
	c.note(vs, exchangeOf(req, nil, &Response{Op: op, Status: resp.StatusCode, Header: resp.Header}, nil, vs, 0))
	c.cfg.Opened(st)
	go st.read(resp.Body)
	return st, c.violated(vs)
}

// ReadSSE parses server-sent events from r as the HTML standard's event-stream interpretation
// does, and hands each to fn until fn returns false or r ends; it returns the read error, if
// any. Lines end with CRLF, LF or CR; bytes that are not UTF-8 read as U+FFFD; a leading BOM is
// dropped; an event without a data line is not dispatched, as a browser would not dispatch it;
// an id holding NUL is ignored. ID is the event's own id field ("" without one).
func ReadSSE(r io.Reader, fn func(Event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	sc.Split(scanSSELines)
	var cur Event
	var data []string
	first := true
	for sc.Scan() {
		line := strings.ToValidUTF8(sc.Text(), "\uFFFD")
		if first {
			line, first = strings.TrimPrefix(line, "\uFEFF"), false
		}
		if line == "" {
			if data != nil {
				cur.Data = strings.Join(data, "\n")
				if cur.Event == "" {
					cur.Event = "message"
				}
				if !fn(cur) {
					return nil
				}
			}
			cur, data = Event{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.Event = value
		case "data":
			data = append(data, value)
		case "id":
			if !strings.Contains(value, "\x00") {
				cur.ID = value
			}
		}
	}
	return sc.Err()
}

// scanSSELines is a bufio.SplitFunc for event-stream lines: each ends with CRLF, LF or a lone
// CR. An unterminated last line is dropped, as the standard discards it.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF {
			return len(data), nil, nil
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a CR at the end of what was read: an LF may follow
}

func (st *Stream) read(body io.ReadCloser) {
	defer body.Close()
	err := ReadSSE(body, func(ev Event) bool { st.add(ev); return true })
	st.mu.Lock()
	st.ended = true
	st.endedAt = time.Now()
	if err != nil && !errors.Is(err, context.Canceled) {
		st.endErr = err
	}
	st.mu.Unlock()
	st.wake()
	st.c.recordStream(st)
}

func (st *Stream) add(ev Event) {
	vs := st.c.cfg.Contract.Event(ev.Event, []byte(ev.Data))
	st.mu.Lock()
	st.evs = append(st.evs, ev)
	st.viol = append(st.viol, vs...)
	st.mu.Unlock()
	st.c.mu.Lock()
	st.c.events++
	for _, v := range vs {
		st.c.violations = append(st.c.violations, v.String())
	}
	st.c.mu.Unlock()
	if len(vs) > 0 {
		ex := exchangeOf(st.req, nil, &Response{Op: st.Op, Status: st.Status, Header: st.Header},
			[]report.Event{{ID: ev.ID, Type: ev.Event, Data: Clip(ev.Data, 2048)}}, vs, time.Since(st.start))
		st.c.note(vs, ex)
		if st.c.cfg.JudgesContract() {
			st.c.cfg.AsyncFailure(&verdict.Failure{Requirement: ContractRequirement, Op: st.Op + " (event " + ev.Event + ")", Got: "a violation at " + vs[0].Pointer, Want: vs[0].Message})
		}
	}
	st.wake()
}

func (st *Stream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// Lived is how long the stream was open until the server ended it (from the moment it was
// opened).
func (st *Stream) Lived() time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.endedAt.Sub(st.start)
}

// Close ends the stream from the client side.
func (st *Stream) Close() { st.cancel() }

// Snapshot returns the events so far and whether the stream ended.
func (st *Stream) Snapshot() ([]Event, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]Event(nil), st.evs...), st.ended
}

// WaitFor waits until pred holds on the events so far, or the stream ends, or ctx ends.
func (st *Stream) WaitFor(ctx context.Context, what string, pred func([]Event, bool) bool) ([]Event, error) {
	for {
		evs, ended := st.Snapshot()
		if pred(evs, ended) {
			return evs, nil
		}
		if ended {
			return evs, fail(st.Op, fmt.Sprintf("the stream ended after %d events (%s)", len(evs), Summarize(evs)), what)
		}
		select {
		case <-st.notify:
		case <-ctx.Done():
			return evs, fail(st.Op, fmt.Sprintf("%d events after waiting %s (%s)", len(evs), time.Since(st.start).Round(time.Millisecond), Summarize(evs)), what)
		}
	}
}

// Summarize names the types of the first events of evs, for a failure's message.
func Summarize(evs []Event) string {
	var parts []string
	for i, e := range evs {
		if i >= 12 {
			parts = append(parts, fmt.Sprintf("+%d more", len(evs)-i))
			break
		}
		parts = append(parts, e.Event)
	}
	return strings.Join(parts, ", ")
}

func (c *Client) recordStream(st *Stream) {
	evs, _ := st.Snapshot()
	kept := make([]report.Event, 0, min(len(evs), maxEvents))
	for i, e := range evs {
		if i >= maxEvents {
			break
		}
		kept = append(kept, report.Event{ID: e.ID, Type: e.Event, Data: Clip(e.Data, 2048)})
	}
	c.record(st.req, nil, &Response{Op: st.Op, Status: st.Status, Header: st.Header}, kept, st.viol, time.Since(st.start), false)
}

// fail is the system's failure at op: what it got, what was wanted.
func fail(op, got, want string) error { return &verdict.Failure{Op: op, Got: got, Want: want} }
