package steps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
)

// identityHolds holds the identity service's answer for who's token until released.
func (s *edgeSteps) identityHolds(who string) error {
	h := s.world.NewHold()
	s.world.Identity().HoldFor(tokenOf(who), h)
	s.identityHold = h
	return nil
}

// goesAwayWhileIdentityAsked sends the request as who and hangs up while the identity service is held.
func (s *edgeSteps) goesAwayWhileIdentityAsked(who, what string) error {
	if s.identityHold == nil {
		return harnessErr("this step needs the identity service to hold its answer")
	}
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	if err := s.sut(); err != nil {
		return err
	}
	u, _ := url.Parse(s.sutURL())
	var d net.Dialer
	ctx, cancel := s.wait()
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return fail(what, "no connection: "+err.Error(), "a connection")
	}
	rq := goneRequests[what]
	req := fmt.Sprintf("%s %s%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", rq.method, p, rq.suffix, u.Host, tokenOf(who))
	if rq.method == "POST" {
		req += "Content-Length: 0\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		conn.Close()
		return harnessErr("write the request: %v", err)
	}
	rctx, rcancel := context.WithTimeout(ctx, edgeAtOnce)
	defer rcancel()
	if err := s.identityHold.WaitReached(rctx); err != nil {
		conn.Close()
		// Asking is the world's way to catch the system mid-request, not the rule judged.
		return &HarnessError{Err: fmt.Errorf("%w: the system did not ask the identity service within %s, so the kit cannot go away mid-request", ErrNotApplicable, edgeAtOnce)}
	}
	conn.Close()
	// A system that notices the client is gone gives up its lookup; one that does not is
	// answered once the hold is released, to nobody. Neither may report an internal error.
	wctx, wcancel := context.WithTimeout(s.ctx, edgeAtOnce)
	defer wcancel()
	_ = s.world.Identity().WaitAbandoned(wctx, 1)
	s.identityHold.Release()
	return nil
}

// errorHookGotOnlyThatID expects the error hook to have got the last answer's error id and no other report.
func (s *edgeSteps) errorHookGotOnlyThatID() error {
	id := s.saved["errorId"]
	ctx, cancel := s.wait()
	defer cancel()
	if err := s.world.ErrorHook().WaitErrors(ctx, 1); err != nil {
		return fail("the error hook", "no report", "a report of the 500 "+id)
	}
	// The sentinel: a second deliberate 500 for bob, made after the first was answered. A system
	// delivers its reports in the order it made them (spec/world.md), so once the second report
	// has arrived, every report made before it has arrived too.
	r, err := s.cl.Do(s.ctx, "bob", http.MethodGet, "/conversations/the-end-marker", nil, reqOpts{})
	if err != nil {
		return err
	}
	var body struct {
		Error   string `json:"error"`
		ErrorID string `json:"errorId"`
	}
	if r.Status != http.StatusInternalServerError || json.Unmarshal(r.Body, &body) != nil || body.Error != "internal" || body.ErrorID == "" || body.ErrorID == id {
		return fail(r.Op+" (bob again, the end marker)", fmt.Sprintf("%d %s", r.Status, clip(string(r.Body), 200)), `500 {"error":"internal","errorId":...} with an error id of its own`)
	}
	end := body.ErrorID
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !slices.ContainsFunc(s.world.ErrorHook().Errors(), func(r world.ErrorReport) bool { return r.ErrorID == end }) {
		select {
		case <-ctx.Done():
			return fail("the error hook", fmt.Sprintf("%d reports, none of the end marker's 500 %s", len(s.world.ErrorHook().Errors()), end), "a report of the end marker's 500 "+end)
		case <-tick.C:
		}
	}
	var ids []string
	for _, r := range s.world.ErrorHook().Errors() {
		ids = append(ids, r.ErrorID+" ("+clip(r.Error, 80)+")")
	}
	if len(ids) != 2 || !strings.HasPrefix(ids[0], id+" ") || !strings.HasPrefix(ids[1], end+" ") {
		return fail("the error hook", fmt.Sprintf("%d reports: %s", len(ids), strings.Join(ids, ", ")), "exactly the report of the 500 "+id+", then the end marker's "+end)
	}
	return nil
}

