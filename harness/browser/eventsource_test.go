// Package browser checks what only a real browser can: that a browser's own EventSource
// resumes a conversation's event stream across a server crash without losing or repeating a
// durable message, that a page's resumable session stream client (streamclient.js) does the same
// over the WebSocket, and that report.html renders, filters and stays inert in chromium.
//
// The tests drive Debian's chromium through playwright-core from the node scripts beside them;
// they skip when chromium or node_modules is missing (see README.md).
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
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
