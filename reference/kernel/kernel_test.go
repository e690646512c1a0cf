package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var alice = loomtype.Identity{Tenant: "acme", Actor: "alice"}

// rig is a kernel on a store in a temporary directory that can be crashed and reopened.
type rig struct {
	t     *testing.T
	path  string
	st    *sqlite.SQLite
	k     *kernel.Kernel
	flows map[string]kernel.Flow
	mode  kernel.DivergenceMode
	divs  chan *loomtype.DivergenceError
}

func newRig(t *testing.T, flows map[string]kernel.Flow) *rig {
	r := &rig{t: t, path: filepath.Join(t.TempDir(), "loom.db"), flows: flows, divs: make(chan *loomtype.DivergenceError, 8)}
	r.open()
	t.Cleanup(func() { r.k.Close(); r.st.Close() })
	return r
}

func (r *rig) open() {
	st, err := sqlite.Open(context.Background(), r.path, sqlite.Options{})
	require.NoError(r.t, err)
	k, err := kernel.Open(context.Background(), st, kernel.Options{Flows: r.flows, Divergence: r.mode,
		OnDivergence: func(d *loomtype.DivergenceError) { r.divs <- d }})
	require.NoError(r.t, err)
	r.st, r.k = st, k
}

// crash stops the engine as SIGKILL would: nothing written after this instant lands.
func (r *rig) crash() {
	r.st.Kill()
	r.k.Close()
}

func (r *rig) restart() { r.crash(); r.open() }

// transcript renders the log of one generation as readable lines.
func (r *rig) transcript(id string, gen int64) []string {
	evs, err := r.st.ReadForward(context.Background(), kernel.LogStream(id), gen, 0, 0)
	require.NoError(r.t, err)
	// A consumed event names the inbox entry it took; the transcript shows that entry's payload.
	inbox, err := r.st.ReadForward(context.Background(), kernel.InboxStream(id), 0, 0, 0)
	require.NoError(r.t, err)
	var out []string
	for _, e := range evs {
		var m map[string]any
		_ = json.Unmarshal(e.Data, &m)
		if seq, ok := m["seq"].(float64); ok && e.Kind == "consumed" && m["payload"] == nil && int(seq) >= 1 && int(seq) <= len(inbox) {
			var in map[string]any
			_ = json.Unmarshal(inbox[int(seq)-1].Data, &in)
			m["payload"] = in["payload"]
		}
		line := e.Kind
		if id, ok := m["id"].(string); ok {
			line += " " + id
		}
		if v, ok := m["value"]; ok {
			b, _ := json.Marshal(v)
			line += " = " + string(b)
		}
		if v, ok := m["result"]; ok {
			b, _ := json.Marshal(v)
			line += " = " + string(b)
		}
		if p, ok := m["payload"]; ok {
			b, _ := json.Marshal(p)
			line += " " + string(b)
		}
		out = append(out, line)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// echo answers each message with a recorded decision; "rotate" continues as new, "stop" ends.
func echo(calls *atomic.Int64) kernel.Flow {
	return func(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
		n := 0
		if len(input) > 0 && string(input) != "null" {
			_ = json.Unmarshal(input, &n)
		}
		for {
			m, err := c.Receive()
			if err != nil {
				return nil, err
			}
			n++
			var text string
			_ = json.Unmarshal(m.Payload, &text)
			switch text {
			case "stop":
				return json.Marshal(n)
			case "rotate":
				b, _ := json.Marshal(n)
				return nil, c.ContinueAsNew(b)
			}
			if _, err := c.Decide(fmt.Sprintf("o%d:reply", n), func() (json.RawMessage, error) {
				calls.Add(1)
				return json.Marshal("re: " + text)
			}); err != nil {
				return nil, err
			}
		}
	}
}

func send(t *testing.T, k *kernel.Kernel, id, msgID, text string) bool {
	t.Helper()
	b, _ := json.Marshal(text)
	ok, err := k.Send(context.Background(), id, alice, msgID, b)
	require.NoError(t, err)
	return ok
}

func TestStartOnce(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	in, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: loomtype.Identity{Actor: "mallory"}})
	require.ErrorIs(t, err, loomtype.ErrAlreadyStarted)
	require.Equal(t, alice, in.Principal, "the first start owns the id")
	_, err = r.k.Start(context.Background(), kernel.StartRequest{ID: "c2", Flow: "nope"})
	require.ErrorIs(t, err, kernel.ErrUnknownFlow)
}

func TestDedupeIsSenderBound(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	require.True(t, send(t, r.k, "c1", "m1", "hi"))
	require.False(t, send(t, r.k, "c1", "m1", "hi"), "a retry by the same sender is delivered once")
	b, _ := json.Marshal("hi")
	ok, err := r.k.Send(context.Background(), "c1", loomtype.Identity{Tenant: "acme", Actor: "bob"}, "m1", b)
	require.NoError(t, err)
	require.True(t, ok, "the same messageId from another sender is a new message")
	waitFor(t, "two replies", func() bool { return calls.Load() == 2 })
}

