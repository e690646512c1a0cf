package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomcheck/loomcheck/reference"
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

// open10000: ready, and the first answered turn after it, on a data directory holding 10 000
// open conversations (each with one answered turn), beside the same on a data directory holding
// one: in-process (from before reference.Open until GET /.well-known/loom answers, then until a
// turn of one of the conversations is answered), in-process again with the whole store checked
// before Open returns (Options.CheckStoreAtOpen: how every store was opened before the check
// moved to the background), and a `loom` process started after a SIGKILL (exec to ready).
func open10000(e *env) ([]Row, error) {
	n := e.size(10000, 30)
	full, one := filepath.Join(e.dir, "full"), filepath.Join(e.dir, "one")
	var owners []owned
	var single owned
	for _, d := range []struct {
		dir string
		n   int
	}{{full, n}, {one, 1}} {
		t, _, err := e.openEngine(d.dir, "", nil)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		o, err := makeConversations(e.ctx, t, d.n, 32)
		if cerr := t.close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		e.logf("made %d conversations in %v", d.n, time.Since(start).Round(time.Millisecond))
		if d.dir == full {
			owners = o
		} else {
			single = o[0]
		}
	}
	base := "a data directory holding 1 conversation"
	ready := Row{Measure: fmt.Sprintf("in-process: Open to ready, %d open conversations", n), Unit: "ms", BaselineName: base,
		Goal: Goal{Text: "<= 50 ms", Of: "measured", AtMost: true, Bound: 50},
		Note: "from before reference.Open until GET /.well-known/loom answers 200 over loopback; the engine that made the data directory closed cleanly"}
	turn := Row{Measure: fmt.Sprintf("in-process: Open to the first answered turn, %d open conversations", n), Unit: "ms", BaselineName: base,
		Note: "the same runs, until a turn of one of the conversations (its SSE stream open) is answered"}
	whole := Row{Measure: fmt.Sprintf("in-process, store checked whole at Open: Open to ready, %d open conversations", n), Unit: "ms", BaselineName: base,
		Note: "Options.CheckStoreAtOpen: every row read before Open returns, as every store was opened before the check moved to the background"}
	for r := range e.rounds() {
		b, bt, err := readyIn(e, one, single, false)
		if err != nil {
			return nil, err
		}
		m, mt, err := readyIn(e, full, owners[r%len(owners)], false)
		if err != nil {
			return nil, err
		}
		w, _, err := readyIn(e, full, owners[(r+1)%len(owners)], true)
		if err != nil {
			return nil, err
		}
		ready.Baseline, ready.Measured = append(ready.Baseline, ms(b)), append(ready.Measured, ms(m))
		turn.Baseline, turn.Measured = append(turn.Baseline, ms(bt)), append(turn.Measured, ms(mt))
		whole.Baseline, whole.Measured = append(whole.Baseline, ms(b)), append(whole.Measured, ms(w))
		e.logf("round %d: ready 1 %v, %d %v (checked whole %v); first turn 1 %v, %d %v", r+1, b.Round(time.Microsecond), n,
			m.Round(time.Microsecond), w.Round(time.Microsecond), bt.Round(time.Microsecond), n, mt.Round(time.Microsecond))
	}
	rows := []Row{ready, turn, whole}
	lr, err := loomReady(e, full, one, n)
	var skip *skipError
	if errors.As(err, &skip) {
		e.logf("loom process: %v", err)
		return rows, nil
	}
	if err != nil {
		return nil, err
	}
	return append(rows, lr), nil
}

// readyIn opens an engine on dir and returns the time from before Open until the discovery
// document answers, and until a turn of c is answered; with whole the store is checked whole at
// Open.
func readyIn(e *env, dir string, c owned, whole bool) (ready, turn time.Duration, err error) {
	start := time.Now()
	t, _, err := e.openEngine(dir, "", nil, func(o *reference.Options) { o.CheckStoreAtOpen = whole })
	if err != nil {
		return 0, 0, err
	}
	defer t.close()
	code, _, _, err := t.do(e.ctx, c.user, http.MethodGet, "/.well-known/loom", "")
	if err != nil {
		return 0, 0, err
	}
	if code != http.StatusOK {
		return 0, 0, fmt.Errorf("GET /.well-known/loom answered %d", code)
	}
	ready = time.Since(start)
	cv := &conv{t: t, user: c.user, id: c.id}
	if err := cv.listen(e.ctx); err != nil {
		return 0, 0, err
	}
	defer cv.stop()
	if _, err := cv.turn(e.ctx, "hello again"); err != nil {
		return 0, 0, err
	}
	return ready, time.Since(start), nil
}

// loomReady is the exec to ready of a `loom` process after a SIGKILL on the data directory full,
// beside the same on one (each round's value the median of 3 starts of each, alternating).
func loomReady(e *env, full, one string, n int) (Row, error) {
	goBin, mod, err := moduleDir(e)
	if err != nil {
		return Row{}, err
	}
	if _, err := os.Stat(filepath.Join(mod, "cmd", "loom")); err != nil {
		return Row{}, &skipError{fmt.Sprintf("no cmd/loom in %s", mod)}
	}
	bin := filepath.Join(e.dir, "loom")
	if err := build(e.ctx, goBin, mod, bin, "./cmd/loom"); err != nil {
		return Row{}, err
	}
	args := map[string]func(string) []string{}
	for _, dir := range []string{full, one} {
		b, err := json.Marshal(engineConfig(dir, ""))
		if err != nil {
			return Row{}, err
		}
		cfg := dir + ".json"
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			return Row{}, err
		}
		args[dir] = func(addr string) []string { return []string{bin, "--config", cfg, "--listen", addr} }
		if _, err := execToReady(e.ctx, args[dir]); err != nil { // the measured starts follow a SIGKILL
			return Row{}, err
		}
	}
	row := Row{Measure: fmt.Sprintf("loom: exec to ready after a SIGKILL, %d open conversations", n), Unit: "ms",
		BaselineName: "a data directory holding 1 conversation", Goal: Goal{Text: "<= 1.25x (ready does not grow with the store)", Of: "ratio", AtMost: true, Bound: 1.25},
		Note: "each round's value is the median of 3 starts of each, alternating; ready is GET /.well-known/loom answering 200"}
	for r := range e.rounds() {
		var bs, ms3 []float64
		for range 3 {
			b, err := execToReady(e.ctx, args[one])
			if err != nil {
				return Row{}, err
			}
			m, err := execToReady(e.ctx, args[full])
			if err != nil {
				return Row{}, err
			}
			bs, ms3 = append(bs, ms(b)), append(ms3, ms(m))
		}
		row.Baseline, row.Measured = append(row.Baseline, Median(bs)), append(row.Measured, Median(ms3))
		e.logf("round %d: loom ready, 1 conversation %.1f ms, %d %.1f ms", r+1, Median(bs), n, Median(ms3))
	}
	return row, nil
}
