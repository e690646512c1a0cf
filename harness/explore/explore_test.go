package explore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/explore"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestMain keeps the engine's log quiet: crashed instances log the writes they could not make.
func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	os.Exit(m.Run())
}

func referenceFactory(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
	return reference.OpenConfig(ctx, cfg)
}

// The plain dialogue explored at every one of its durable writes: every point is reached and
// nothing is lost, doubled or different.
func TestPlainDialogueAtEveryWrite(t *testing.T) {
	var progress bytes.Buffer
	rep, err := explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Dialogues: []string{"plain"},
		Dir: t.TempDir(), Progress: &progress, CompareLog: true})
	require.NoError(t, err)
	require.Len(t, rep.Dialogues, 1)
	d := rep.Dialogues[0]
	require.Empty(t, d.Findings, progress.String())
	require.Zero(t, rep.Findings)
	require.Greater(t, d.Writes, int64(6), "three turns take more than six durable writes")
	require.Len(t, d.Points, int(d.Writes), "every write is a crash point")
	for i, p := range d.Points {
		require.Equal(t, int64(i+1), p)
	}
	// Every point is reached but, on a loaded machine, the last few: the stream's frames after
	// the last answer are written as they come, in fewer writes when they come together.
	require.Equal(t, len(d.Points), d.Fired+len(d.Unreached), "every point fired or unreached")
	require.Greater(t, d.Fired, len(d.Points)/2, "most crash points are reached")
	for _, u := range d.Unreached {
		require.Greater(t, u, d.Writes/2, "only points near the end go unreached: %v", d.Unreached)
	}

	dir := t.TempDir()
	require.NoError(t, rep.WriteFiles(dir))
	var back explore.Report
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, d.Points, back.Dialogues[0].Points)
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	require.Contains(t, string(md), "| plain | ")
}

// broken wraps the reference so that every instance after the first (a restart) passes each
// request through change before the engine sees it.
// The engine sits in a named field, not embedded, so that its Serve (harness.Server) is not
// promoted: the kit must serve the changing handler, not the engine's own. Its crash hook
// (harness.WriteCrasher) is forwarded.
type broken struct {
	eng *reference.Engine
	h   http.Handler
}

func (b broken) Handler() http.Handler                   { return b.h }
func (b broken) Crash()                                  { b.eng.Crash() }
func (b broken) Close() error                            { return b.eng.Close() }
func (b broken) DurableWrites() int64                    { return b.eng.DurableWrites() }
func (b broken) CrashAfterWrite(n int64) <-chan struct{} { return b.eng.CrashAfterWrite(n) }

func brokenAfterRestart(change func(r *http.Request) (answer bool, rw func(http.ResponseWriter))) harness.Factory {
	var mu sync.Mutex
	opened := map[string]int{}
	return func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
		eng, err := reference.OpenConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		opened[cfg.DataDir]++
		restarted := opened[cfg.DataDir] > 1
		mu.Unlock()
		if !restarted {
			return eng, nil
		}
		inner := eng.Handler()
		return broken{eng: eng, h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if answer, write := change(r); answer {
				write(w)
				return
			}
			inner.ServeHTTP(w, r)
		})}, nil
	}
}

func isTurnPost(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/turns")
}

func kinds(rep *explore.Report) map[string]int {
	out := map[string]int{}
	for _, d := range rep.Dialogues {
		for _, f := range d.Findings {
			out[f.Kind]++
		}
	}
	return out
}

// A message steered to the session while a turn runs is picked up at the safe point, then sent:
// whatever write the reference dies right after (the pick-up's commit, before the send, among
// them), the message is in the history once and answered once.
func TestSteerDialogueAtEveryWrite(t *testing.T) {
	var progress bytes.Buffer
	rep, err := explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Dialogues: []string{"steer"},
		Dir: t.TempDir(), Progress: &progress})
	require.NoError(t, err)
	require.Len(t, rep.Dialogues, 1)
	d := rep.Dialogues[0]
	require.Empty(t, d.Findings, progress.String())
	require.Len(t, d.Points, int(d.Writes), "every write is a crash point")
}