func TestReplayServesDecisionsOnce(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	send(t, r.k, "c1", "m2", "two")
	waitFor(t, "two replies", func() bool { return len(r.transcript("c1", 0)) == 5 })
	before := r.transcript("c1", 0)
	r.restart()
	send(t, r.k, "c1", "m3", "three")
	waitFor(t, "third reply", func() bool { return len(r.transcript("c1", 0)) == 7 })
	require.Equal(t, []string{
		"started",
		`consumed "one"`,
		`decision o1:reply = "re: one"`,
		`consumed "two"`,
		`decision o2:reply = "re: two"`,
		`consumed "three"`,
		`decision o3:reply = "re: three"`,
	}, r.transcript("c1", 0))
	require.Equal(t, before, r.transcript("c1", 0)[:5], "the replayed prefix is unchanged")
	require.False(t, send(t, r.k, "c1", "m1", "one"), "dedupe survives a restart")
}

func TestContinueAsNewCarriesCursorAndDedupe(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	send(t, r.k, "c1", "m2", "rotate")
	send(t, r.k, "c1", "m3", "three")
	waitFor(t, "reply in generation 1", func() bool { return len(r.transcript("c1", 1)) == 3 })
	info, err := r.k.Info(context.Background(), "c1")
	require.NoError(t, err)
	require.EqualValues(t, 1, info.Gen)
	require.Equal(t, []string{"started", `consumed "three"`, `decision o3:reply = "re: three"`}, r.transcript("c1", 1),
		"the carry numbered the message 3 and the cursor did not re-deliver 'one'")
	require.False(t, send(t, r.k, "c1", "m1", "one"), "a retry from generation 0 is still deduplicated")
	r.restart()
	send(t, r.k, "c1", "m4", "stop")
	info, err = r.k.Await(context.Background(), "c1")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State)
	require.JSONEq(t, "4", string(info.Output))
	require.EqualValues(t, 2, calls.Load(), "no decision was made twice")
}

func TestInFlightStepRunsAgain(t *testing.T) {
	var runs atomic.Int64
	release := make(chan struct{})
	started := make(chan struct{}, 4)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		a, err := c.Execute("a", func(ctx context.Context) (json.RawMessage, error) {
			runs.Add(1)
			return json.Marshal("A")
		})
		if err != nil {
			return nil, err
		}
		b, err := c.Execute("b", func(ctx context.Context) (json.RawMessage, error) {
			runs.Add(1)
			started <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return json.Marshal("B")
		})
		if err != nil {
			return nil, err
		}
		return json.Marshal(string(a) + string(b))
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	<-started
	r.restart()
	<-started
	close(release)
	info, err := r.k.Await(context.Background(), "x")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State)
	require.EqualValues(t, 3, runs.Load(), "a ran once (served on replay); b ran twice (in flight at the crash)")
	require.Equal(t, []string{"started", "step.started a", `step.completed a = "A"`, "step.started b", `step.completed b = "B"`, "completed"},
		r.transcript("x", 0))
}

func TestFailedStepIsServedNotRerun(t *testing.T) {
	var runs atomic.Int64
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := c.Execute("a", func(ctx context.Context) (json.RawMessage, error) {
			runs.Add(1)
			return nil, errors.New("boom")
		})
		var se *kernel.StepError
		if !errors.As(err, &se) {
			return nil, fmt.Errorf("want a StepError, got %v", err)
		}
		_, err = c.Receive() // park
		return nil, err
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "the failure", func() bool { return len(r.transcript("x", 0)) == 3 })
	r.restart()
	send(t, r.k, "x", "go", "go")
	info, err := r.k.Await(context.Background(), "x")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State)
	require.EqualValues(t, 1, runs.Load(), "the recorded failure was served, not run again")
}

func TestDivergenceFailsTheExecution(t *testing.T) {
	var calls atomic.Int64
	flows := map[string]kernel.Flow{"echo": echo(&calls)}
	r := newRig(t, flows)
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	send(t, r.k, "c1", "m1", "one")
	waitFor(t, "reply", func() bool { return len(r.transcript("c1", 0)) == 3 })
	// A new version of the flow names its decision differently.
	flows["echo"] = func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := c.Receive(); err != nil {
			return nil, err
		}
		_, err := c.Decide("answer#1", func() (json.RawMessage, error) { return json.Marshal("x") })
		return nil, err
	}
	r.restart()
	d := <-r.divs
	require.Equal(t, &loomtype.DivergenceError{Execution: "c1", Generation: 0, Index: 1, Want: "decision o1:reply", Got: "decision answer#1"}, d)
	info, err := r.k.Await(context.Background(), "c1")
	require.NoError(t, err)
	require.Equal(t, kernel.StateFailed, info.State)
	require.True(t, strings.Contains(info.Error, "diverged"))
}

