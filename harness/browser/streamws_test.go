package browser

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
)

// sessionPage follows /sessions/{id}/stream of the server named in its query string with
// streamclient.js over the WebSocket (the token in the loom_token cookie) and folds the frames it
// delivers into rows, one per message: a user message's text, and a reply's deltas, voided by a
// status "restarted" of that reply and closed by its text-done. window.log keeps every delivered
// frame, control frame and client event, in order.
const sessionPage = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><link rel="icon" href="data:,"><title>loom session stream</title></head>
<body>
<script src="/streamclient.js"></script>
<script>
(function () {
  'use strict';
  var q = new URLSearchParams(location.search);
  window.log = [];
  window.rows = [];
  window.counts = { open: 0, drop: 0, retry: 0, gap: 0, repeat: 0, reset: 0 };
  window.restarts = 0;
  var index = {};
  function row(message, role) {
    var r = index[message];
    if (!r) {
      r = { message: message, role: role, text: '', done: null, status: '' };
      index[message] = r;
      window.rows.push(r);
    }
    return r;
  }
  function fold(f) {
    var d = f.data || {};
    switch (f.type) {
      case 'session.user-message':
        var u = row(f.message || d.message, 'user');
        if (typeof d.text === 'string') u.text = d.text;
        u.status = d.state;
        break;
      case 'session.text-delta':
        row(f.message, 'assistant').text += Array.isArray(d.parts) ? d.parts.join('') : (d.text || '');
        break;
      case 'session.status':
        if (d.state === 'restarted' && d.message) {
          row(d.message, 'assistant').text = '';
          window.restarts++;
        }
        break;
      case 'session.text-done':
        var a = row(f.message, 'assistant');
        a.done = d.text;
        a.status = d.status;
        break;
    }
  }
  window.countType = function (type) {
    return window.log.filter(function (e) { return e.kind === 'frame' && e.type === type; }).length;
  };
  window.stream = new LoomStream({
    server: q.get('server'),
    session: q.get('id'),
    backoff: { baseMs: 50, maxMs: 1000, jitter: 0.2 },
    onFrame: function (f) {
      var first = f.span > 1 ? f.cur - f.span + 1 : f.cur;
      window.log.push({ kind: 'frame', cur: f.cur, first: first, type: f.type });
      fold(f);
    },
    onControl: function (f) {
      window.log.push({ kind: 'control', type: f.type });
    },
    onEvent: function (name, detail) {
      window.counts[name] = (window.counts[name] || 0) + 1;
      window.log.push({ kind: 'event', name: name, detail: detail });
    }
  });
  window.summary = function () {
    return { counts: window.counts, last: window.stream.last(), attempts: window.stream.attempts,
      rows: window.rows, tail: window.log.slice(-12) };
  };
  window.result = function () {
    return { log: window.log, rows: window.rows, counts: window.counts, restarts: window.restarts,
      last: window.stream.last(), attempts: window.stream.attempts, opens: window.stream.opens };
  };
  window.stream.start();
})();
</script>
</body>
</html>
`

// sessionLog is one line of the page's window.log.
type sessionLog struct {
	Kind   string         `json:"kind"` // "frame", "control" or "event"
	Cur    int64          `json:"cur"`
	First  int64          `json:"first"`
	Type   string         `json:"type"`
	Name   string         `json:"name"`
	Detail map[string]any `json:"detail"`
}

type sessionRow struct {
	Message string  `json:"message"`
	Role    string  `json:"role"`
	Text    string  `json:"text"`
	Done    *string `json:"done"`
	Status  string  `json:"status"`
}

type sessionResult struct {
	pageRecord
	WebSockets []struct {
		URL    string `json:"url"`
		Frames int    `json:"frames"`
	} `json:"websockets"`
	Log      []sessionLog   `json:"log"`
	Rows     []sessionRow   `json:"rows"`
	Counts   map[string]int `json:"counts"`
	Restarts int            `json:"restarts"`
	Last     int64          `json:"last"`
	Attempts int            `json:"attempts"`
	Opens    int            `json:"opens"`
}

// TestWebSocketResume follows a session in chromium with streamclient.js over the WebSocket while
// the server is SIGKILLed in the middle of a streamed reply and restarted on the same data
// directory, behind the same address (the test's relay). The client reconnects (a new ticket, from its last cursor); the page must
// deliver every cursor of the log exactly once, in order, see no gap and no repeat, and fold the
// frames into exactly the conversation's history.
func TestWebSocketResume(t *testing.T) {
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

	pages := servePages(t, map[string]page{"/": htmlPage(sessionPage), "/streamclient.js": streamClientPage(t)}, nil)

	const token = "tok-alice"
	cfgPath := serverConfig(t, w, token, pages.URL)

	// The browser knows the relay's address; the server behind it gets a new port at each start.
	front := newRelay(t)
	addr, serverURL := front.addr(), front.url()
	srv := newServer(t, bin, cfgPath)
	srv.start(ctx)
	front.point(srv.addr)
	lap("server serving")
	api := &api{base: serverURL, token: token, hc: &http.Client{Timeout: 15 * time.Second}}
	var started struct {
		ID string `json:"id"`
	}
	if code, err := api.do(ctx, http.MethodPost, "/conversations", map[string]string{"id": "ws-resume"}, &started); err != nil || code != http.StatusCreated || started.ID == "" {
		t.Fatalf("POST /conversations: %d %v %q", code, err, started.ID)
	}
	convID := started.ID

	// The first reply streams two chunks and stops at the hold; the crash cuts it there. After
	// the restart the turn is produced again and its second run stops at the same hold.
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

	pageURL := pages.URL + "/?" + url.Values{"server": {serverURL}, "id": {convID}}.Encode()
	node := startNode(t, "stream.mjs", "--page", pageURL, "--cookie-url", serverURL, "--token", token)
	if m := node.next(ctx); string(m["ready"]) != "true" {
		t.Fatalf("stream.mjs: want the ready line first, got %v", m)
	}
	node.waitFor(ctx, "the stream to open", `window.counts.open >= 1`, 20*time.Second)
	lap("page following the session")

	if _, err := api.do(ctx, http.MethodPost, "/conversations/"+convID+"/turns",
		map[string]string{"text": "first question", "messageId": "m-1"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := hold.WaitReached(ctx); err != nil {
		t.Fatal(err)
	}
	node.waitFor(ctx, "a live delta of the first reply", `countType("session.text-delta") >= 1`, 20*time.Second)
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
	node.waitFor(ctx, "the client to reconnect and see the reply start again",
		`window.counts.open >= 2 && window.restarts >= 1`, 30*time.Second)
	reconnected := time.Since(killedAt)
	lap(fmt.Sprintf("client reconnected and saw the restart %.2fs after the kill", reconnected.Seconds()))

	hold.Release()
	node.waitFor(ctx, "the first reply's text-done", `countType("session.text-done") >= 1`, 20*time.Second)
	if _, err := api.do(ctx, http.MethodPost, "/conversations/"+convID+"/turns",
		map[string]string{"text": "second question", "messageId": "m-2"}, nil); err != nil {
		t.Fatal(err)
	}
	node.waitFor(ctx, "the second reply's text-done", `countType("session.text-done") >= 2`, 20*time.Second)
	lap("page has both turns")

	node.send(map[string]string{"op": "finish"})
	var res sessionResult
	node.result(ctx, &res)
	lap("browser closed")

	var page struct {
		Entries []entry `json:"entries"`
		Done    bool    `json:"done"`
	}
	if _, err := api.do(ctx, http.MethodGet, "/conversations/"+convID+"/history?limit=50", nil, &page); err != nil {
		t.Fatal(err)
	}
	var op struct {
		Head  int64 `json:"head"`
		Floor int64 `json:"floor"`
	}
	if _, err := api.do(ctx, http.MethodPost, "/sessions/"+convID+"/stream/open", map[string]int64{"from": 0}, &op); err != nil {
		t.Fatal(err)
	}
	stopCtx, stopCancel := context.WithTimeout(ctx, 15*time.Second)
	defer stopCancel()
	if err := srv.stop(stopCtx); err != nil {
		t.Errorf("stopping the server: %v", err)
	}

	// No gap and no repeat: the delivered frames cover 1..head, each cursor once, in order.
	if res.Counts["gap"] != 0 || res.Counts["repeat"] != 0 {
		t.Errorf("the client saw %d gaps and %d repeats, want none", res.Counts["gap"], res.Counts["repeat"])
	}
	next := int64(1)
	for _, l := range res.Log {
		if l.Kind != "frame" {
			continue
		}
		if l.First != next || l.Cur < l.First {
			t.Errorf("delivered frame %d..%d, want one starting at %d", l.First, l.Cur, next)
		}
		next = l.Cur + 1
	}
	if op.Floor != 1 || res.Last != op.Head || next-1 != op.Head {
		t.Errorf("the page delivered up to %d (last %d); the log's floor is %d and head %d", next-1, res.Last, op.Floor, op.Head)
	}

	// The folded rows are the history: each message once, with the recorded text; a reply's
	// deltas add up to its text-done; nothing of the run the crash cut off is left.
	if !page.Done || len(page.Entries) != 4 {
		t.Errorf("history: %d entries (done=%v), want 4", len(page.Entries), page.Done)
	}
	var got, want []string
	for _, r := range res.Rows {
		got = append(got, r.Role+": "+r.Text)
		if r.Role == "assistant" && (r.Done == nil || *r.Done != r.Text) {
			t.Errorf("reply %s: deltas fold to %q, its text-done says %v", r.Message, r.Text, deref(r.Done))
		}
		if r.Text == firstText || strings.Contains(r.Text, "Let me") {
			t.Errorf("row %s holds text of the run the crash cut off: %q", r.Message, r.Text)
		}
	}
	for _, e := range page.Entries {
		want = append(want, e.Role+": "+e.text())
	}
	if !slices.Equal(got, want) {
		t.Errorf("folded rows:\n got %q\nwant %q (the history)", got, want)
	}
	if wantText := []string{"user: first question", "assistant: " + rerunText, "user: second question", "assistant: " + secondText}; !slices.Equal(want, wantText) {
		t.Errorf("history %q, want %q", want, wantText)
	}

	// A reconnect happened, after a delta of the first reply, from the cursor the page held.
	firstOpen, firstDelta, drop, reopen := -1, -1, -1, -1
	var heldAtDrop int64
	for i, l := range res.Log {
		switch {
		case l.Kind == "event" && l.Name == "open" && firstOpen < 0:
			firstOpen = i
		case l.Kind == "frame" && l.Type == "session.text-delta" && firstDelta < 0:
			firstDelta = i
		case l.Kind == "event" && l.Name == "drop" && drop < 0 && firstDelta >= 0:
			drop = i
			heldAtDrop = int64(num(l.Detail["last"]))
		case l.Kind == "event" && l.Name == "open" && drop >= 0 && reopen < 0:
			reopen = i
			if from := int64(num(l.Detail["from"])); from != heldAtDrop {
				t.Errorf("the client reconnected from %d, want the cursor it held, %d", from, heldAtDrop)
			}
		}
	}
	if res.Opens < 2 || !(firstOpen >= 0 && firstOpen < firstDelta && firstDelta < drop && drop < reopen) {
		t.Errorf("want open, delta, drop, open in that order; got opens=%d at %d, %d, %d, %d", res.Opens, firstOpen, firstDelta, drop, reopen)
	}

	// Every open went out with the cookie; the page opened one WebSocket per answered open, each
	// with its ticket and the cursor the client held; the second from the cursor held at the drop.
	opensAnswered, sockets := 0, len(res.WebSockets)
	var froms []string
	for _, ws := range res.WebSockets {
		u, err := url.Parse(ws.URL)
		if err != nil || u.Host != addr || u.Path != "/sessions/"+convID+"/stream" || u.Query().Get("ticket") == "" {
			t.Errorf("a WebSocket to %s, want ws://%s/sessions/%s/stream?ticket=...", ws.URL, addr, convID)
			continue
		}
		froms = append(froms, u.Query().Get("from"))
	}
	if len(froms) < 2 || froms[0] != "0" || froms[1] != fmt.Sprint(heldAtDrop) {
		t.Errorf("the WebSockets' from: %v, want 0 then %d", froms, heldAtDrop)
	}
	for _, r := range res.Requests {
		switch {
		case strings.HasPrefix(r.URL, serverURL+"/sessions/"+convID+"/stream/open") && r.Method == http.MethodPost && r.Status != 0:
			opensAnswered++
			if r.Status != http.StatusOK {
				t.Errorf("stream open answered %d", r.Status)
			}
			if r.HeadersKnown && !slices.Contains(r.Cookies, "loom_token") {
				t.Errorf("a stream open carried no loom_token cookie (cookies %v)", r.Cookies)
			}
		}
	}
	if opensAnswered < 2 || opensAnswered != sockets {
		t.Errorf("want at least 2 answered stream opens and one WebSocket each, got %d opens and %d sockets", opensAnswered, sockets)
	}
	if n := w.Model().Count(); n != 3 {
		t.Errorf("the model was asked %d times, want 3 (the cut run, its rerun, the second turn)", n)
	}

	// The console errors the crash itself causes are chromium's notes about the refused or cut
	// connections to the server; anything else is an error of the page.
	for _, m := range res.consoleErrors() {
		if strings.HasPrefix(m.Location.URL, serverURL) || strings.Contains(m.Text, "ws://"+addr+"/") ||
			(strings.HasPrefix(m.Text, "Failed to load resource: net::") && m.Location.URL == "") {
			continue
		}
		t.Errorf("console error: %s (at %s:%d)", m.Text, m.Location.URL, m.Location.LineNumber)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("page errors: %v", res.PageErrors)
	}
	if t.Failed() {
		t.Logf("page log: %+v\nrows: %+v\nrequests: %+v\nconsole: %+v", res.Log, res.Rows, res.Requests, res.Console)
	}
	t.Logf("frames 1..%d delivered once each; %d attempts, %d opens, %d answered stream opens, %d sockets; reconnected and saw the restart %.2fs after the kill",
		res.Last, res.Attempts, res.Opens, opensAnswered, sockets, reconnected.Seconds())
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}
