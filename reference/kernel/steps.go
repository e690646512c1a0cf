package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/loomcheck/loomcheck/reference/store"
)

// StepFunc is a side effect. It must be safe to run again after a crash (at least once): use
// the execution and step ids to build an idempotency key.
type StepFunc func(ctx context.Context) (json.RawMessage, error)

// Execute runs a journaled step. Live, it records that the step started, runs fn and records its
// result or failure. Replaying, a completed step returns its recorded result (a failed one its
// recorded *StepError) without running fn; a step that started but never finished (the process
// stopped during it) runs again.
//
// Errors: a *StepError, a *loomtype.DivergenceError, a store error, or the kernel stopping.
//
//	out, err := c.Execute("lookup#1", func(ctx context.Context) (json.RawMessage, error) {
//		return callTool(ctx, "lookup", args)
//	})
func (c *Context) Execute(id string, fn StepFunc) (json.RawMessage, error) {
	res := c.ExecuteAll([]string{id}, []StepFunc{fn})
	return res[0].Value, res[0].Err
}

// StepResult is the outcome of one step of ExecuteAll.
type StepResult struct {
	Value json.RawMessage
	Err   error
}

// ExecuteAll runs several journaled steps concurrently. They are recorded as started in the
// given order, so a replay sees the same order whichever finishes first; results come back in
// that order too.
//
//	res := c.ExecuteAll([]string{"t1:0", "t1:1"}, []kernel.StepFunc{north, south})
func (c *Context) ExecuteAll(ids []string, fns []StepFunc) []StepResult {
	return c.ExecuteAllLimit(ids, fns, 0)
}

// ExecuteAllLimit is ExecuteAll with at most limit steps running at once (0: no bound). The
// steps that run are started in the given order: the next waits for a running one to end, so
// with a bound the first steps of the list are the first to run.
//
//	res := c.ExecuteAllLimit(ids, fns, 2)
func (c *Context) ExecuteAllLimit(ids []string, fns []StepFunc, limit int) []StepResult {
	out := make([]StepResult, len(ids))
	fail := func(err error) []StepResult {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	c.mu.Lock()
	if c.diverged != nil {
		c.mu.Unlock()
		return fail(c.diverged)
	}
	if err := c.frame(); err != nil {
		c.mu.Unlock()
		return fail(err)
	}
	toRun, err := c.stepsToRun(ids, out)
	if err != nil {
		c.mu.Unlock()
		return fail(err)
	}
	if len(toRun) > 0 {
		c.markLive()
		// Steps that were in flight when a cancel stopped them are not run again.
		if err := c.frame(); err != nil {
			for _, i := range toRun {
				out[i].Err = err
			}
			toRun = nil
		}
	}
	c.mu.Unlock()

	c.runSteps(ids, fns, toRun, out, limit)
	return out
}

// stepsToRun, with c.mu held, replays the steps ids from the log (the outcomes of those that
// ended go into out) and records as started those that start live; it returns the indexes of the
// steps to run.
func (c *Context) stepsToRun(ids []string, out []StepResult) ([]int, error) {
	toRun := make([]int, 0, len(ids))
	if c.replaying() {
		for i, id := range ids {
			if c.pos >= len(c.log) {
				// The rest started live below.
				if err := c.startSteps(ids[i:]); err != nil {
					return nil, err
				}
				for j := i; j < len(ids); j++ {
					toRun = append(toRun, j)
				}
				break
			}
			ev := c.log[c.pos]
			var s evStep
			if ev.Kind == kindStepStart {
				_ = json.Unmarshal(ev.Data, &s)
			}
			if ev.Kind != kindStepStart || s.ID != id {
				if err := c.mismatch("step " + id); err != nil {
					return nil, err
				}
				if err := c.startSteps(ids[i:]); err != nil {
					return nil, err
				}
				for j := i; j < len(ids); j++ {
					toRun = append(toRun, j)
				}
				break
			}
			c.pos++
			c.noteInner(id)
			if d, ok := c.done[id]; ok {
				var r evStep
				_ = json.Unmarshal(d.Data, &r)
				if d.Kind == kindStepFail {
					out[i].Err = &StepError{Step: id, Message: r.Error}
				} else {
					out[i].Value = r.Result
				}
				continue
			}
			toRun = append(toRun, i)
		}
	} else {
		if err := c.startSteps(ids); err != nil {
			return nil, err
		}
		for i := range ids {
			toRun = append(toRun, i)
		}
	}
	return toRun, nil
}

// runSteps runs the steps toRun of ids (fns[i] runs ids[i]), at most limit at once (0: no
// bound), puts their outcomes in out and returns once every one has ended.
func (c *Context) runSteps(ids []string, fns []StepFunc, toRun []int, out []StepResult, limit int) {
	var wg sync.WaitGroup
	var slots chan struct{}
	if limit > 0 && limit < len(toRun) {
		slots = make(chan struct{}, limit)
	}
	for _, i := range toRun {
		wg.Add(1)
		if slots != nil {
			slots <- struct{}{} // a slot frees when a running step ends, so this never waits forever
		}
		c.k.live.begin()
		run := func(i int) {
			defer wg.Done()
			defer c.k.live.end()
			if slots != nil {
				defer func() { <-slots }()
			}
			out[i] = c.finishStep(ids[i], fns[i])
		}
		if len(toRun) == 1 {
			run(i)
		} else {
			go run(i)
		}
	}
	wg.Wait()
}

// startSteps records steps as started, committed with every pending write before any of them
// runs (c.mu held).
func (c *Context) startSteps(ids []string) error {
	evs := make([]store.NewEvent, len(ids))
	for i, id := range ids {
		b, _ := json.Marshal(evStep{ID: id})
		evs[i] = store.NewEvent{Kind: kindStepStart, Data: b}
		c.noteInner(id)
	}
	return c.commit(nil, evs...)
}

func (c *Context) finishStep(id string, fn StepFunc) StepResult {
	v, err := runStep(c.x.effect, fn)
	if c.ctx.Err() != nil {
		// The kernel is stopping: record nothing; the step runs again on recovery.
		return StepResult{Err: ErrStopped}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelRequested() {
		// Cancelled in flight: the step's outcome is the cancel, recorded in its place.
		return StepResult{Err: c.cancelNow()}
	}
	if err != nil {
		b, _ := json.Marshal(evStep{ID: id, Error: err.Error()})
		if aerr := c.append(store.NewEvent{Kind: kindStepFail, Data: b}); aerr != nil {
			return StepResult{Err: aerr}
		}
		return StepResult{Err: &StepError{Step: id, Message: err.Error()}}
	}
	if len(v) == 0 {
		v = json.RawMessage("null")
	}
	if !json.Valid(v) {
		return StepResult{Err: fmt.Errorf("kernel: step %s: result is not JSON", id)}
	}
	b, _ := json.Marshal(evStep{ID: id, Result: v})
	if aerr := c.append(store.NewEvent{Kind: kindStepDone, Data: b}); aerr != nil {
		return StepResult{Err: aerr}
	}
	return StepResult{Value: v}
}

func runStep(ctx context.Context, fn StepFunc) (v json.RawMessage, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("step panicked: %v", r)
		}
	}()
	return fn(ctx)
}
