package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
)

// These benchmarks time the live path of the reference engine end to end:
//
//	provider.Complete → agent loop → conversation hub → SSE handler → HTTP → client
//
// They report percentiles through b.ReportMetric rather than asserting on them. Run with
//
//	go test -run '^$' -bench Latency -benchtime 1x ./reference/internal/gateway/
//
// b.N repeats the whole measured run; the percentiles cover every sample of every repetition.

const (
	// deltaRunSize is how many text deltas one measured turn streams.
	deltaRunSize = 3000
	// deltaEvery paces the provider: slow enough that the path is measured, not a queue.
	deltaEvery = 200 * time.Microsecond
	// warmupDeltas are streamed once before measuring, to get one-off costs out of the samples.
	warmupDeltas = 200
	// turnRunSize is how many turns one repetition of the turn benchmark sends.
	turnRunSize = 500
	// warmupTurns are sent once before measuring the turn benchmark.
	warmupTurns = 20
	// stallGuard bounds every wait for an event, so a broken engine fails the run instead of
	// hanging it. It is a deadlock guard, not a speed target.
	stallGuard = 30 * time.Second
	benchToken = "bench-token"
)

var benchPrincipal = loomtype.Identity{Tenant: "bench", Actor: "alice"}

// origin is the shared clock origin of the stamps a provider embeds in its deltas. Stamps are
// offsets from it measured with the monotonic clock, so a wall-clock step cannot skew a sample.
var origin = time.Now()

func stamp() int64 { return int64(time.Since(origin)) }

// pacedProvider streams deltas, one per tick, each carrying its own send time as "t=<ns>;".
// The number of deltas is read from the last user message ("stream <n>"). It stays a model of its
// own (not reference/internal/scriptmodel): each delta is made when it is sent, with the time it
// is sent, which is what the benchmark measures from.
type pacedProvider struct {
	every time.Duration
}

func (p pacedProvider) Complete(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	n := deltaRunSize
	if len(req.Messages) > 0 {
		last := req.Messages[len(req.Messages)-1].Content
		if v, err := strconv.Atoi(strings.TrimPrefix(last, "stream ")); err == nil && v > 0 {
			n = v
		}
	}
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	var text strings.Builder
	buf := make([]byte, 0, 32)
	for range n {
		select {
		case <-ctx.Done():
			return model.Response{Content: text.String()}, ctx.Err()
		case <-tick.C:
		}
		buf = append(buf[:0], "t="...)
		buf = strconv.AppendInt(buf, stamp(), 10)
		buf = append(buf, ';')
		piece := string(buf)
		text.WriteString(piece)
		if onDelta != nil {
			onDelta(piece)
		}
	}
	return model.Response{Content: text.String(), FinishReason: model.FinishStop}, nil
}

// instant answers at once with a short text, delivered as a single delta.
func instant() model.Provider { return scriptmodel.Fixed("ok") }

// benchEngine is an engine served over loopback HTTP, with one conversation and one open
// event stream on it.
type benchEngine struct {
	b      testing.TB
	srv    *httptest.Server
	client *http.Client
	conv   string
	events <-chan sseEvent
	eng    *reftest.Engine
}

// sseEvent is one event of the stream, stamped when its data line was read off the wire.
type sseEvent struct {
	name string
	data []byte
	at   int64 // stamp() when the data line arrived
	err  error // the stream ended (set on the last value only)
}

func openBenchEngine(b testing.TB, p model.Provider) *benchEngine {
	b.Helper()
	eng := reftest.Open(b, reftest.Tokens(map[string]loomtype.Identity{benchToken: benchPrincipal}), reftest.Provider(p),
		// The POST rate limit guards a shared server; a benchmark that posts hundreds of turns a
		// second from one principal would trip it, so it is raised out of the way.
		reftest.With(func(o *reference.Options) { o.Gateway.PostsPerMinute = 1 << 30 }))
	srv := httptest.NewServer(eng.Handler())
	be := &benchEngine{b: b, srv: srv, client: srv.Client(), eng: eng}

	ctx, cancel := context.WithCancel(context.Background())
	// Cleanups run last-in first-out: the stream goes first, then the server (which waits for
	// its handlers), then the engine (whose cleanup the rig registered first).
	b.Cleanup(srv.Close)
	b.Cleanup(cancel)

	var st loomtype.Status
	if code := be.post("/conversations", `{"id":"bench"}`, &st); code != http.StatusCreated {
		b.Fatalf("start conversation: status %d", code)
	}
	be.conv = st.ID

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/conversations/"+be.conv+"/events", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := be.client.Do(req)
	if err != nil {
		b.Fatalf("open event stream: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		b.Fatalf("open event stream: status %d", resp.StatusCode)
	}
	ch := make(chan sseEvent, 1<<14)
	go readSSE(resp.Body, ch)
	be.events = ch
	b.Cleanup(func() { resp.Body.Close() })

	// The status event is written after the handler subscribed to the hub, so once it is here
	// no delta of a later turn can be missed.
	if ev := be.next(); ev.name != "status" {
		b.Fatalf("first event is %q, want status", ev.name)
	}
	return be
}

// readSSE parses the stream into events. The receive stamp is taken as soon as the data line is
// off the wire, before any decoding.
func readSSE(body io.Reader, out chan<- sseEvent) {
	defer close(out)
	r := bufio.NewReaderSize(body, 1<<16)
	var ev sseEvent
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line (a heavily coalesced delta): gather the rest of it.
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if err != nil {
			out <- sseEvent{err: err}
			return
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if ev.name != "" || ev.data != nil {
				out <- ev
			}
			ev = sseEvent{}
		case line[0] == ':':
			// comment (keep-alive)
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.name = string(value)
			case "data":
				ev.at = stamp()
				ev.data = append(ev.data, value...)
			}
		}
	}
}

