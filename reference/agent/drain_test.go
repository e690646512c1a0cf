package agent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/agent"
	"github.com/loomcheck/loomcheck/reference/model"
)

// lateReader plays a model client whose first words reached it before an abort but are handed on
// only some time after it (the reader waited for a processor). Its read fails once its context is
// cancelled, as a real connection's does, so words still unread then are lost.
type lateReader struct {
	sig     *agent.Signal
	entered chan struct{}
	late    time.Duration // how long after the abort the words are read
	words   string
}

func (p *lateReader) Complete(ctx context.Context, _ model.Request, onDelta func(string)) (model.Response, error) {
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
	<-ctx.Done() // a provider that keeps the stream open: only the cancel ends the call
	return model.Response{}, ctx.Err()
}

// drainRun runs one loop whose model call is aborted once it has started, and returns the result
// and every delta passed on to viewers.
func drainRun(t *testing.T, drain, late time.Duration, words string) (agent.Result, []string) {
	sig := agent.NewSignal(nil)
	p := &lateReader{sig: sig, entered: make(chan struct{}), late: late, words: words}
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
	return res, live
}

// Words the model sent before an abort, read only after it, are kept in the partial text: the call
// goes on reading for the drain before it is cancelled. They are not passed on as live deltas, since
// they are read after the abort.
func TestAbortKeepsWordsReadDuringTheDrain(t *testing.T) {
	res, live := drainRun(t, 500*time.Millisecond, 5*time.Millisecond, "Let me")
	require.Equal(t, agent.Result{Status: agent.Interrupted, Text: "Let me", Iterations: 1}, res)
	require.Empty(t, live)
}

// A negative drain cancels at once: words not yet read are lost.
func TestAbortWithoutDrainCancelsAtOnce(t *testing.T) {
	res, _ := drainRun(t, -1, 2*time.Second, "Let me")
	require.Equal(t, agent.Result{Status: agent.Interrupted, Iterations: 1}, res)
}

// The drain is bounded: a provider that keeps its stream open and sends nothing more is cancelled
// when the drain ends, and the run ends interrupted with what was read.
func TestAbortDrainEndsWithTheCancel(t *testing.T) {
	start := time.Now()
	res, _ := drainRun(t, 30*time.Millisecond, time.Millisecond, "Let")
	require.Equal(t, agent.Result{Status: agent.Interrupted, Text: "Let", Iterations: 1}, res)
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "cancelled only when the drain ended")
}
