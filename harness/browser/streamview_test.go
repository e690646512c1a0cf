package browser

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/harness/resume"
	"github.com/loomcheck/loomcheck/harness/world"
)

// viewPage follows the session of its query string with streamclient.js and records, after each
// delivered frame, the rows of the client's rendering view (window.steps).
const viewPage = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><link rel="icon" href="data:,"><title>loom rendering view</title></head>
<body>
<script src="/streamclient.js"></script>
<script>
(function () {
  'use strict';
  var q = new URLSearchParams(location.search);
  window.steps = [];
  window.counts = {};
  window.stream = new LoomStream({
    server: q.get('server') || location.origin,
    session: q.get('id'),
    onFrame: function (f) {
      window.steps.push({ cur: f.cur, frame: f, rows: window.stream.rows() });
    },
    onEvent: function (name) {
      window.counts[name] = (window.counts[name] || 0) + 1;
    }
  });
  window.summary = function () {
    return { counts: window.counts, steps: window.steps.length, last: window.stream.last() };
  };
  window.result = function () {
    return { steps: window.steps, counts: window.counts, last: window.stream.last() };
  };
  window.stream.start();
})();
</script>
</body>
</html>
`

type viewStep struct {
	Cur   int64           `json:"cur"`
	Frame json.RawMessage `json:"frame,omitempty"`
	Rows  []resume.Row    `json:"rows"`
}

// TestStreamClientViewMatchesKit serves the transcript of harness/resume/testdata/holdback.json
// (replies shorter than, exactly and one over 40 characters, one of two- and four-byte
// characters cut by a text-cut, a merged frame, a restart, two replies streaming at once) over a
// WebSocket to streamclient.js in chromium, and wants its rendering view to show, after every
// frame, exactly the rows resume.View shows for the same frames: the kit's two clients agree on
// what a screen holds back.
func TestStreamClientViewMatchesKit(t *testing.T) {
	requireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	b, err := os.ReadFile("../resume/testdata/holdback.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Frames []json.RawMessage `json:"frames"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Frames) == 0 {
		t.Fatalf("the transcript: %v", err)
	}

	// The stream: an open answers a ticket, the WebSocket serves the transcript and stays open.
	const session = "c1"
	served := make(chan struct{}, 4)
	stream := http.NewServeMux()
	stream.HandleFunc("POST /sessions/c1/stream/open", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"ticket": "t1", "expiresIn": 15, "session": session,
			"from": 0, "head": len(doc.Frames), "floor": 1})
	})
	stream.HandleFunc("GET /sessions/c1/stream", func(rw http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(rw, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		if r.URL.Query().Get("ticket") == "t1" && r.URL.Query().Get("from") == "0" {
			for _, f := range doc.Frames {
				if err := c.Write(r.Context(), websocket.MessageText, f); err != nil {
					return
				}
			}
		}
		served <- struct{}{}
		<-r.Context().Done()
	})
	pages := servePages(t, map[string]page{"/": htmlPage(viewPage), "/streamclient.js": streamClientPage(t)}, stream)

	node := startNode(t, "stream.mjs", "--page", pages.URL+"/?id="+session, "--cookie-url", pages.URL, "--token", "none")
	if m := node.next(ctx); string(m["ready"]) != "true" {
		t.Fatalf("stream.mjs: want the ready line first, got %v", m)
	}
	node.waitFor(ctx, "every frame of the transcript", "window.steps.length >= "+strconv.Itoa(len(doc.Frames)), 30*time.Second)
	node.send(map[string]string{"op": "finish"})
	var res struct {
		pageRecord
		Steps  []viewStep     `json:"steps"`
		Counts map[string]int `json:"counts"`
		Last   int64          `json:"last"`
	}
	node.result(ctx, &res)

	var r resume.Reader
	var v resume.View
	var want []viewStep
	for _, raw := range doc.Frames {
		var f resume.Frame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		out, verdict := r.Take(f)
		if verdict != resume.Deliver && verdict != resume.Trim {
			t.Fatalf("the kit's reader: frame %d %s", f.Cur, verdict)
		}
		v.Take(out)
		want = append(want, viewStep{Cur: f.Cur, Rows: v.Rows()})
	}
	if len(res.Steps) != len(want) {
		t.Fatalf("the page delivered %d frames, the transcript has %d", len(res.Steps), len(want))
	}
	for i := range want {
		if res.Steps[i].Cur != want[i].Cur || !reflect.DeepEqual(res.Steps[i].Rows, want[i].Rows) {
			t.Errorf("after frame %d the page shows\n %+v\nthe kit\n %+v", want[i].Cur, res.Steps[i].Rows, want[i].Rows)
		}
	}
	if res.Counts["gap"] != 0 || res.Counts["repeat"] != 0 || res.Counts["open"] != 1 || res.Last != want[len(want)-1].Cur {
		t.Errorf("the page saw counts %v and holds last %d; want one open, no gap or repeat, last %d", res.Counts, res.Last, want[len(want)-1].Cur)
	}
	for _, m := range res.consoleErrors() {
		t.Errorf("console error: %s (at %s:%d)", m.Text, m.Location.URL, m.Location.LineNumber)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("page errors: %v", res.PageErrors)
	}
	select {
	case <-served:
	default:
		t.Error("the page never asked for the stream with ticket t1 from 0")
	}
}

