package harness_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// mute answers every event stream with its headers and then nothing, until the client leaves:
// a system far slower than the kit's step timeout.
type mute struct{ next http.Handler }

func (m mute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") {
		m.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// muteInstance serves the engine through mute. It does not offer harness.Server, so the kit serves
// Handler itself.
type muteInstance struct{ eng *reference.Engine }

func (i muteInstance) Handler() http.Handler { return mute{next: i.eng.Handler()} }
func (i muteInstance) Crash()                { i.eng.Crash() }
func (i muteInstance) Close() error          { return i.eng.Close() }

// TestStepTimeoutIsNamed: a step that waits out the step timeout fails as the system's failure
// and says that the kit's timeout ran out, how long it was, and how to raise it; a step that
// fails at once says nothing of the kind.
func TestStepTimeoutIsNamed(t *testing.T) {
	factory := func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
		eng, err := reference.OpenConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return muteInstance{eng: eng}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := harness.Execute(ctx, harness.Options{Factory: factory, Tags: "@req:ADR0122-D7-01",
		Concurrency: 2, StepTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, sc := range rep.Scenarios {
		if sc.Status == report.NotApplicable {
			continue
		}
		if sc.Status != report.Failed {
			t.Errorf("%s (%s): %s, want failed: %s", sc.ID, sc.Name, sc.Status, sc.Message)
			continue
		}
		failed++
		for _, want := range []string{"the kit's step timeout of 1.5s ran out", "--step-timeout", "LOOMCHECK_STEP_TIMEOUT"} {
			if !strings.Contains(sc.Message, want) {
				t.Errorf("%s (%s): the message %q does not say %q", sc.ID, sc.Name, sc.Message, want)
			}
		}
	}
	if failed == 0 {
		t.Fatal("no scenario ran")
	}

	plain := &harness.Failure{Op: "GET /x", Got: "404", Want: "200"}
	if got, want := plain.Error(), "GET /x: got 404, want 200"; got != want {
		t.Errorf("a failure without a timeout reads %q, want %q", got, want)
	}
	timed := &harness.Failure{Op: "GET /x", Got: "no answer", Want: "200", Timeout: 10 * time.Second}
	if got, want := timed.Error(), "GET /x: got no answer, want 200; "+harness.TimeoutNote(10*time.Second); got != want {
		t.Errorf("a failure after a timeout reads %q, want %q", got, want)
	}
}
