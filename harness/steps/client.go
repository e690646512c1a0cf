package steps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/harness/contract"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/world"
)

// Bounds on what a scenario keeps of its exchanges for the report.
const (
	maxExchanges = 300
	maxBodyKept  = 8 << 10
	maxEvents    = 200
)

// client talks to the SUT for one scenario: every exchange is checked against the contract and
// kept (bounded) for the report.
type client struct {
	s  *scenario
	hc *http.Client

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

// SeenViolation is one contract violation and the exchange (or event) that showed it.
type SeenViolation struct {
	Violation contract.Violation
	Exchange  report.Exchange
}

// ContractRequirement is the requirement every exchange is checked against: a violation is one
// finding of the run under it, and fails only the scenarios that judge it.
const ContractRequirement = "ADR0122-D6-01"

// judgesContract reports whether the scenario is one of the contract requirement's own: only
// then does a violation fail it at once.
func (s *scenario) judgesContract() bool { return slices.Contains(s.reqs, ContractRequirement) }

// violated is what a violation does to the step that met it: the failure of a scenario that
// judges the contract, nothing for any other (the run reports it once, as a finding).
func (c *client) violated(vs []contract.Violation) error {
	if len(vs) == 0 || !c.s.judgesContract() {
		return nil
	}
	return contractFailure(vs)
}

// outsideContract is the error of a request the kit was about to send outside the contract: the
// kit's own fault, unless the system broke the contract earlier in the scenario. The request was
// then built from that broken answer (an id it left out, say), and the scenario fails under the
// contract requirement, as its behaviour cannot be judged any further.
func (c *client) outsideContract(op string, v contract.Violation) error {
	c.mu.Lock()
	var earlier *contract.Violation
	if len(c.seen) > 0 {
		earlier = &c.seen[0].Violation
	}
	c.mu.Unlock()
	if earlier == nil {
		return harnessErr("the kit sent a request outside the contract: %s", v)
	}
	return &Failure{Requirement: ContractRequirement, Op: op,
		Got:  "nothing to go on after an earlier answer broke the contract (" + earlier.String() + ")",
		Want: "answers that follow spec/openapi.yaml"}
}

// note keeps vs with the exchange that showed them.
func (c *client) note(vs []contract.Violation, ex report.Exchange) {
	if len(vs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range vs {
		c.seen = append(c.seen, SeenViolation{Violation: v, Exchange: ex})
	}
}

// The kit's client of a system, as the steps use it:
//
//   - scenario.request sends one request as a principal (or a peer person, or nobody) and keeps
//     the answer as the scenario's last; scenario.ask sends one without keeping it;
//   - scenario.poll asks again until a condition holds or the step's wait ends;
//   - client.do is the exchange beneath both: it checks the request and the answer against the
//     contract and records the exchange for the report;
//   - client.openStream follows an event stream (SSE) of a conversation, and the session
//     stream's readers (sessionstream.go; their follower, sessionfollower.go) follow SSE and WebSocket.

// request sends one request to the system as who, starting the system first when it is not
// running, and keeps the answer as the scenario's last (and the one before it as prev). who is
// a principal's name, a peer person's name (sent as that person's token) or "" for a request
// without credentials; a POST with neither a body nor a raw body sends {}.
func (s *scenario) request(who, method, path string, body any, o reqOpts) (*response, error) {
	if err := s.sut(); err != nil {
		return nil, err
	}
	r, err := s.ask(who, method, path, body, o)
	if r != nil {
		s.prev, s.last = s.last, r
	}
	return r, err
}

// caller is the name a request is sent as (a token for the threads people).
func caller(who string) string {
	if _, ok := world.PeerPeople[who]; ok {
		return world.PeerToken(who)
	}
	return who
}

// ask sends one request as request does, without starting the system or keeping the answer.
func (s *scenario) ask(who, method, path string, body any, o reqOpts) (*response, error) {
	if who != "" {
		who = caller(who)
	}
	if method == http.MethodPost && body == nil && o.rawBody == nil {
		body = map[string]any{}
	}
	return s.cl.do(s.ctx, who, method, path, body, o)
}

// poll calls try until it returns true or an error, or until waits step timeouts have passed
// (a step that waits for many model rounds waits more than one); it reports whether try
// returned true. try is called again every 100ms.
func (s *scenario) poll(waits int, try func() (bool, error)) (bool, error) {
	ctx, cancel := s.wait()
	if waits > 1 {
		cancel()
		ctx, cancel = context.WithDeadline(s.ctx, time.Now().Add(time.Duration(waits)*s.run.StepTimeout))
	}
	defer cancel()
	for {
		ok, err := try()
		if err != nil || ok {
			return ok, err
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// response is one answer of the SUT.
type response struct {
	op     string
	status int
	header http.Header
	body   []byte
}

func (r *response) json(v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		return fail(r.op, fmt.Sprintf("a body that is not the expected JSON (%v): %s", err, clip(string(r.body), 200)), "JSON per spec/openapi.yaml")
	}
	return nil
}

// reqOpts tune one request.
type reqOpts struct {
	headers     map[string]string
	rawBody     []byte
	contentType string
	// offSpec marks a request the scenario sends outside the contract on purpose (its request
	// is not validated; its response still is).
	offSpec bool
	// quiet keeps the exchange out of the report (polling).
	quiet bool
	host  string
	// chunked sends the body without a Content-Length (chunked transfer encoding), so the server
	// learns its size only by reading it.
	chunked bool
	// unrouted marks a request to a route the contract does not document on purpose: its
	// response has no documented shape to be validated against (the step checks it itself).
	unrouted bool
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// do sends one request as who (a principal name, "" for none).
func (c *client) do(ctx context.Context, who, method, path string, body any, o reqOpts) (*response, error) {
	var raw []byte
	switch {
	case o.rawBody != nil:
		raw = o.rawBody
	case body != nil:
		b, err := json.Marshal(body)
		if err != nil {
			return nil, harnessErr("encode request: %v", err)
		}
		raw = b
	}
	url := c.s.sutURL() + path
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(raw))
	if err != nil {
		return nil, harnessErr("build request: %v", err)
	}
	if o.chunked && raw != nil {
		req.Body = io.NopCloser(bytes.NewReader(raw))
		req.ContentLength = -1
		req.GetBody = nil
	}
	if raw != nil {
		ct := o.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if who != "" {
		tok, err := c.s.token(who)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range o.headers {
		req.Header.Set(k, v)
	}
	if o.host != "" {
		req.Host = o.host
	}
	op := method + " " + path
	if !o.offSpec {
		if vs := c.s.contract.Request(req.Clone(ctx), raw); len(vs) > 0 {
			return nil, c.outsideContract(op, vs[0])
		}
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		if c.s.ctx.Err() != nil {
			return nil, harnessErr("the run was stopped: %v", c.s.ctx.Err())
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
	r := &response{op: op, status: resp.StatusCode, header: resp.Header, body: b}
	var vs []contract.Violation
	if !o.unrouted {
		vs = c.s.contract.Response(req, raw, resp.StatusCode, resp.Header, b)
	}
	c.record(req, raw, r, nil, vs, time.Since(start), o.quiet)
	return r, c.violated(vs)
}

func contractFailure(vs []contract.Violation) error {
	v := vs[0]
	more := ""
	if len(vs) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(vs)-1)
	}
	return &Failure{Requirement: ContractRequirement, Op: v.Route, Got: "a violation at " + v.Pointer + more, Want: v.Message}
}

func (c *client) record(req *http.Request, reqBody []byte, r *response, events []report.Event, vs []contract.Violation, d time.Duration, quiet bool) {
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
func exchangeOf(req *http.Request, reqBody []byte, r *response, events []report.Event, vs []contract.Violation, d time.Duration) report.Exchange {
	ex := report.Exchange{Method: req.Method, URL: req.URL.RequestURI(), RequestHeaders: req.Header.Clone(),
		RequestBody: clip(string(reqBody), maxBodyKept), DurationMs: d.Milliseconds(), Events: events}
	if r != nil {
		ex.Status, ex.ResponseHeaders, ex.ResponseBody = r.status, r.header.Clone(), clip(string(r.body), maxBodyKept)
	}
	for _, v := range vs {
		ex.Violations = append(ex.Violations, v.String())
	}
	return ex
}

// sseEvent is one server-sent event.
type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// stream is an open event stream.
type stream struct {
	c      *client
	op     string
	status int
	header http.Header
	body   []byte // of a non-200 answer

	cancel context.CancelFunc
	mu     sync.Mutex
	evs    []sseEvent
	ended  bool
	endErr error
	notify chan struct{}
	viol   []contract.Violation
	req    *http.Request
	start  time.Time
	// endedAt is when the server ended the stream (zero while it is open).
	endedAt time.Time
}

// openStream opens GET path as an event stream. A non-200 answer is returned with its body.
func (c *client) openStream(ctx context.Context, who, path string, headers map[string]string) (*stream, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.s.sutURL()+path, nil)
	if err != nil {
		cancel()
		return nil, harnessErr("build request: %v", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if who != "" {
		tok, err := c.s.token(who)
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
	if vs := c.s.contract.Request(req.Clone(sctx), nil); len(vs) > 0 {
		cancel()
		return nil, c.outsideContract(op, vs[0])
	}
	st := &stream{c: c, op: op, cancel: cancel, notify: make(chan struct{}, 1), req: req, start: time.Now()}
	hc := &http.Client{Transport: c.s.streamTr} // no overall timeout for a stream
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, fail(op, "no answer ("+err.Error()+")", "an HTTP answer")
	}
	st.status, st.header = resp.StatusCode, resp.Header
	vs := c.s.contract.Response(req, nil, resp.StatusCode, resp.Header, nil)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		st.body = b
		vs = c.s.contract.Response(req, nil, resp.StatusCode, resp.Header, b)
		c.record(req, nil, &response{op: op, status: resp.StatusCode, header: resp.Header, body: b}, nil, vs, time.Since(st.start), false)
		st.ended = true
		return st, c.violated(vs)
	}
	st.viol = vs
	c.note(vs, exchangeOf(req, nil, &response{op: op, status: resp.StatusCode, header: resp.Header}, nil, vs, 0))
	c.s.addStream(st)
	go st.read(resp.Body)
	return st, c.violated(vs)
}

// readSSE parses server-sent events from r as the HTML standard's event-stream interpretation
// does, and hands each to fn until fn returns false or r ends; it returns the read error, if
// any. Lines end with CRLF, LF or CR; bytes that are not UTF-8 read as U+FFFD; a leading BOM is
// dropped; an event without a data line is not dispatched, as a browser would not dispatch it;
// an id holding NUL is ignored. ID is the event's own id field ("" without one).
func readSSE(r io.Reader, fn func(sseEvent) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	sc.Split(scanSSELines)
	var cur sseEvent
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
			cur, data = sseEvent{}, nil
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

func (st *stream) read(body io.ReadCloser) {
	defer body.Close()
	err := readSSE(body, func(ev sseEvent) bool { st.add(ev); return true })
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

func (st *stream) add(ev sseEvent) {
	vs := st.c.s.contract.Event(ev.Event, []byte(ev.Data))
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
		ex := exchangeOf(st.req, nil, &response{op: st.op, status: st.status, header: st.header},
			[]report.Event{{ID: ev.ID, Type: ev.Event, Data: clip(ev.Data, 2048)}}, vs, time.Since(st.start))
		st.c.note(vs, ex)
		if st.c.s.judgesContract() {
			st.c.s.asyncFailure(&Failure{Requirement: ContractRequirement, Op: st.op + " (event " + ev.Event + ")", Got: "a violation at " + vs[0].Pointer, Want: vs[0].Message})
		}
	}
	st.wake()
}

func (st *stream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// close ends the stream from the client side.
func (st *stream) close() { st.cancel() }

// snapshot returns the events so far and whether the stream ended.
func (st *stream) snapshot() ([]sseEvent, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]sseEvent(nil), st.evs...), st.ended
}

// waitFor waits until pred holds on the events so far, or the stream ends, or ctx ends.
func (st *stream) waitFor(ctx context.Context, what string, pred func([]sseEvent, bool) bool) ([]sseEvent, error) {
	for {
		evs, ended := st.snapshot()
		if pred(evs, ended) {
			return evs, nil
		}
		if ended {
			return evs, fail(st.op, fmt.Sprintf("the stream ended after %d events (%s)", len(evs), summarize(evs)), what)
		}
		select {
		case <-st.notify:
		case <-ctx.Done():
			return evs, fail(st.op, fmt.Sprintf("%d events after waiting %s (%s)", len(evs), time.Since(st.start).Round(time.Millisecond), summarize(evs)), what)
		}
	}
}

func summarize(evs []sseEvent) string {
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

func (c *client) recordStream(st *stream) {
	evs, _ := st.snapshot()
	kept := make([]report.Event, 0, min(len(evs), maxEvents))
	for i, e := range evs {
		if i >= maxEvents {
			break
		}
		kept = append(kept, report.Event{ID: e.ID, Type: e.Event, Data: clip(e.Data, 2048)})
	}
	c.record(st.req, nil, &response{op: st.op, status: st.status, header: st.header}, kept, st.viol, time.Since(st.start), false)
}