// next returns the next event, failing the benchmark if the stream ends, reports a problem, or
// stalls.
func (be *benchEngine) next() sseEvent {
	be.b.Helper()
	select {
	case ev, ok := <-be.events:
		if !ok || ev.err != nil {
			be.b.Fatalf("event stream ended: %v", ev.err)
		}
		switch ev.name {
		case "reconnect", "error", "closed", "reset":
			be.b.Fatalf("unexpected %s event: %s", ev.name, ev.data)
		}
		return ev
	case <-time.After(stallGuard):
		be.b.Fatalf("no event for %v", stallGuard)
	}
	panic("unreachable")
}

func (be *benchEngine) post(path, body string, out any) int {
	be.b.Helper()
	req, err := http.NewRequest(http.MethodPost, be.srv.URL+path, strings.NewReader(body))
	if err != nil {
		be.b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := be.client.Do(req)
	if err != nil {
		be.b.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		be.b.Fatalf("POST %s: %v", path, err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			be.b.Fatalf("POST %s: %v: %s", path, err, raw)
		}
	}
	return resp.StatusCode
}

// sendTurn posts a user turn and checks that it was delivered.
func (be *benchEngine) sendTurn(text string) {
	be.b.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	var res conversation.SendResult
	if code := be.post("/conversations/"+be.conv+"/turns", string(body), &res); code != http.StatusAccepted || !res.Delivered {
		be.b.Fatalf("POST turn: status %d, delivered %v", code, res.Delivered)
	}
}

// awaitReply reads events until the durable reply of turn arrives and returns its receive
// stamp and its text. Every delta of the turn met on the way is handed to onDelta.
func (be *benchEngine) awaitReply(turn int64, onDelta func(ev sseEvent, text string)) (int64, string) {
	be.b.Helper()
	for {
		ev := be.next()
		switch ev.name {
		case "delta", "partial":
			var d struct {
				Turn int64  `json:"turn"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(ev.data, &d); err != nil {
				be.b.Fatalf("bad %s data: %v", ev.name, err)
			}
			if d.Turn != turn {
				be.b.Fatalf("%s of turn %d while waiting for turn %d", ev.name, d.Turn, turn)
			}
			if ev.name == "partial" {
				be.b.Fatalf("unexpected partial event on a stream that was attached before the turn")
			}
			if onDelta != nil {
				onDelta(ev, d.Text)
			}
		case "message":
			var e loomtype.Entry
			if err := json.Unmarshal(ev.data, &e); err != nil {
				be.b.Fatalf("bad message data: %v", err)
			}
			if e.Role != loomtype.RoleAssistant || e.Turn != turn {
				continue // the user's own record, or an earlier one
			}
			if e.Status != "complete" {
				be.b.Fatalf("turn %d ended %s (%s)", turn, e.Status, e.Reason)
			}
			text := ""
			if e.Text != nil {
				text = *e.Text
			}
			return ev.at, text
		}
	}
}

// deltaStats gathers the samples of the delta benchmark.
type deltaStats struct {
	lat       []time.Duration
	events    int // delta events received
	coalesced int // deltas that shared their event with at least one other delta
	// inReply counts the deltas that reached the client in the durable reply instead of a delta
	// event: the engine had not sent them when the reply was committed, and the reply supersedes
	// them (a delta is live only, never replayed; spec/http.md, The event stream). Their latency
	// is the reply's arrival, when the client had their text.
	inReply int

	// The pace the provider actually achieved: the span from the first to the last stamp of each
	// turn, over the gaps between them. A coarse system timer can make it slower than asked.
	first, last int64
	span        time.Duration
	gaps        int
}

// endTurn closes the pacing record of one turn of n deltas.
func (s *deltaStats) endTurn(n int) {
	if n > 1 {
		s.span += time.Duration(s.last - s.first)
		s.gaps += n - 1
	}
	s.first, s.last = 0, 0
}

// add records one delta event: every stamp inside it is one model delta.
func (s *deltaStats) add(b *testing.B, ev sseEvent, text string) int {
	n := s.stamps(b, ev.at, text)
	s.events++
	if n > 1 {
		s.coalesced += n
	}
	return n
}

// addReply records the deltas the durable reply, received at at, carried beyond those the
// delta events did: rest is the reply's text after theirs.
func (s *deltaStats) addReply(b *testing.B, at int64, rest string) int {
	n := s.stamps(b, at, rest)
	s.inReply += n
	return n
}

// stamps records the latency of each stamp in text, received at at, and returns their number.
func (s *deltaStats) stamps(b *testing.B, at int64, text string) int {
	n := 0
	for rest := text; rest != ""; {
		piece, after, ok := strings.Cut(rest, ";")
		if !ok {
			b.Fatalf("truncated stamp %q in delta", rest)
		}
		rest = after
		v, err := strconv.ParseInt(strings.TrimPrefix(piece, "t="), 10, 64)
		if err != nil {
			b.Fatalf("bad stamp %q in delta: %v", piece, err)
		}
		s.lat = append(s.lat, time.Duration(at-v))
		if s.first == 0 {
			s.first = v
		}
		s.last = v
		n++
	}
	return n
}

// BenchmarkDeltaLatency measures how long a text delta takes from the moment the provider
// hands it to the engine until an SSE client has read it off the socket. A delta the engine had
// not sent yet when the turn's durable reply was committed reaches the client in that reply
// instead (on a loaded machine, the last few): it counts, at the reply's arrival, and
// in-reply-% reports their share. Every delta must reach the client exactly once, in order.
func BenchmarkDeltaLatency(b *testing.B) {
	be := openBenchEngine(b, pacedProvider{every: deltaEvery})

	turn := int64(0)
	runTurn := func(n int, st *deltaStats) {
		turn++
		be.sendTurn(fmt.Sprintf("stream %d", n))
		got := 0
		var streamed strings.Builder
		at, reply := be.awaitReply(turn, func(ev sseEvent, text string) {
			got += st.add(b, ev, text)
			streamed.WriteString(text)
		})
		rest, ok := strings.CutPrefix(reply, streamed.String())
		if !ok {
			b.Fatalf("turn %d: the deltas received (%d bytes) are not the start of the reply (%d bytes)", turn, streamed.Len(), len(reply))
		}
		got += st.addReply(b, at, rest)
		if got != n {
			b.Fatalf("turn %d: received %d deltas, the provider sent %d", turn, got, n)
		}
		st.endTurn(n)
	}

	runTurn(warmupDeltas, &deltaStats{})
	var st deltaStats
	for b.Loop() {
		runTurn(deltaRunSize, &st)
	}

	reportPercentiles(b, st.lat)
	b.ReportMetric(100*float64(st.coalesced)/float64(len(st.lat)), "coalesced-%")
	b.ReportMetric(100*float64(st.inReply)/float64(len(st.lat)), "in-reply-%")
	b.ReportMetric(float64(st.events)/float64(b.N), "events/op")
	b.ReportMetric(micros(st.span/time.Duration(max(st.gaps, 1))), "pace-µs")
}

// BenchmarkTurnLatency measures a whole turn as a client sees it: from sending POST /turns to
// reading the durable message event of the reply, with a model that answers at once.
func BenchmarkTurnLatency(b *testing.B) {
	be := openBenchEngine(b, instant())

	turn := int64(0)
	var lat, post []time.Duration
	runTurn := func(record bool) {
		turn++
		start := stamp()
		be.sendTurn("hello")
		accepted := stamp()
		done, _ := be.awaitReply(turn, nil)
		if record {
			lat = append(lat, time.Duration(done-start))
			post = append(post, time.Duration(accepted-start))
		}
	}

	for range warmupTurns {
		runTurn(false)
	}
	for b.Loop() {
		for range turnRunSize {
			runTurn(true)
		}
	}

	reportPercentiles(b, lat)
	slices.Sort(post)
	b.ReportMetric(micros(percentile(post, 0.50)), "post-p50-µs")
	b.ReportMetric(micros(percentile(post, 0.99)), "post-p99-µs")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		b.Fatal("no samples")
	}
	slices.Sort(lat)
	b.ReportMetric(micros(percentile(lat, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99-µs")
	b.ReportMetric(micros(lat[len(lat)-1]), "max-µs")
	b.ReportMetric(float64(len(lat))/float64(b.N), "samples/op")
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