// sendsHalfABodyAndStalls sends a turn's headers and half its body as who, then stalls.
func (s *edgeSteps) sendsHalfABodyAndStalls(who string) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	e := s.edgeState()
	e.began = time.Now()
	conn, host, err := s.edgeDial()
	if err != nil {
		var he *HarnessError
		if errors.As(err, &he) {
			return err
		}
		return fail("POST "+p+"/turns", "no connection: "+err.Error(), "a connection")
	}
	body := `{"text":"words that never arrive in full"}`
	auth := ""
	if who != "someone without credentials" {
		auth = "Authorization: Bearer " + tokenOf(who) + "\r\n"
	}
	req := fmt.Sprintf("POST %s/turns HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		p, host, auth, len(body), body[:len(body)/2])
	if _, err := conn.Write([]byte(req)); err != nil {
		return harnessErr("write the stalled request: %v", err)
	}
	e.stalled, e.stalledBR, e.stalledOp = conn, bufio.NewReader(conn), "POST "+p+"/turns (half a body, then nothing)"
	d, err := s.gatewayMs(s.cfg.Gateway.RequestTimeoutMs, "gateway.requestTimeoutMs")
	e.deadline = d
	return err
}

// stalledRequestAnswered expects the stalled request's status and error code, before or after the request deadline.
func (s *edgeSteps) stalledRequestAnswered(code int, errCode, when string) error {
	e := s.edgeState()
	if e.stalled == nil {
		return harnessErr("no request is stalled")
	}
	limit := e.began.Add(e.deadline + edgeSlack)
	_ = e.stalled.SetReadDeadline(limit)
	resp, err := http.ReadResponse(e.stalledBR, nil)
	at := time.Since(e.began)
	want := fmt.Sprintf("%d %q %s the request deadline of %s", code, errCode, when, e.deadline)
	if err != nil {
		if closedErr(err) {
			return fail(e.stalledOp, fmt.Sprintf("the connection closed without an answer after %s", at.Round(time.Millisecond)), want)
		}
		return fail(e.stalledOp, fmt.Sprintf("no answer within %s", (e.deadline+edgeSlack).Round(time.Millisecond)), want)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	s.last = &response{Op: e.stalledOp, Status: resp.StatusCode, Header: resp.Header, Body: b}
	var eb struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &eb)
	if resp.StatusCode != code || eb.Error != errCode {
		return fail(e.stalledOp, fmt.Sprintf("%d %s", resp.StatusCode, clip(string(b), 200)), want)
	}
	switch {
	case when == "no sooner than" && at < e.deadline:
		return fail(e.stalledOp, fmt.Sprintf("answered after %s", at.Round(time.Millisecond)), want)
	case when == "before" && at >= e.deadline:
		return fail(e.stalledOp, fmt.Sprintf("answered after %s", at.Round(time.Millisecond)), want)
	}
	return nil
}

// stalledClosedWithin expects the stalled connection closed within N seconds of the request deadline.
func (s *edgeSteps) stalledClosedWithin(n int) error {
	e := s.edgeState()
	if e.stalled == nil {
		return harnessErr("no request is stalled")
	}
	limit := e.deadline + time.Duration(n)*time.Second
	_ = e.stalled.SetReadDeadline(e.began.Add(limit))
	_, err := io.Copy(io.Discard, e.stalledBR)
	if err == nil || closedErr(err) { // EOF, or a reset
		return nil
	}
	return fail(e.stalledOp, fmt.Sprintf("the connection still open %s after the request began", limit),
		fmt.Sprintf("closed within %ds of the request deadline (%s)", n, e.deadline))
}

