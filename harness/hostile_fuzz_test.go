package harness_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// hostile wraps a system's handler and spoils exactly one of its answers: the at-th, counted from
// 0 over the requests one instance serves.
type hostile struct {
	next http.Handler
	n    *atomic.Int64
	at   int64
	mode uint8
	body []byte
}

var hostileStatuses = []int{200, 201, 202, 204, 302, 400, 404, 409, 429, 500, 503, 999}

func (h hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.n.Add(1)-1 != h.at {
		h.next.ServeHTTP(w, r)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/events") {
		// The stream is the fuzzed bytes, then it ends.
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(h.body)
		return
	}
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	status, body := rec.Code, rec.Body.Bytes()
	switch h.mode % 4 {
	case 0: // another body
		body = h.body
	case 1: // another status and body
		status, body = hostileStatuses[int(h.mode/4)%len(hostileStatuses)], h.body
	case 2: // another Content-Type
		w.Header().Set("Content-Type", string(h.body))
	case 3: // a body cut short
		if len(body) > 0 {
			body = body[:int(h.mode/4)%len(body)]
		}
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// hostileInstance holds the engine in a named field, not embedded: an embedded engine would
// promote its Serve (harness.Server), and the kit would then serve the engine's own handler
// instead of the spoiling one.
type hostileInstance struct {
	eng *reference.Engine
	h   http.Handler
}

func (i hostileInstance) Handler() http.Handler { return i.h }
func (i hostileInstance) Crash()                { i.eng.Crash() }
func (i hostileInstance) Close() error          { return i.eng.Close() }

// hostileTags select scenarios that walk the main routes: turns and history, the uniform 404 on
// every route, a stream attached mid-reply, malformed cursors.
var hostileTags = []string{"@req:ADR0122-D1-01", "@req:ADR0122-D8-01", "@req:ADR0122-D7-02", "@req:ADR0122-D3-04"}

// FuzzHostileSUT runs a few scenarios against the reference with one answer spoiled (its body,
// status, Content-Type or length replaced by fuzzed values; a stream replaced by fuzzed bytes).
// Invariant: the kit blames the system or passes it, never itself: every scenario ends passed,
// failed (a *Failure) or not applicable, never as a harness error, and the kit never panics. A
// discovery document that cannot be read stops the run with a clean error (exit 2).
//
// Seeds: each scenario with its first answers spoiled in each way, testdata/fuzz. With -short
// each scenario gets one seed. Under the race detector each gets its first seed and one of the
// others in turn: each seed runs a few scenarios, which the race detector makes several times
// dearer, and the race detector still watches every way of spoiling an answer. The pass of the
// test command without the race detector (make test RACE=1, and a step of .ci/run) runs every
// seed; testdata/fuzz runs in every pass.
func FuzzHostileSUT(f *testing.F) {
	for i := range hostileTags {
		f.Add(uint8(i), uint8(1), uint8(0), []byte(`{"error":"not found"}`))
		if testing.Short() {
			continue
		}
		others := []struct {
			at, mode uint8
			body     []byte
		}{
			{3, 1, []byte(`[]`)},
			{2, 2, []byte(`text/html`)},
			{4, 3, []byte(``)},
			{6, 0, []byte("event: message\nid: 0.1\ndata: {\"cursor\":7}\n\n")},
		}
		for j, o := range others {
			if !raceEnabled || j == i%len(others) {
				f.Add(uint8(i), o.at, o.mode, o.body)
			}
		}
	}
	f.Fuzz(func(t *testing.T, tag, at, mode uint8, body []byte) {
		factory := func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
			eng, err := reference.OpenConfig(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return hostileInstance{eng: eng, h: hostile{next: eng.Handler(), n: new(atomic.Int64), at: int64(at % 24), mode: mode, body: body}}, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		rep, err := harness.Execute(ctx, harness.Options{Factory: factory, Tags: hostileTags[int(tag)%len(hostileTags)],
			Concurrency: 1, StepTimeout: 2 * time.Second})
		if err != nil {
			// The run could not be made (a discovery document that cannot be read, or one that
			// claims no profile, so the filtered run would judge nothing): a clean error of the
			// run, never a panic of the kit.
			clean := errors.Is(err, harness.ErrHarness) || errors.Is(err, harness.ErrUsage)
			if !clean || strings.Contains(err.Error(), "panic") {
				t.Fatalf("run: %v", err)
			}
			return
		}
		for _, sc := range rep.Scenarios {
			switch sc.Status {
			case report.Passed, report.Failed, report.NotApplicable:
			default:
				t.Fatalf("%s (%s) with answer %d spoiled (mode %d, %q): %s: %s", sc.ID, sc.Name, at%24, mode, body, sc.Status, sc.Message)
			}
		}
	})
}
