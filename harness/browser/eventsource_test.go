// Package browser checks what only a real browser can: that a browser's own EventSource
// resumes a conversation's event stream across a server crash without losing or repeating a
// durable message, that a page's resumable session stream client (streamclient.js) does the same
// over the WebSocket, and that report.html renders, filters and stays inert in chromium.
//
// The tests drive Debian's chromium through playwright-core from the node scripts beside them;
// they skip when chromium or node_modules is missing (see README.md).
package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// streamPage follows /conversations/{id}/events of the server named in its query string with
// EventSource (credentials included: the token travels in the loom_token cookie) and keeps, in
// window.log, every event and every open and failure of the connection, in order.
const streamPage = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><link rel="icon" href="data:,"><title>loom event stream</title></head>
<body>
<script>
(function () {
  'use strict';
  var q = new URLSearchParams(location.search);
  var url = q.get('server') + '/conversations/' + encodeURIComponent(q.get('id')) + '/events';
  window.log = [];
  window.opens = 0;
  window.failures = 0;
  var es = new EventSource(url, { withCredentials: true });
  window.stream = es;
  es.addEventListener('open', function () {
    window.opens++;
    window.log.push({ kind: 'open' });
  });
  ['status', 'partial', 'message', 'delta', 'reset', 'closed', 'reconnect', 'error'].forEach(function (type) {
    es.addEventListener(type, function (e) {
      // An event the server names "error" is a MessageEvent; a failure of the connection
      // itself is a plain Event on the same listener.
      if (!(e instanceof MessageEvent)) {
        window.failures++;
        window.log.push({ kind: 'failure', readyState: es.readyState });
        return;
      }
      window.log.push({ kind: 'event', type: e.type, lastEventId: e.lastEventId, data: e.data });
    });
  });
  window.countOf = function (type) {
    return window.log.filter(function (e) { return e.kind === 'event' && e.type === type; }).length;
  };
  window.summary = function () {
    return { opens: window.opens, failures: window.failures, readyState: es.readyState,
      log: window.log.map(function (e) { return e.kind === 'event' ? e.type + ' ' + e.lastEventId : '(' + e.kind + ')'; }) };
  };
})();
</script>
</body>
</html>
`

// streamLog is one line of the page's window.log.
type streamLog struct {
	Kind        string `json:"kind"` // "open", "failure" or "event"
	Type        string `json:"type"`
	LastEventID string `json:"lastEventId"`
	Data        string `json:"data"`
	ReadyState  int    `json:"readyState"`
}

type streamResult struct {
	pageRecord
	Log        []streamLog `json:"log"`
	Opens      int         `json:"opens"`
	Failures   int         `json:"failures"`
	ReadyState int         `json:"readyState"`
}

// entry is the part of a transcript entry the test looks at.
type entry struct {
	Cursor string  `json:"cursor"`
	Ord    int64   `json:"ord"`
	Turn   int64   `json:"turn"`
	Role   string  `json:"role"`
	Status string  `json:"status"`
	Text   *string `json:"text"`
}

func (e entry) text() string {
	if e.Text == nil {
		return "<none>"
	}
	return *e.Text
}

// TestEventSourceResume follows a conversation in chromium with the browser's own EventSource
// while the server is SIGKILLed in the middle of a streamed reply and restarted on the same data
// directory, behind the same address (the test's relay). The browser reconnects by itself with Last-Event-ID; every durable message
// must reach the page exactly once, in order, with the history's cursors as event ids.
func TestEventSourceResume(t *testing.T) {
	requireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	lap := func(what string) { t.Logf("%6.2fs %s", time.Since(began).Seconds(), what) }

	bin := buildLoomcheck(t, ctx)
	lap("built loomcheck")

	w := world.New(world.Options{})
	if _, err := w.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })

	pages := servePages(t, map[string]page{"/": htmlPage(streamPage)}, nil)

	const token, chosenID = "tok-alice", "browser-resume"
	cfgPath := serverConfig(t, w, token, pages.URL)

	// The browser knows the relay's address; the server behind it gets a new port at each start.
	front := newRelay(t)
	serverURL := front.url()
	srv := newServer(t, bin, cfgPath)
	srv.start(ctx)
	front.point(srv.addr)
	lap("server serving")
	client := &api{base: serverURL, token: token, hc: &http.Client{Timeout: 15 * time.Second}}
	var discovery map[string]any
	if _, err := client.do(ctx, http.MethodGet, "/.well-known/loom", nil, &discovery); err != nil {
		t.Fatal(err)
	}
	// A chosen id is scoped to its chooser: the conversation's id is the one the answer names.
	var started struct {
		ID string `json:"id"`
	}
	if code, err := client.do(ctx, http.MethodPost, "/conversations", map[string]string{"id": chosenID}, &started); err != nil || code != http.StatusCreated || started.ID == "" {
		t.Fatalf("POST /conversations: %d %v %q", code, err, started.ID)
	}
	convID := started.ID

	// The first turn's reply streams two chunks and stops at the hold; the crash cuts it there.
	// After the restart the turn is produced again and its second run stops at the same hold.
	hold := w.NewHold()
	const firstText, rerunText, secondText = "Let me check the pumps.", "Checking again after the restart.", "All pumps are fine."
	if err := w.Model().EnqueueFor("first question",
		world.Reply{Chunks: []string{"Let me ", "check "}, Hold: hold, After: []string{"the pumps."}},
		world.Reply{Chunks: []string{"Checking ", "again "}, Hold: hold, After: []string{"after the restart."}},
	); err != nil {
		t.Fatal(err)
	}
	if err := w.Model().EnqueueFor("second question", world.Reply{Chunks: []string{"All ", "pumps ", "are ", "fine."}}); err != nil {
		t.Fatal(err)
	}

	eventsURL := serverURL + "/conversations/" + convID + "/events"
	pageURL := pages.URL + "/?" + url.Values{"server": {serverURL}, "id": {convID}}.Encode()
	node := startNode(t, "eventsource.mjs", "--page", pageURL, "--cookie-url", serverURL, "--token", token)
	if m := node.next(ctx); string(m["ready"]) != "true" {
		t.Fatalf("eventsource.mjs: want the ready line first, got %v", m)
	}
	node.waitFor(ctx, "the stream to open", `window.opens >= 1 && countOf("status") >= 1`, 20*time.Second)
	lap("page streaming")

	if _, err := client.do(ctx, http.MethodPost, "/conversations/"+convID+"/turns",
		map[string]string{"text": "first question", "messageId": "m-1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := hold.WaitReached(ctx); err != nil {
		t.Fatal(err)
	}
	node.waitFor(ctx, "a delta of the first reply", `countOf("message") >= 1 && countOf("delta") >= 1`, 20*time.Second)
	lap("page saw a delta; killing the server")

	srv.kill()
	killedAt := time.Now()
	if err := w.Model().WaitAborted(ctx, 0); err != nil {
		t.Fatalf("the killed server's model request should have been cut: %v", err)
	}
	srv.start(ctx)
	front.point(srv.addr)
	lap("server restarted")
	if err := w.Model().WaitRequests(ctx, 2); err != nil {
		t.Fatalf("the turn in flight should be produced again after the restart: %v", err)
	}
	node.waitFor(ctx, "the browser to reconnect and see the turn start again",
		`window.opens >= 2 && countOf("reset") >= 1`, 30*time.Second)
	reconnected := time.Since(killedAt)
	lap(fmt.Sprintf("browser reconnected by itself %.2fs after the kill", reconnected.Seconds()))

	hold.Release()
	node.waitFor(ctx, "the first reply's message", `countOf("message") >= 2`, 20*time.Second)
	if _, err := client.do(ctx, http.MethodPost, "/conversations/"+convID+"/turns",
		map[string]string{"text": "second question", "messageId": "m-2"}, nil); err != nil {
		t.Fatal(err)
	}
	node.waitFor(ctx, "the second reply's message", `countOf("message") >= 4`, 20*time.Second)
	lap("page has both turns")

	node.send(map[string]string{"op": "finish"})
	var res streamResult
	node.result(ctx, &res)
	lap("browser closed")

	var page struct {
		Entries []json.RawMessage `json:"entries"`
		Done    bool              `json:"done"`
	}
	if _, err := client.do(ctx, http.MethodGet, "/conversations/"+convID+"/history?limit=50", nil, &page); err != nil {
		t.Fatal(err)
	}
	stopCtx, stopCancel := context.WithTimeout(ctx, 15*time.Second)
	defer stopCancel()
	if err := srv.stop(stopCtx); err != nil {
		t.Errorf("stopping the server: %v", err)
	}

	// Every durable message arrived once, in order, carrying its cursor as the event id.
	var msgs []entry
	var ids []string
	for _, l := range res.Log {
		if l.Kind != "event" || l.Type != "message" {
			continue
		}
		var e entry
		if err := json.Unmarshal([]byte(l.Data), &e); err != nil {
			t.Fatalf("message event data %q: %v", l.Data, err)
		}
		msgs = append(msgs, e)
		ids = append(ids, l.LastEventID)
	}
	var ords []int64
	for i, e := range msgs {
		ords = append(ords, e.Ord)
		if ids[i] != e.Cursor {
			t.Errorf("message ord %d: lastEventId %q, want its cursor %q", e.Ord, ids[i], e.Cursor)
		}
	}
	if want := []int64{1, 2, 3, 4}; !slices.Equal(ords, want) {
		t.Errorf("message ords: got %v, want %v (each durable message exactly once, in order)", ords, want)
	}
	if dup := duplicates(ids); len(dup) > 0 {
		t.Errorf("message event ids delivered more than once: %v", dup)
	}
	want := []struct{ role, status, text string }{
		{"user", "accepted", "first question"},
		{"assistant", "complete", rerunText},
		{"user", "accepted", "second question"},
		{"assistant", "complete", secondText},
	}
	for i, e := range msgs {
		if i < len(want) && (e.Role != want[i].role || e.Status != want[i].status || e.text() != want[i].text) {
			t.Errorf("message ord %d: got %s/%s %q, want %s/%s %q", e.Ord, e.Role, e.Status, e.text(), want[i].role, want[i].status, want[i].text)
		}
		if e.text() == firstText {
			t.Errorf("message ord %d holds the reply of the run the crash cut off", e.Ord)
		}
	}

	// The events' ids are the history's cursors, and the events carry the history's entries.
	if !page.Done || len(page.Entries) != len(msgs) {
		t.Errorf("history: %d entries (done=%v), the page saw %d messages", len(page.Entries), page.Done, len(msgs))
	}
	for i, raw := range page.Entries {
		var h entry
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		if i >= len(msgs) {
			break
		}
		if ids[i] != h.Cursor {
			t.Errorf("history entry %d: cursor %q, the page's event id %q", i, h.Cursor, ids[i])
		}
		if !sameJSON(raw, messageData(res.Log, i)) {
			t.Errorf("history entry %d differs from the message event:\nhistory %s\nevent   %s", i, raw, messageData(res.Log, i))
		}
	}

	// The connection really broke and the browser reopened it itself: open, failure, open, and
	// the second open came after the page had seen the first reply stream.
	firstOpen, firstFailure, secondOpen, firstDelta := -1, -1, -1, -1
	for i, l := range res.Log {
		switch {
		case l.Kind == "open" && firstOpen < 0:
			firstOpen = i
		case l.Kind == "open" && secondOpen < 0 && firstFailure >= 0:
			secondOpen = i
		case l.Kind == "failure" && firstFailure < 0:
			firstFailure = i
		case l.Kind == "event" && l.Type == "delta" && firstDelta < 0:
			firstDelta = i
		}
	}
	if res.Opens < 2 || res.Failures < 1 || firstOpen < 0 || firstFailure < 0 || secondOpen < 0 ||
		!(firstOpen < firstDelta && firstDelta < firstFailure && firstFailure < secondOpen) {
		t.Errorf("want open, delta, failure, open in that order; got opens=%d failures=%d at %d, %d, %d, %d",
			res.Opens, res.Failures, firstOpen, firstDelta, firstFailure, secondOpen)
	}
	for i, l := range res.Log {
		if l.Kind == "failure" && l.ReadyState != 0 {
			t.Errorf("log %d: after a failure the EventSource is in readyState %d, want 0 (reconnecting)", i, l.ReadyState)
		}
	}
	sawReset := false
	for _, l := range res.Log[max(secondOpen, 0):] {
		if l.Kind == "event" && l.Type == "reset" && strings.Contains(l.Data, `"turn":1`) {
			sawReset = true
		}
	}
	if !sawReset {
		t.Errorf("after reconnecting the page should see a reset of turn 1")
	}

	// The answered stream requests: the first without Last-Event-ID, the reconnection with the
	// cursor of the last durable message the page had (the user's first turn); the cookie on
	// both. Attempts that found the port closed (a restart slower than the browser's retry
	// delay) are retried by the browser and never reach the server, so they do not count.
	var streams []pageRequest
	attempts := 0
	for _, r := range res.Requests {
		if strings.HasPrefix(r.URL, eventsURL) {
			attempts++
			if r.Status != 0 {
				streams = append(streams, r)
			}
		}
	}
	if len(streams) != 2 {
		t.Errorf("want 2 answered requests for the event stream, got %d: %+v", len(streams), streams)
	} else {
		if streams[0].LastEventID != nil {
			t.Errorf("the first stream request sent Last-Event-ID %q", *streams[0].LastEventID)
		}
		if len(ids) > 0 && (streams[1].LastEventID == nil || *streams[1].LastEventID != ids[0]) {
			t.Errorf("the reconnection sent Last-Event-ID %v, want %q", deref(streams[1].LastEventID), ids[0])
		}
	}
	for i, r := range streams {
		if r.Status != http.StatusOK {
			t.Errorf("stream request %d: status %d", i, r.Status)
		}
		if r.HeadersKnown && !slices.Contains(r.Cookies, "loom_token") {
			t.Errorf("stream request %d carried no loom_token cookie (cookies %v)", i, r.Cookies)
		}
	}
	if n := w.Model().Count(); n != 3 {
		t.Errorf("the model was asked %d times, want 3 (the cut run, its rerun, the second turn)", n)
	}

	// The one console error the crash itself causes: chromium logs the cut stream ("Failed to
	// load resource: net::ERR_INCOMPLETE_CHUNKED_ENCODING" for the events URL), once per broken
	// connection. Anything else is an error of the page or the server.
	cut := 0
	for _, m := range res.consoleErrors() {
		if strings.HasPrefix(m.Text, "Failed to load resource: net::") && strings.HasPrefix(m.Location.URL, eventsURL) {
			cut++
			continue
		}
		t.Errorf("console error: %s (at %s:%d)", m.Text, m.Location.URL, m.Location.LineNumber)
	}
	if cut > res.Failures {
		t.Errorf("%d console errors for the stream, but the page saw only %d connection failures", cut, res.Failures)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("page errors: %v", res.PageErrors)
	}
	if t.Failed() {
		t.Logf("page log: %+v\nrequests: %+v\nfailed requests: %+v\nconsole: %+v", res.Log, res.Requests, res.FailedRequests, res.Console)
	}
	t.Logf("stream requests: %d answered of %d; connection failures seen by the page: %d; reconnected %.2fs after the kill; failed requests: %+v",
		len(streams), attempts, res.Failures, reconnected.Seconds(), res.FailedRequests)
}

// messageData returns the data of the i-th message event in log.
func messageData(log []streamLog, i int) json.RawMessage {
	n := 0
	for _, l := range log {
		if l.Kind == "event" && l.Type == "message" {
			if n == i {
				return json.RawMessage(l.Data)
			}
			n++
		}
	}
	return nil
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func duplicates(ss []string) []string {
	seen := map[string]int{}
	var out []string
	for _, s := range ss {
		if seen[s]++; seen[s] == 2 {
			out = append(out, s)
		}
	}
	return out
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// injectedFlag is the window property the report's script-injection payloads would set if any of
// them ever ran.
const injectedFlag = "__loomcheckInjected"

// Payloads that would run script, or fetch something, if the report ever treated text as markup.
var (
	scriptPayload = `</script><script>window.` + injectedFlag + `="name"</script>`
	imgPayload    = `<img src="x" onerror="window.` + injectedFlag + `='img'">`
	svgPayload    = `<svg onload="window.` + injectedFlag + `='svg'"></svg>`
)

// secretToken is a credential the report carries and WriteAll must redact.
const secretToken = "tok-3b9f0c2e7d41"

// richReport builds a report with every status, a baseline, warnings, exchanges with events and
// credentials, and markup payloads in the fields a reader sees.
func richReport() *report.Report {
	r := &report.Report{
		Kit:         report.Kit{Name: "loomcheck", Version: "0.3.0"},
		SpecVersion: sutconfig.Version,
		Target: report.Target{
			Driver: "process", Description: "./bin/loom serve " + svgPayload,
			Implementation: "loom-ref 1.2 <b>bold</b> & co", Profiles: []string{"core", "durability"},
		},
		StartedAt:  time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
		DurationMs: 12345,
		Conformant: false,
		ExitCode:   1,
		Contract: report.Contract{ExchangesValidated: 12, EventsValidated: 40, Violations: 1,
			Requirement: "ADR0122-D6-01", Rule: "Every exchange follows the contract.",
			Findings: []report.ContractFinding{{
				Route: "POST /conversations", Location: "header:X-Content-Type-Options",
				Schema:  "#/paths/~1conversations/post/responses/201/headers/X-Content-Type-Options",
				Message: "required header is missing " + scriptPayload, Occurrences: 1,
				Scenarios: []string{"features/core/turns.feature:12"},
				Example: &report.Exchange{Method: "POST", URL: "/conversations", Status: 201,
					RequestHeaders: map[string][]string{"Authorization": {"Bearer " + secretToken}}, ResponseBody: imgPayload},
			}}},
		Warnings: []string{"ADR0122-D3-09 (SHOULD) failed: retries are not jittered " + imgPayload},
	}
	auth := map[string][]string{"Authorization": {"Bearer " + secretToken}, "Content-Type": {"application/json"}}
	r.Scenarios = []report.Scenario{
		{
			ID: "features/core/turns.feature:12", Feature: "Turns", Name: "A user turn is answered",
			Profile: "core", Requirements: []string{"ADR0122-D3-01"}, Status: report.Passed, DurationMs: 250,
			Notes: []string{"contract violation (reported once among the contract findings): POST /conversations header:X-Content-Type-Options"},
			Steps: []report.Step{
				{Keyword: "Given ", Text: "a new conversation", Status: report.Passed, DurationMs: 20},
				{Keyword: "When ", Text: "the user says", Status: report.Passed, DurationMs: 200, DocString: "hello " + imgPayload},
				{Keyword: "Then ", Text: "the events are", Status: report.Passed, Table: [][]string{{"event", "count"}, {"delta", svgPayload}}},
			},
			Exchanges: []report.Exchange{{
				Method: "POST", URL: "http://127.0.0.1:8080/conversations", Status: 201, RequestHeaders: auth,
				RequestBody: `{"text":"hello"}`, ResponseBody: imgPayload,
				Events: []report.Event{
					{ID: "0.1", Type: "message", Data: `{"ord":1}`},
					{Type: "delta", Data: `{"text":"` + strings.ReplaceAll(scriptPayload, `"`, `\"`) + `"}`},
				},
				DurationMs: 180,
			}},
		},
		{
			ID: "features/core/turns.feature:30", Feature: "Turns", Name: "Replay resumes after the last event id",
			Profile: "core", Requirements: []string{"ADR0122-D3-02", "ADR0122-D3-03"}, Status: report.Failed, DurationMs: 410,
			Message: "replay started at the beginning " + scriptPayload,
			Failure: &report.Failure{Requirement: "ADR0122-D3-02", Rule: "A resumed stream starts after Last-Event-ID.",
				Operation: "GET /conversations/c1/events", Got: "first event id 1 " + imgPayload, Want: "first event id 5"},
			Steps: []report.Step{
				{Keyword: "Given ", Text: "a conversation with 4 events", Status: report.Passed},
				{Keyword: "When ", Text: "the client resumes from event 4", Status: report.Failed, Error: "got 1, want 5 (bearer " + secretToken + ")"},
				{Keyword: "Then ", Text: "nothing is repeated", Status: report.Skipped},
			},
		},
		{
			ID: "features/durability/restart.feature:8", Feature: "Restart", Name: "A turn survives a restart",
			Profile: "durability", Requirements: []string{"ADR0122-D4-01"}, Status: report.HarnessError, Message: "address in use",
			SystemOutput: "[node-1] listen tcp 127.0.0.1:4000: address in use " + imgPayload + "\n",
			Steps:        []report.Step{{Keyword: "Given ", Text: "a running system", Status: report.HarnessError, Error: "listen tcp: address in use"}},
		},
		{
			ID: "features/gateway/route.feature:5", Feature: "Gateway routing", Name: "Requests are routed by tenant",
			Profile: "gateway", Requirements: []string{"ADR0130-G1-01"}, Status: report.NotApplicable, Message: "profile gateway is not claimed",
		},
		{
			ID: "features/core/budget.feature:3", Feature: "Budget", Name: "Skipped scenario", Profile: "core",
			Requirements: []string{"ADR0122-D5-01"}, Status: report.Skipped, Message: "tagged @wip",
			Steps: []report.Step{{Keyword: "Given ", Text: "a budget", Status: report.Skipped}},
		},
		{
			ID: "features/core/budget.feature:9", Feature: "Budget", Name: "Undefined step", Profile: "core",
			Requirements: []string{"ADR0122-D5-02"}, Status: report.Undefined,
			Steps: []report.Step{{Keyword: "Given ", Text: "a step nobody wrote", Status: report.Undefined}},
		},
		{
			ID: "features/core/budget.feature:15", Feature: "Budget", Name: "Pending step", Profile: "core",
			Requirements: []string{"ADR0122-D5-03"}, Status: report.Pending,
			Steps: []report.Step{{Keyword: "Given ", Text: "a step not done yet", Status: report.Pending}},
		},
		{
			ID: "features/durability/restart.feature:20", Feature: "Restart", Name: "Known failure", Profile: "durability",
			Requirements: []string{"ADR0122-D4-02"}, Status: report.Failed, Expected: "tracked in issue 42",
			Failure: &report.Failure{Operation: "POST /restart", Got: "500", Want: "204"},
			Steps:   []report.Step{{Keyword: "When ", Text: "the system restarts", Status: report.Failed, Error: "status 500"}},
		},
		{
			ID: "features/core/retry.feature:4", Feature: "Retry", Name: "Retries are jittered", Profile: "core",
			Requirements: []string{"ADR0122-D3-09"}, Status: report.Failed,
			Failure: &report.Failure{Requirement: "ADR0122-D3-09", Operation: "retry timing", Got: "fixed 1s", Want: "jittered"},
			Steps:   []report.Step{{Keyword: "Then ", Text: "retries are jittered", Status: report.Failed, Error: "fixed delay"}},
		},
		{
			ID: "features/core/escape.feature:2", Feature: "Escaping <b>&amp;</b> " + svgPayload, Name: scriptPayload,
			Profile: "core", Requirements: []string{"ADR0122-D3-01"}, Status: report.Passed, DurationMs: 1,
			Steps: []report.Step{{Keyword: "Given ", Text: `text with "quotes" & <angle> brackets ]]> ` + scriptPayload, Status: report.Passed}},
		},
	}
	r.Requirements = []report.RequirementResult{
		{ID: "ADR0122-D3-01", Level: "MUST", Profile: "core", Rule: "A user turn gets an answer.", Status: report.Passed,
			Scenarios: []string{"features/core/turns.feature:12", "features/core/escape.feature:2"}},
		{ID: "ADR0122-D3-02", Level: "MUST", Profile: "core", Rule: "A resumed stream starts after Last-Event-ID.", Status: report.Failed,
			Scenarios: []string{"features/core/turns.feature:30"}},
		{ID: "ADR0122-D3-03", Level: "MUST", Profile: "core", Rule: "No event is repeated. " + imgPayload, Status: report.Failed,
			Scenarios: []string{"features/core/turns.feature:30"}},
		{ID: "ADR0122-D3-09", Level: "SHOULD", Profile: "core", Rule: "Retries are jittered.", Status: report.Failed,
			Scenarios: []string{"features/core/retry.feature:4"}},
		{ID: "ADR0122-D4-01", Level: "MUST", Profile: "durability", Rule: "Turns survive restarts.", Status: report.HarnessError,
			Scenarios: []string{"features/durability/restart.feature:8"}},
		{ID: "ADR0122-D4-02", Level: "MUST", Profile: "durability", Rule: "Restart answers 204.", Status: report.Failed,
			Scenarios: []string{"features/durability/restart.feature:20"}},
		{ID: "ADR0130-G1-01", Level: "MUST", Profile: "gateway", Rule: "Route by tenant.", Status: report.NotApplicable,
			Scenarios: []string{"features/gateway/route.feature:5"}},
		{ID: "ADR0122-D5-01", Level: "MAY", Profile: "core", Rule: "Budgets.", Status: report.Skipped, Scenarios: []string{}},
	}
	r.Baseline = &report.BaselineResult{
		File:       "baseline.yaml",
		Expected:   []report.BaselineEntry{{Scenario: "features/durability/restart.feature:20", Reason: "tracked in issue 42"}},
		Stale:      []report.BaselineEntry{{Requirement: "ADR0122-D3-01", Reason: "was flaky " + svgPayload}},
		Unexpected: []string{"features/core/turns.feature:30"},
	}
	profiles := map[string]*report.ProfileResult{}
	var order []string
	for _, sc := range r.Scenarios {
		r.Totals.Add(sc.Status)
		p := profiles[sc.Profile]
		if p == nil {
			p = &report.ProfileResult{Name: sc.Profile, Claimed: slices.Contains(r.Target.Profiles, sc.Profile)}
			profiles[sc.Profile] = p
			order = append(order, sc.Profile)
		}
		p.Totals.Add(sc.Status)
	}
	for _, name := range order {
		r.Profiles = append(r.Profiles, *profiles[name])
	}
	return r
}

// failuresFirst is the order report.html shows scenarios in: failures and harness errors (those
// the baseline expects after the rest), then undefined and pending, then the others, each group
// in report order.
func failuresFirst(scs []report.Scenario) []report.Scenario {
	rank := func(sc report.Scenario) int {
		switch {
		case (sc.Status == report.Failed || sc.Status == report.HarnessError) && sc.Expected == "":
			return 0
		case sc.Status == report.Failed || sc.Status == report.HarnessError:
			return 1
		case sc.Status == report.Undefined || sc.Status == report.Pending:
			return 2
		}
		return 3
	}
	out := slices.Clone(scs)
	slices.SortStableFunc(out, func(a, b report.Scenario) int { return rank(a) - rank(b) })
	return out
}

type reportRow struct {
	Profile     string `json:"profile"`
	Requirement string `json:"requirement"`
	Claimed     string `json:"claimed"`
	Conformant  string `json:"conformant"`
	Status      string `json:"status"`
	Links       int    `json:"links"`
}

type renderedScenario struct {
	ID           string  `json:"id"`
	ScenarioID   string  `json:"scenarioId"`
	Status       string  `json:"status"`
	Hidden       bool    `json:"hidden"`
	Visible      bool    `json:"visible"`
	Name         *string `json:"name"`
	NameElements int     `json:"nameElements"`
}

type reportResult struct {
	pageRecord
	FileURL string `json:"fileURL"`
	Before  struct {
		URL     string `json:"url"`
		Verdict *struct {
			Conformant string `json:"conformant"`
			ExitCode   string `json:"exitCode"`
			ClassName  string `json:"className"`
			Text       string `json:"text"`
		} `json:"verdict"`
		Profiles     []reportRow       `json:"profiles"`
		Requirements []reportRow       `json:"requirements"`
		Totals       map[string]string `json:"totals"`
		FilterCounts map[string]string `json:"filterCounts"`
		Filter       string            `json:"filter"`
		Findings     []struct {
			Route    string `json:"route"`
			Location string `json:"location"`
			Message  string `json:"message"`
			Links    int    `json:"links"`
			Examples int    `json:"examples"`
		} `json:"findings"`
		Notes int `json:"notes"`
		// Output is the text of each scenario's "what the system printed" block.
		Output  []string `json:"systemOutput"`
		Scripts int      `json:"scriptElements"`
		Width   struct {
			Page     int `json:"page"`
			Viewport int `json:"viewport"`
		} `json:"width"`
		Flag      *string            `json:"flag"`
		Text      string             `json:"text"`
		Scenarios []renderedScenario `json:"scenarios"`
	} `json:"before"`
	After struct {
		Filter        string             `json:"filter"`
		Pressed       string             `json:"pressed"`
		PressedActive bool               `json:"pressedActive"`
		EmptyHidden   bool               `json:"emptyHidden"`
		Scenarios     []renderedScenario `json:"scenarios"`
		TotalLink     struct {
			Filter string   `json:"filter"`
			Shown  []string `json:"shown"`
		} `json:"totalLink"`
	} `json:"after"`
	FlagAtEnd *string `json:"flagAtEnd"`
}

// TestHTMLReportRenders opens a written report.html from disk in chromium and checks the page a
// reader gets: the verdict, the profile and requirement tables, one article per scenario, the
// "failed" filter, markup in report text shown as text and never run, and nothing fetched.
func TestHTMLReportRenders(t *testing.T) {
	requireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()

	rep := richReport()
	dir := t.TempDir()
	if err := report.WriteAll(dir, rep, secretToken); err != nil {
		t.Fatal(err)
	}
	htmlPath := filepath.Join(dir, report.HTMLFile)
	shot := filepath.Join(dir, "report.png")

	node := startNode(t, "report.mjs", "--file", htmlPath, "--screenshot", shot, "--flag", injectedFlag)
	var res reportResult
	node.result(ctx, &res)
	t.Logf("rendered, filtered and photographed in %.2fs", time.Since(began).Seconds())

	if v := res.Before.Verdict; v == nil {
		t.Errorf("#verdict missing")
	} else if v.Conformant != fmt.Sprint(rep.Conformant) || v.ExitCode != fmt.Sprint(rep.ExitCode) {
		t.Errorf("#verdict: data-conformant=%q data-exit-code=%q, want %v and %d", v.Conformant, v.ExitCode, rep.Conformant, rep.ExitCode)
	}

	var gotProfiles, wantProfiles []string
	for _, p := range res.Before.Profiles {
		gotProfiles = append(gotProfiles, p.Profile+" claimed="+p.Claimed)
	}
	for _, p := range rep.Profiles {
		wantProfiles = append(wantProfiles, fmt.Sprintf("%s claimed=%v", p.Name, p.Claimed))
	}
	if !slices.Equal(gotProfiles, wantProfiles) {
		t.Errorf("profile rows: got %v, want %v", gotProfiles, wantProfiles)
	}
	var gotReqs, wantReqs []string
	for _, r := range res.Before.Requirements {
		gotReqs = append(gotReqs, r.Requirement+" "+r.Status)
	}
	for _, r := range rep.Requirements {
		wantReqs = append(wantReqs, r.ID+" "+string(r.Status))
	}
	if !slices.Equal(gotReqs, wantReqs) {
		t.Errorf("requirement rows: got %v, want %v", gotReqs, wantReqs)
	}

	if len(res.Before.Scenarios) != len(rep.Scenarios) {
		t.Fatalf("scenario articles: got %d, want %d", len(res.Before.Scenarios), len(rep.Scenarios))
	}
	failed := 0
	for i, sc := range failuresFirst(rep.Scenarios) {
		got := res.Before.Scenarios[i]
		if got.ScenarioID != sc.ID || got.Status != string(sc.Status) || got.Hidden {
			t.Errorf("article %d: %s %s hidden=%v, want %s %s shown", i, got.ScenarioID, got.Status, got.Hidden, sc.ID, sc.Status)
		}
		if sc.Status == report.Failed {
			failed++
		}
		if sc.Name == scriptPayload {
			if got.Name == nil || *got.Name != scriptPayload || got.NameElements != 0 {
				t.Errorf("the </script> scenario name should be shown as plain text; got %v with %d child elements",
					deref(got.Name), got.NameElements)
			}
		}
	}
	if res.Before.Filter != "all" {
		t.Errorf("#scenarios data-filter at load: %q, want all", res.Before.Filter)
	}
	if got := res.Before.Totals["failed"]; got != fmt.Sprint(failed) {
		t.Errorf("#totals failed: %q, want %d", got, failed)
	}
	if got := res.Before.FilterCounts["failed"]; got != fmt.Sprint(failed) {
		t.Errorf("failed filter button count: %q, want %d", got, failed)
	}

	// The contract's finding is shown once, with its scenario and example; the scenario notes it.
	if len(res.Before.Findings) != 1 {
		t.Errorf("contract findings shown: %+v, want 1", res.Before.Findings)
	} else if f, want := res.Before.Findings[0], rep.Contract.Findings[0]; f.Route != want.Route || f.Location != want.Location ||
		f.Message != want.Message || f.Links != 1 || f.Examples != 1 {
		t.Errorf("contract finding shown as %+v, want %s %s %q with 1 scenario link and 1 example", f, want.Route, want.Location, want.Message)
	}
	if want := "[node-1] listen tcp 127.0.0.1:4000: address in use " + imgPayload + "\n"; len(res.Before.Output) != 1 || res.Before.Output[0] != want {
		t.Errorf("system output shown as %q, want one block holding %q as text", res.Before.Output, want)
	}
	if res.Before.Notes != 1 {
		t.Errorf("scenario notes shown: %d, want 1", res.Before.Notes)
	}
	// The summary's harness-error count shows exactly the harness errors.
	if tl := res.After.TotalLink; tl.Filter != string(report.HarnessError) || !slices.Equal(tl.Shown, []string{string(report.HarnessError)}) {
		t.Errorf("after clicking the harness-error count: filter %q, shown %v", tl.Filter, tl.Shown)
	}

	// Pressing "failed" leaves exactly the failed scenarios shown.
	if res.After.Filter != "failed" || res.After.Pressed != "failed" || !res.After.PressedActive || !res.After.EmptyHidden {
		t.Errorf("after pressing failed: data-filter=%q pressed=%q active=%v filter-empty hidden=%v",
			res.After.Filter, res.After.Pressed, res.After.PressedActive, res.After.EmptyHidden)
	}
	shown := 0
	for _, a := range res.After.Scenarios {
		isFailed := a.Status == string(report.Failed)
		if isFailed == a.Hidden || isFailed != a.Visible {
			t.Errorf("after pressing failed, article %s (%s): hidden=%v visible=%v", a.ID, a.Status, a.Hidden, a.Visible)
		}
		if !a.Hidden {
			shown++
		}
	}
	if shown != failed {
		t.Errorf("after pressing failed: %d articles shown, want %d", shown, failed)
	}

	// Nothing injected ran, nothing was fetched, nothing complained.
	if res.Before.Flag != nil || res.FlagAtEnd != nil {
		t.Errorf("an injected payload ran: window.%s = %v (at load), %v (at the end)", injectedFlag, deref(res.Before.Flag), deref(res.FlagAtEnd))
	}
	if res.Before.Scripts != 2 {
		t.Errorf("the page has %d script elements, want the report's own 2", res.Before.Scripts)
	}
	if strings.Contains(res.Before.Text, secretToken) {
		t.Errorf("the rendered page shows the credential %q", secretToken)
	}
	if res.Before.URL != res.FileURL {
		t.Errorf("the page is at %q, want %q", res.Before.URL, res.FileURL)
	}
	sawSelf := false
	for _, r := range res.Requests {
		if r.URL != res.FileURL {
			t.Errorf("the report made a request: %s %s (%s)", r.Method, r.URL, r.ResourceType)
		} else {
			sawSelf = true
		}
	}
	if !sawSelf {
		t.Errorf("the request recorder did not see the report's own %s; requests: %+v", res.FileURL, res.Requests)
	}
	if len(res.FailedRequests) > 0 {
		t.Errorf("failed requests: %+v", res.FailedRequests)
	}
	if errs := res.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %+v", errs)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("page errors: %v", res.PageErrors)
	}
	if len(res.Console) > 0 {
		t.Logf("console: %+v", res.Console)
	}
	// Not a failure (yet): the requirement table's scenario links have no break opportunity
	// between them, so a requirement with several scenarios widens the page past the viewport.
	if w := res.Before.Width; w.Page > w.Viewport {
		t.Logf("note: the page is %dpx wide in a %dpx viewport (it scrolls sideways)", w.Page, w.Viewport)
	}

	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10<<10 {
		t.Errorf("screenshot %s: %d bytes, not a plausible full-page PNG", shot, len(png))
	}
	if out := os.Getenv("LOOMCHECK_SCREENSHOT_DIR"); out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(out, "report-html.png")
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot copied to %s", dst)
	}
}
