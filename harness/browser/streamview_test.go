package browser

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/harness/resume"
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
    server: location.origin,
    session: q.get('id'),
    onFrame: function (f) {
      window.steps.push({ cur: f.cur, rows: window.stream.rows() });
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
	Cur  int64        `json:"cur"`
	Rows []resume.Row `json:"rows"`
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
		if !reflect.DeepEqual(res.Steps[i], want[i]) {
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