// sendsPartOfHeaders opens a connection, sends part of a request's headers and stalls.
func (s *edgeSteps) sendsPartOfHeaders() error {
	e := s.edgeState()
	e.began = time.Now()
	conn, host, err := s.edgeDial()
	if err != nil {
		var he *HarnessError
		if errors.As(err, &he) {
			return err
		}
		return fail("POST /conversations", "no connection: "+err.Error(), "a connection")
	}
	if _, err := conn.Write([]byte("POST /conversations HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: appl")); err != nil {
		return harnessErr("write the stalled headers: %v", err)
	}
	req, hdr := s.cfg.Gateway.RequestTimeoutMs, s.cfg.Gateway.HeadersTimeoutMs
	e.stalled, e.stalledBR, e.stalledOp = conn, bufio.NewReader(conn), "POST /conversations (part of the headers, then nothing)"
	h, err := s.gatewayMs(hdr, "gateway.headersTimeoutMs")
	if err != nil {
		return err
	}
	r, err := s.gatewayMs(req, "gateway.requestTimeoutMs")
	e.deadline = min(h, r)
	return err
}

// stalledHeadersClosed expects the stalled connection closed, unanswered or with 408, between the header deadline and N seconds after it.
func (s *edgeSteps) stalledHeadersClosed(n int) error {
	e := s.edgeState()
	if e.stalled == nil {
		return harnessErr("no request is stalled")
	}
	want := fmt.Sprintf("the connection closed (unanswered, or after a 408) between %s and %s", e.deadline, e.deadline+time.Duration(n)*time.Second)
	_ = e.stalled.SetReadDeadline(e.began.Add(e.deadline + time.Duration(n)*time.Second))
	got, err := io.ReadAll(io.LimitReader(e.stalledBR, 64<<10))
	at := time.Since(e.began)
	if err != nil && !closedErr(err) {
		return fail(e.stalledOp, fmt.Sprintf("the connection still open after %s", at.Round(time.Millisecond)), want)
	}
	if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 408 ")) && !bytes.HasPrefix(got, []byte("HTTP/1.0 408 ")) {
		return fail(e.stalledOp, fmt.Sprintf("answered %q", clip(string(got), 80)), want)
	}
	if at < e.deadline {
		return fail(e.stalledOp, fmt.Sprintf("closed after %s", at.Round(time.Millisecond)), want)
	}
	return nil
}