// TestStreamClientViewOfACutReply follows a real `loomcheck serve` in chromium while the model
// streams a reply of 52 characters (two- and four-byte ones among them) and then fails: the system
// withdraws what streamed with a text-cut before the failed text-done. After every frame the page
// delivered, its rendering view must show what resume.View shows for those same frames; while the
// reply streams it shows all but the last 40 characters, and at the end the row is cut: the 12
// characters it had shown, and the cut's note.
func TestStreamClientViewOfACutReply(t *testing.T) {
	requireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := buildLoomcheck(t, ctx)

	w := world.New(world.Options{})
	if _, err := w.Start(""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	pages := servePages(t, map[string]page{"/": htmlPage(viewPage), "/streamclient.js": streamClientPage(t)}, nil)
	const token = "tok-alice"
	srv := newServer(t, bin, serverConfig(t, w, token, pages.URL))
	srv.start(ctx)
	serverURL := srv.url()
	api := &api{base: serverURL, token: token, hc: &http.Client{Timeout: 15 * time.Second}}
	var started struct {
		ID string `json:"id"`
	}
	if code, err := api.do(ctx, http.MethodPost, "/conversations", map[string]string{"id": "cut-reply"}, &started); err != nil || code != http.StatusCreated || started.ID == "" {
		t.Fatalf("POST /conversations: %d %v %q", code, err, started.ID)
	}
	chunks := []string{"Die Pumpen laufen ", "über dem Soll: ", "überprüfe 🙂 Ventile"}
	streamed := strings.Join(chunks, "")
	if n := utf8.RuneCountInString(streamed); n != 52 {
		t.Fatalf("the streamed text has %d code points", n)
	}
	if err := w.Model().EnqueueFor("pumps?", world.Reply{Chunks: chunks, Fail: &world.Failure{Status: http.StatusBadRequest, Message: "cut off"}}); err != nil {
		t.Fatal(err)
	}

	pageURL := pages.URL + "/?" + url.Values{"server": {serverURL}, "id": {started.ID}}.Encode()
	node := startNode(t, "stream.mjs", "--page", pageURL, "--cookie-url", serverURL, "--token", token)
	if m := node.next(ctx); string(m["ready"]) != "true" {
		t.Fatalf("stream.mjs: want the ready line first, got %v", m)
	}
	node.waitFor(ctx, "the stream to open", `window.counts.open >= 1`, 20*time.Second)
	if _, err := api.do(ctx, http.MethodPost, "/sessions/"+started.ID+"/messages",
		map[string]string{"text": "pumps?", "messageId": "m1"}, nil); err != nil {
		t.Fatal(err)
	}
	node.waitFor(ctx, "the failed reply's text-done",
		`window.steps.some(function (s) { return s.frame.type === 'session.text-done'; })`, 30*time.Second)
	node.send(map[string]string{"op": "finish"})
	var res struct {
		pageRecord
		Steps  []viewStep     `json:"steps"`
		Counts map[string]int `json:"counts"`
	}
	node.result(ctx, &res)
	stopCtx, stopCancel := context.WithTimeout(ctx, 15*time.Second)
	defer stopCancel()
	if err := srv.stop(stopCtx); err != nil {
		t.Errorf("stopping the server: %v", err)
	}

	var v resume.View
	var kinds []string
	var note string
	for _, st := range res.Steps {
		var f resume.Frame
		if err := json.Unmarshal(st.Frame, &f); err != nil {
			t.Fatalf("frame %s: %v", st.Frame, err)
		}
		v.Take(f)
		kind := strings.TrimPrefix(f.Type, "session.")
		kinds = append(kinds, kind)
		if kind == "text-cut" {
			var d struct {
				Note string `json:"note"`
			}
			_ = json.Unmarshal(f.Data, &d)
			note = d.Note
		}
		if got := v.Rows(); !reflect.DeepEqual(st.Rows, got) {
			t.Errorf("after frame %d (%s) the page shows\n %+v\nthe kit\n %+v", f.Cur, kind, st.Rows, got)
		}
	}
	// The frames: the message, the deltas, the cut, the failed text-done.
	if len(kinds) < 4 || kinds[0] != "user-message" || kinds[len(kinds)-2] != "text-cut" || kinds[len(kinds)-1] != "text-done" {
		t.Fatalf("the page was delivered %v; want user-message, text-delta..., text-cut, text-done", kinds)
	}
	for _, k := range kinds[1 : len(kinds)-2] {
		if k != "text-delta" {
			t.Fatalf("the page was delivered %v; want only deltas between the message and the cut", kinds)
		}
	}
	cut := []rune(streamed)[:len([]rune(streamed))-resume.Holdback]
	if note == "" {
		t.Error("the text-cut carries no note")
	}
	final := res.Steps[len(res.Steps)-1].Rows
	if want := []resume.Row{{Message: "a:1", State: resume.RowCut, Text: string(cut), Note: note}}; !reflect.DeepEqual(final, want) {
		t.Errorf("the page ends showing %+v, want %+v", final, want)
	}
	if res.Counts["gap"] != 0 || res.Counts["repeat"] != 0 {
		t.Errorf("the page saw counts %v, want no gap and no repeat", res.Counts)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("page errors: %v", res.PageErrors)
	}
	t.Logf("frames %v; the page ends showing %+v", kinds, final)
}