// An instance that forgets the inbox's deduplication after a restart (a retried message id is
// taken for a new message) is caught: the retry of a message that was recorded but never
// acknowledged is delivered twice.
func TestForgettingTheDedupeAfterARestartIsCaught(t *testing.T) {
	f := brokenAfterRestart(func(r *http.Request) (bool, func(http.ResponseWriter)) {
		if isTurnPost(r) {
			b, _ := io.ReadAll(r.Body)
			var body map[string]any
			_ = json.Unmarshal(b, &body)
			if id, ok := body["messageId"].(string); ok {
				body["messageId"] = id + "-forgotten"
			}
			b, _ = json.Marshal(body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}
		return false, nil
	})
	rep, err := explore.Run(context.Background(), explore.Options{Factory: f, Dialogues: []string{"plain"}, Dir: t.TempDir()})
	require.NoError(t, err)
	doubled := 0
	for _, f := range rep.Dialogues[0].Findings {
		// The instance shows the new id in the record, so the history differs from the uncrashed
		// run's: a record more for the turn sent twice (and one for its reply), or, when the crash
		// came before the first answer, each message recorded under its new id. Which one depends
		// on where the crash fell and how far the restarted instance got, so any history finding
		// counts.
		if f.Kind == "history" {
			doubled++
		}
	}
	require.Positive(t, doubled, "findings: %v", rep.Dialogues[0].Findings)
	require.Positive(t, kinds(rep)["request"], "the doubled turn is sent to the model: a request the uncrashed run never made")
	for _, f := range rep.Dialogues[0].Findings {
		require.Equal(t, "plain", f.Dialogue)
		require.Positive(t, f.Point, "a finding names its crash point")
	}
}

// An instance that, after a restart, acknowledges a turn without recording it is caught: the
// acknowledged message is lost.
func TestAcknowledgingWithoutRecordingIsCaught(t *testing.T) {
	f := brokenAfterRestart(func(r *http.Request) (bool, func(http.ResponseWriter)) {
		if !isTurnPost(r) {
			return false, nil
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body["messageId"] != "m-3" {
			r.Body = io.NopCloser(strings.NewReader(mustJSON(body)))
			r.ContentLength = -1
			return false, nil
		}
		return true, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"messageId":"m-3","delivered":true}`)
		}
	})
	rep, err := explore.Run(context.Background(), explore.Options{Factory: f, Dialogues: []string{"plain"}, Dir: t.TempDir(),
		Wait: 2 * time.Second, MaxPoints: 3})
	require.NoError(t, err)
	d := rep.Dialogues[0]
	require.Positive(t, d.Lost, "findings: %v", d.Findings)
	for _, f := range d.Findings {
		if f.Kind == "lost" {
			require.Equal(t, "acknowledged message m-3 of alice (\"thanks, that is all\")", f.What)
			require.Equal(t, "none", f.Got)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// noHook is an instance without the crash hook.
type noHook struct{ e *reference.Engine }

func (n noHook) Handler() http.Handler { return n.e.Handler() }
func (n noHook) Crash()                { n.e.Crash() }
func (n noHook) Close() error          { return n.e.Close() }

func TestOptions(t *testing.T) {
	_, err := explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Dialogues: []string{"no-such"}})
	require.ErrorIs(t, err, explore.ErrUsage)
	_, err = explore.Run(context.Background(), explore.Options{})
	require.ErrorIs(t, err, explore.ErrUsage)
	_, err = explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Every: -1})
	require.ErrorIs(t, err, explore.ErrUsage)

	_, err = explore.Run(context.Background(), explore.Options{Dialogues: []string{"plain"}, Dir: t.TempDir(),
		Factory: func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
			e, err := reference.OpenConfig(ctx, cfg)
			return noHook{e}, err
		}})
	require.ErrorIs(t, err, harness.ErrHarness, "an instance without the crash hook cannot be explored")
	require.Contains(t, err.Error(), "WriteCrasher")
	require.False(t, errors.Is(err, harness.ErrNonConformant))
}

// Bounded runs: --every and --max-points choose fewer points, the last one always.
func TestBoundedPoints(t *testing.T) {
	rep, err := explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Dialogues: []string{"barge-in"},
		Dir: t.TempDir(), MaxPoints: 4})
	require.NoError(t, err)
	d := rep.Dialogues[0]
	require.Empty(t, d.Findings)
	require.Len(t, d.Points, 4)
	require.Equal(t, int64(1), d.Points[0])
	require.Equal(t, d.Writes, d.Points[3])
}

// A second crash during recovery: the restarted instance crashes right after its first write too,
// and the run still ends as the uncrashed one did.
func TestASecondCrashDuringRecovery(t *testing.T) {
	rep, err := explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Dialogues: []string{"rotation"},
		Dir: t.TempDir(), Then: 1, CompareLog: true})
	require.NoError(t, err)
	d := rep.Dialogues[0]
	require.Empty(t, d.Findings)
	require.Positive(t, d.FiredTwice, "some restarted instances reached their first write and crashed again")
	require.Equal(t, int64(1), rep.Then)
}

// Explicit points reproduce one run; points past the dialogue's writes are left out.
func TestExplicitPoints(t *testing.T) {
	rep, err := explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Dialogues: []string{"plain"},
		Dir: t.TempDir(), Points: []int64{2, 5, 100000}})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 5}, rep.Dialogues[0].Points)
	require.Equal(t, 2, rep.Dialogues[0].Fired)
	_, err = explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Points: []int64{0}})
	require.ErrorIs(t, err, explore.ErrUsage)
	_, err = explore.Run(context.Background(), explore.Options{Factory: referenceFactory, Then: -1})
	require.ErrorIs(t, err, explore.ErrUsage)
}

// An instance that, right after a restart, asks the model again for the first turn is caught
// wherever that turn's reply was recorded before the crash. Its request is sent before the kit's
// read of the history is served, so it waits at the front during the read; the reply the read
// shows is complete, so the instance cannot have recorded it itself in the meantime. The
// instance serves nothing more until the model has answered it, so the world has logged it
// before the kit reads the logs.
func TestAskingAgainAfterTheRestartIsCaught(t *testing.T) {
	var mu sync.Mutex
	opened := map[string]int{}
	f := func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
		eng, err := reference.OpenConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		opened[cfg.DataDir]++
		restarted := opened[cfg.DataDir] > 1
		mu.Unlock()
		if !restarted {
			return eng, nil
		}
		sent, answered := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(answered)
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(sent) }}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost,
				cfg.Model.BaseURL+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"how are the pumps?"}]}`))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
		inner := eng.Handler()
		read := false
		return broken{eng: eng, h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			first := !read && strings.HasSuffix(r.URL.Path, "/history")
			read = read || first
			mu.Unlock()
			wait := answered
			if first {
				wait = sent
			}
			select {
			case <-wait:
			case <-r.Context().Done():
				return
			}
			inner.ServeHTTP(w, r)
		})}, nil
	}
	rep, err := explore.Run(context.Background(), explore.Options{Factory: f, Dialogues: []string{"plain"}, Dir: t.TempDir(), MaxPoints: 3})
	require.NoError(t, err)
	d := rep.Dialogues[0]
	// The last point the crashed run reached: a write the uncrashed run made after its last answer
	// (a stream's slot given back as it closed) may come after the crashed run has ended.
	last := int64(0)
	for _, p := range d.Points {
		if !slices.Contains(d.Unreached, p) {
			last = p
		}
	}
	var asked []int64
	for _, f := range d.Findings {
		if f.Kind == "reasked" {
			require.Contains(t, f.What, `, after restart 1, asks for turn 1 ("how are the pumps?")`)
			asked = append(asked, f.Point)
		}
	}
	require.Contains(t, asked, last, "after a crash at the last write reached every reply was recorded; points %v, unreached %v, findings: %v", d.Points, d.Unreached, d.Findings)
	require.NotContains(t, asked, int64(1), "a crash at the first write comes before any reply")
}