func TestExecuteAllRecordsOrderAndServesById(t *testing.T) {
	var runs sync.Map
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		ids := []string{"t0", "t1", "t2"}
		fns := make([]kernel.StepFunc, 3)
		for i := range fns {
			fns[i] = func(ctx context.Context) (json.RawMessage, error) {
				v, _ := runs.LoadOrStore(i, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
				return json.Marshal(i * 10)
			}
		}
		res := c.ExecuteAll(ids, fns)
		sum := 0
		for _, r := range res {
			if r.Err != nil {
				return nil, r.Err
			}
			var n int
			_ = json.Unmarshal(r.Value, &n)
			sum += n
		}
		if _, err := c.Receive(); err != nil {
			return nil, err
		}
		return json.Marshal(sum)
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	waitFor(t, "three completions", func() bool { return len(r.transcript("x", 0)) == 7 })
	require.Equal(t, []string{"started", "step.started t0", "step.started t1", "step.started t2"}, r.transcript("x", 0)[:4])
	r.restart()
	send(t, r.k, "x", "go", "go")
	info, err := r.k.Await(context.Background(), "x")
	require.NoError(t, err)
	require.JSONEq(t, "30", string(info.Output))
	for i := 0; i < 3; i++ {
		v, _ := runs.Load(i)
		require.EqualValues(t, 1, v.(*atomic.Int64).Load(), "step %d ran once", i)
	}
}

func TestIDsMustBeUTF8(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "c\xff1", Flow: "echo", Principal: alice})
	require.ErrorIs(t, err, kernel.ErrBadID, "an id that JSON could not keep intact would not be recovered")
}

// Without a bound, every step runs at once: each waits until all of them have started, which
// steps run one or two at a time would never see (they give up after a while and fail).
func TestExecuteAllRunsEveryStepAtOnce(t *testing.T) {
	const n = 4
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	info := stepValues(t, func(c *kernel.Context) []kernel.StepResult {
		ids := make([]string, n)
		fns := make([]kernel.StepFunc, n)
		for i := range fns {
			ids[i] = fmt.Sprintf("t%d", i)
			fns[i] = func(ctx context.Context) (json.RawMessage, error) {
				arrived.Done()
				select {
				case <-all:
					return json.Marshal(i)
				case <-time.After(5 * time.Second):
					return nil, errors.New("the other steps did not start while this one ran")
				}
			}
		}
		return c.ExecuteAll(ids, fns)
	})
	require.Equal(t, kernel.StateCompleted, info.State, info.Error)
	require.JSONEq(t, "[0,1,2,3]", string(info.Output))
}

// stepValues runs execution "x" of a flow that runs the steps run starts and ends with their
// values (each an int), in order, or fails with the first step error; it returns the end.
func stepValues(t *testing.T, run func(c *kernel.Context) []kernel.StepResult) kernel.Info {
	t.Helper()
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		out := []int{}
		for _, r := range run(c) {
			if r.Err != nil {
				return nil, r.Err
			}
			var v int
			_ = json.Unmarshal(r.Value, &v)
			out = append(out, v)
		}
		return json.Marshal(out)
	}
	r := newRig(t, map[string]kernel.Flow{"f": flow})
	_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: "x", Flow: "f", Principal: alice})
	require.NoError(t, err)
	info, err := r.k.Await(context.Background(), "x")
	require.NoError(t, err)
	return info
}

// With a bound, the steps run at most limit at once and start in the order given: the first
// steps of the list are the first to run, whichever goroutine the scheduler favours. The first
// limit steps stay in flight until they all are, so the bound is reached whatever the load.
func TestExecuteAllLimitBoundsAndStartsInOrder(t *testing.T) {
	for _, limit := range []int{1, 2} {
		var mu sync.Mutex
		var started []int
		inFlight, most := 0, 0
		together := make(chan struct{}) // closed once limit steps are in flight
		info := stepValues(t, func(c *kernel.Context) []kernel.StepResult {
			ids := []string{"t0", "t1", "t2", "t3", "t4"}
			fns := make([]kernel.StepFunc, len(ids))
			for i := range fns {
				fns[i] = func(ctx context.Context) (json.RawMessage, error) {
					mu.Lock()
					started = append(started, i)
					inFlight++
					most = max(most, inFlight)
					if inFlight == limit && most == limit && len(started) == limit {
						close(together)
					}
					mu.Unlock()
					if i < limit {
						select {
						case <-together:
						case <-time.After(5 * time.Second):
							return nil, fmt.Errorf("step %d: the first %d steps were never in flight together", i, limit)
						}
					}
					mu.Lock()
					inFlight--
					mu.Unlock()
					return json.Marshal(i)
				}
			}
			return c.ExecuteAllLimit(ids, fns, limit)
		})
		require.Equal(t, kernel.StateCompleted, info.State, info.Error)
		require.JSONEq(t, "[0,1,2,3,4]", string(info.Output), "results in the given order")
		mu.Lock()
		require.Equal(t, limit, most, "at most %d at once, and the bound is reached", limit)
		if limit == 1 {
			require.Equal(t, []int{0, 1, 2, 3, 4}, started, "one at a time, in the given order")
		} else {
			require.ElementsMatch(t, []int{0, 1}, started[:2], "the first %d of the list are the first to run", limit)
		}
		mu.Unlock()
	}
}
