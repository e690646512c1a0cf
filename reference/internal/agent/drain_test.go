package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/model"
)

// lateReader plays a model client whose first words reached it before an abort but are handed on
// only some time after it (the reader waited for a processor). Its read fails once its context is
// cancelled, as a real connection's does, so words still unread then are lost. It stays a model of
// its own (not reference/internal/scriptmodel): what it says depends on the abort signal and on
// when its context ends after it.
type lateReader struct {
	sig     *agent.Signal
	entered chan struct{}
	before  string        // words read before the abort
	late    time.Duration // how long after the abort the words are read
	words   string
	finish  bool // the answer ends with the late words
}

func (p *lateReader) Complete(ctx context.Context, _ model.Request, onDelta func(string)) (model.Response, error) {
	onDelta(p.before)
	close(p.entered)
	<-p.sig.Done()
	select {
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	case <-time.After(p.late):
	}
	if p.words != "" {
		onDelta(p.words)
	}
	if p.finish {
		return model.Response{Content: p.before + p.words}, nil
	}
	<-ctx.Done() // a provider that keeps the stream open: only the cancel ends the call
	return model.Response{}, ctx.Err()
}

// drainRun runs one loop whose model call is aborted once it has read "Hello", and returns the
// result. Only "Hello" is passed on to viewers as a live delta.
func drainRun(t *testing.T, drain, late time.Duration, words string) agent.Result {
	return drainRunWith(t, &lateReader{before: "Hello", late: late, words: words}, drain)
}

func drainRunWith(t *testing.T, p *lateReader, drain time.Duration) agent.Result {
	sig := agent.NewSignal(nil)
	p.sig, p.entered = sig, make(chan struct{})
	var mu sync.Mutex
	var live []string
	r := newRig(t, func() agent.Config {
		return agent.Config{LoopID: "L", Provider: p, Signal: sig, AbortDrain: drain, OnDelta: func(s string) {
			mu.Lock()
			live = append(live, s)
			mu.Unlock()
		}}
	})
	r.start()
	<-p.entered
	sig.Fire()
	res := r.result()
	require.Equal(t, []string{"decision L#abort:turn:1", "decision L#turn:1:response"}, r.decisions())
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{p.before}, live, "only what was read before the abort is passed on")
	return res
}

// Words the model sent before an abort, read only after it, are kept in the partial text: the call
// goes on reading for the drain before it is cancelled. They are not passed on as live deltas, since
// they are read after the abort.
func TestAbortKeepsWordsReadDuringTheDrain(t *testing.T) {
	res := drainRun(t, 500*time.Millisecond, 5*time.Millisecond, " let me")
	require.Equal(t, agent.Result{Status: agent.Interrupted, Text: "Hello let me", Iterations: 1}, res)
}

// A negative drain cancels at once: words not yet read are lost.
func TestAbortWithoutDrainCancelsAtOnce(t *testing.T) {
	res := drainRun(t, -1, 2*time.Second, " let me")
	require.Equal(t, agent.Result{Status: agent.Interrupted, Text: "Hello", Iterations: 1}, res)
}

// The drain is bounded: a provider that keeps its stream open and sends nothing more is cancelled
// when the drain ends, and the run ends interrupted with what was read.
func TestAbortDrainEndsWithTheCancel(t *testing.T) {
	// The late words come at once after the abort and the drain is long enough for them on a
	// loaded machine: what is judged is that the call ends with the drain, not a race of timers.
	start := time.Now()
	res := drainRun(t, time.Second, 0, " let")
	require.Equal(t, agent.Result{Status: agent.Interrupted, Text: "Hello let", Iterations: 1}, res)
	require.GreaterOrEqual(t, time.Since(start), time.Second, "cancelled only when the drain ended")
}

// An answer that ends during the drain ended before the call was cancelled: it is recorded whole,
// and a run whose answer asks for no tool completes with it.
func TestAnswerEndingDuringTheDrainIsWhole(t *testing.T) {
	res := drainRunWith(t, &lateReader{before: "Hello", late: 5 * time.Millisecond, words: " world", finish: true}, time.Second)
	require.Equal(t, agent.Result{Status: agent.Complete, Text: "Hello world", Iterations: 1}, res)
}