// sendsInTwoHalves sends the text as who in a body written in two halves, the given milliseconds apart.
func (s *edgeSteps) sendsInTwoHalves(who, text string, gap int) error {
	p, _, err := s.convPath("")
	if err != nil {
		return err
	}
	conn, host, err := s.edgeDial()
	if err != nil {
		var he *HarnessError
		if errors.As(err, &he) {
			return err
		}
		return fail("POST "+p+"/turns", "no connection: "+err.Error(), "a connection")
	}
	b, _ := json.Marshal(map[string]string{"text": unescape(text), "messageId": s.nextMessageID()})
	head := fmt.Sprintf("POST %s/turns HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		p, host, tokenOf(who), len(b))
	if _, err := conn.Write(append([]byte(head), b[:len(b)/2]...)); err != nil {
		return harnessErr("write the first half: %v", err)
	}
	time.Sleep(time.Duration(gap) * time.Millisecond)
	if _, err := conn.Write(b[len(b)/2:]); err != nil {
		return fail("POST "+p+"/turns", "the connection closed before the second half: "+err.Error(), "the whole body read")
	}
	_ = conn.SetReadDeadline(s.stepDeadline())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	op := "POST " + p + "/turns (in two halves)"
	if err != nil {
		return fail(op, "no answer: "+err.Error(), "an answer")
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	s.last = &response{Op: op, Status: resp.StatusCode, Header: resp.Header, Body: body}
	return nil
}

// twiceRequestDeadline waits twice the configured request deadline.
func (s *edgeSteps) twiceRequestDeadline() error {
	if s.cfg.Gateway.RequestTimeoutMs <= 0 {
		return harnessErr("this step needs the setting gateway.requestTimeoutMs")
	}
	if err := s.edgeApplicable(); err != nil {
		return err
	}
	time.Sleep(2 * time.Duration(s.cfg.Gateway.RequestTimeoutMs) * time.Millisecond)
	return nil
}

// holdsMoreConnections opens N more connections, each answered and held open.
func (s *edgeSteps) holdsMoreConnections(n int) error {
	if l, ok := s.drv.(settingLimits); ok {
		if err := l.unhonoured("gateway.maxConnections"); err != nil {
			return err
		}
	}
	// The kit's own idle connections would take slots the scenario counts.
	s.transport.CloseIdleConnections()
	e := s.edgeState()
	for i := range n {
		conn, err := s.holdAnswered(fmt.Sprintf("connection %d of %d held open (maxConnections %d)", i+1, n, s.cfg.Gateway.MaxConnections))
		if err != nil {
			return err
		}
		e.held = append(e.held, conn)
	}
	return nil
}

// newConnectionHeld opens a new connection, expects it answered and holds it.
func (s *edgeSteps) newConnectionHeld() error {
	s.transport.CloseIdleConnections()
	conn, err := s.holdAnswered(fmt.Sprintf("a new connection once a slot is free (maxConnections %d)", s.cfg.Gateway.MaxConnections))
	if err != nil {
		return err
	}
	e := s.edgeState()
	e.held = append(e.held, conn)
	return nil
}

// oneMoreRefused expects one more connection to be refused at once.
func (s *edgeSteps) oneMoreRefused() error {
	op := fmt.Sprintf("GET /.well-known/loom on a connection over the cap (maxConnections %d)", s.cfg.Gateway.MaxConnections)
	conn, host, err := s.edgeDial()
	if err != nil {
		var he *HarnessError
		if errors.As(err, &he) {
			return err
		}
		return nil // refused before it was accepted
	}
	defer conn.Close()
	status, why := answeredOn(conn, host, edgeAtOnce)
	switch {
	case status != 0:
		return fail(op, fmt.Sprintf("answered %d", status), "the connection closed at once, unanswered")
	case why == "silent":
		return fail(op, fmt.Sprintf("neither answered nor closed within %s", edgeAtOnce), "the connection closed at once, unanswered")
	}
	return nil
}

// edgeSlack is how long after a deadline the kit still accepts the system's reaction to it (the
// machine may be busy); edgeAtOnce is how long "at once" may take.
const (
	edgeSlack  = 2 * time.Second
	edgeAtOnce = 2 * time.Second
)

// edgeState is what the connection-edge steps of one scenario keep: the stalled connection,
// when its request began, and the connections a client holds open.
type edgeState struct {
	stalled   net.Conn
	stalledBR *bufio.Reader
	stalledOp string
	began     time.Time
	// deadline is the setting the stalled request is judged against.
	deadline time.Duration
	held     []net.Conn
}

// edgeDial makes sure the system runs, and serves its own connections, then opens a raw
// connection to it. An in-process instance that does not serve itself (harness.Server) cannot
// be judged on its connection limits: the kit's own server would be judged instead.
func (s *scenario) edgeDial() (net.Conn, string, error) {
	if err := s.edgeApplicable(); err != nil {
		return nil, "", err
	}
	u, _ := url.Parse(s.sutURL())
	var d net.Dialer
	ctx, cancel := s.wait()
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, u.Host, err
	}
	s.addCloser(conn)
	return conn, u.Host, nil
}

// edgeApplicable makes sure the system runs and serves its own connections.
func (s *scenario) edgeApplicable() error {
	if err := s.sut(); err != nil {
		return err
	}
	if d, ok := s.drv.(*inProcess); ok && !d.selfServed {
		return &HarnessError{Err: fmt.Errorf("%w: the instance does not serve its own connections (harness.Server), so its connection limits cannot be observed", ErrNotApplicable)}
	}
	return nil
}

func (s *edgeSteps) edgeState() *edgeState {
	if s.edge == nil {
		s.edge = &edgeState{}
	}
	return s.edge
}

// gatewayMs reads a millisecond setting of the gateway: the configured value v, else the default
// the configuration schema writes for the setting at path.
func (s *scenario) gatewayMs(v int64, path string) (time.Duration, error) {
	if v <= 0 {
		d, err := settingDefaultInt(path)
		v = d
		if err != nil {
			return 0, err
		}
	}
	return time.Duration(v) * time.Millisecond, nil
}

// closedErr says whether a read error means the peer closed the connection (EOF, reset).
func closedErr(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// discoveryRequest is a complete keep-alive request for the discovery document.
func discoveryRequest(host string) []byte {
	return []byte("GET /.well-known/loom HTTP/1.1\r\nHost: " + host + "\r\n\r\n")
}

// answeredOn sends the discovery request on conn and reads the answer whole. It returns the
// status, or 0 and the reason when the connection closed first ("closed") or nothing came
// within wait ("silent").
func answeredOn(conn net.Conn, host string, wait time.Duration) (int, string) {
	_ = conn.SetDeadline(time.Now().Add(wait))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write(discoveryRequest(host)); err != nil {
		return 0, "closed"
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if closedErr(err) {
			return 0, "closed"
		}
		return 0, "silent"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, ""
}

// holdAnswered opens a connection that is answered, retrying for a short while: a slot another
// connection just gave up may not be free yet. A connection that is still refused then is the
// system's fault.
func (s *scenario) holdAnswered(what string) (net.Conn, error) {
	until := time.Now().Add(edgeAtOnce + time.Second)
	for {
		conn, host, err := s.edgeDial()
		if err != nil {
			var he *HarnessError
			if errors.As(err, &he) {
				return nil, err
			}
			return nil, fail(what, "no connection: "+err.Error(), "a connection that is answered")
		}
		status, why := answeredOn(conn, host, edgeAtOnce)
		if status != 0 {
			return conn, nil
		}
		conn.Close()
		if time.Now().After(until) {
			return nil, fail(what, "the connection "+why+" without an answer", "answered: the cap is not reached")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// goneRequests are the requests a client makes and then goes away from, by what it does.
var goneRequests = map[string]struct{ method, suffix string }{
	"reads the status":        {"GET", ""},
	"reads the history":       {"GET", "/history"},
	"opens the event stream":  {"GET", "/events"},
	"reads the participants":  {"GET", "/participants"},
	"closes the conversation": {"POST", "/close"},
}

// gatewayEdgeVocabulary lists the steps of features/gateway/edge.feature.
func gatewayEdgeVocabulary(a areas) []stepDef {
	return []stepDef{
		{`^the identity service holds its answer for (\w+)'s token$`, a.edge.identityHolds, "holds the identity service's answer for who's token until released"},
		{`^(\w[\w' ]*?) (reads the status|reads the history|opens the event stream|reads the participants|closes the conversation) and goes away while the identity service is asked$`, a.edge.goesAwayWhileIdentityAsked, "sends the request as who and hangs up while the identity service is held"},
		{`^the error hook got that error id and no other report$`, a.edge.errorHookGotOnlyThatID, "expects the error hook to have got the last answer's error id and no other report"},
		{`^(someone without credentials|\w[\w' ]*?) sends the headers of a turn and half its body, then stalls$`, a.edge.sendsHalfABodyAndStalls, "sends a turn's headers and half its body as who, then stalls"},
		{`^the stalled request is answered (\d+) with error "([^"]*)", (no sooner than|before) the request deadline$`, a.edge.stalledRequestAnswered, "expects the stalled request's status and error code, before or after the request deadline"},
		{`^the stalled connection is closed within (\d+) seconds of the request deadline$`, a.edge.stalledClosedWithin, "expects the stalled connection closed within N seconds of the request deadline"},
		{`^a client sends part of a request's headers and stalls$`, a.edge.sendsPartOfHeaders, "opens a connection, sends part of a request's headers and stalls"},
		{`^the stalled connection is closed, unanswered or answered 408, no sooner than the header deadline and within (\d+) seconds of it$`, a.edge.stalledHeadersClosed, "expects the stalled connection closed, unanswered or with 408, between the header deadline and N seconds after it"},
		{`^(\w[\w' ]*?) sends "((?:[^"\\]|\\.)*)" in two halves, (\d+) ms apart$`, a.edge.sendsInTwoHalves, "sends the text as who in a body written in two halves, the given milliseconds apart"},
		{`^twice the request deadline passes$`, a.edge.twiceRequestDeadline, "waits twice the configured request deadline"},
		{`^a client holds (\d+) more connections?, each answered$`, a.edge.holdsMoreConnections, "opens N more connections, each answered and held open"},
		{`^a new connection is answered and held$`, a.edge.newConnectionHeld, "opens a new connection, expects it answered and holds it"},
		{`^one more connection is refused at once$`, a.edge.oneMoreRefused, "expects one more connection to be refused at once"},
	}
}
