package perf

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// open1000: the time from Open to the first answered turn, on a data directory holding 1000
// open conversations (each with one answered turn; the engine that made them was closed
// cleanly), beside the same on an empty data directory (Open, start a conversation, answer a
// turn). Each run opens, serves one turn over loopback HTTP and closes.
func open1000(e *env) ([]Row, error) {
	n := e.size(1000, 20)
	full := filepath.Join(e.dir, "full")
	t, _, err := e.openEngine(full, "", nil)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	owners, err := makeConversations(e.ctx, t, n, 32)
	if cerr := t.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	e.logf("made %d conversations in %v", n, time.Since(start).Round(time.Millisecond))
	row := Row{Measure: fmt.Sprintf("Open to first answered turn, %d open conversations", n), Unit: "ms",
		BaselineName: "empty data directory", Goal: Goal{Text: "<= 200 ms", Of: "measured", AtMost: true, Bound: 200},
		Note: "each run: reference.Open, serve on loopback, open the conversation's SSE stream, POST a turn, read its reply; the empty one also starts its conversation"}
	for r := range e.rounds() {
		b, err := firstTurn(e, filepath.Join(e.dir, fmt.Sprintf("empty-%d", r)), nil)
		if err != nil {
			return nil, err
		}
		m, err := firstTurn(e, full, &owners[r%len(owners)])
		if err != nil {
			return nil, err
		}
		row.Baseline = append(row.Baseline, ms(b))
		row.Measured = append(row.Measured, ms(m))
		e.logf("round %d: empty %v, %d conversations %v", r+1, b.Round(time.Microsecond), n, m.Round(time.Microsecond))
	}
	return []Row{row}, nil
}

// owned is a conversation and its owner.
type owned struct {
	id   string
	user int
}

// makeConversations starts n conversations on t, k at a time, each with one answered turn, its
// stream closed after it.
func makeConversations(ctx context.Context, t *target, n, k int) ([]owned, error) {
	out := make([]owned, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, k)
	for range k {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := t.newConv(ctx, i)
				if err == nil {
					err = c.listen(ctx)
				}
				if err == nil {
					_, err = c.turn(ctx, "hello")
					c.stop()
				}
				if err != nil {
					errs <- err
					return
				}
				out[i] = owned{c.id, c.user}
			}
		})
	}
	wg.Wait()
	close(errs)
	return out, <-errs
}

// firstTurn opens an engine on dir, has one turn of conversation c answered (of a new one when
// c is nil) and closes the engine; it returns the time from before Open to the reply's arrival.
func firstTurn(e *env, dir string, c *owned) (time.Duration, error) {
	start := time.Now()
	t, _, err := e.openEngine(dir, "", nil)
	if err != nil {
		return 0, err
	}
	defer t.close()
	var cv *conv
	if c == nil {
		if cv, err = t.newConv(e.ctx, 0); err != nil {
			return 0, err
		}
	} else {
		cv = &conv{t: t, user: c.user, id: c.id}
	}
	if err := cv.listen(e.ctx); err != nil {
		return 0, err
	}
	defer cv.stop()
	if _, err := cv.turn(e.ctx, "hello again"); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}
