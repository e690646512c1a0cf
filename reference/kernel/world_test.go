package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// t0 is where the test clock starts.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is a Clock moved by hand.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []fakeWait
}

type fakeWait struct {
	at time.Time
	ch chan struct{}
}

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) At(t time.Time) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	if !f.now.Before(t) {
		close(ch)
		return ch, func() {}
	}
	f.waits = append(f.waits, fakeWait{at: t, ch: ch})
	return ch, func() {}
}

// Set moves the clock to t (never back) and fires the timers due by then.
func (f *fakeClock) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
	keep := f.waits[:0]
	for _, w := range f.waits {
		if !f.now.Before(w.at) {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	f.waits = keep
}

// world is a kernel running the script flow on a store that can be crashed and reopened. It
// reports where executions wait, and what effects their steps had.
type world struct {
	t     *testing.T
	path  string
	st    *sqlite.SQLite
	k     *kernel.Kernel
	clock *fakeClock

	mu      sync.Mutex
	events  map[string]chan string
	effects map[string][]string
	holds   map[string]chan struct{}
	dead    chan struct{}     // closed by crash
	armed   <-chan struct{}   // the store's crash point, when armed
	rename  map[string]string // op renames applied by the script flow (to provoke divergence)
	crashed map[*kernel.Kernel]bool
	react   func(w *world, id, site string)
	pending sync.WaitGroup
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, path: filepath.Join(t.TempDir(), "loom.db"), clock: newFakeClock(),
		effects: map[string][]string{}, holds: map[string]chan struct{}{}, rename: map[string]string{},
		crashed: map[*kernel.Kernel]bool{}}
	w.open()
	t.Cleanup(func() {
		w.mu.Lock()
		select {
		case <-w.dead:
		default:
			close(w.dead) // a step held when the test ends does not hold up the close
		}
		w.mu.Unlock()
		w.k.Close()
		w.st.Close()
		w.pending.Wait()
	})
	return w
}

func (w *world) open() {
	w.mu.Lock()
	w.events = map[string]chan string{}
	w.dead = make(chan struct{})
	w.mu.Unlock()
	st, err := sqlite.Open(context.Background(), w.path, sqlite.Options{})
	require.NoError(w.t, err)
	k, err := kernel.Open(context.Background(), st, kernel.Options{
		Flows: map[string]kernel.Flow{"script": w.script, "other": w.script},
		Clock: w.clock,
		BeforeRecovery: func(k *kernel.Kernel) {
			kernel.SetParkHook(k, w.event)
			// Reactions to recovered executions must reach this kernel, not the one before.
			w.mu.Lock()
			w.st, w.k = st, k
			w.mu.Unlock()
		},
	})
	require.NoError(w.t, err)
	w.mu.Lock()
	w.st, w.k = st, k
	w.mu.Unlock()
}

// kern is the kernel of now, for reactions that run while the world may reopen.
func (w *world) kern() *kernel.Kernel {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.k
}

// crash stops the engine as SIGKILL would.
func (w *world) crash() {
	w.mu.Lock()
	armed := w.armed
	w.armed = nil
	w.mu.Unlock()
	if armed != nil {
		select {
		case <-armed:
		case <-time.After(5 * time.Second):
			w.t.Error("the armed crash point was not reached")
		}
	}
	w.mu.Lock()
	w.crashed[w.k] = true
	w.mu.Unlock()
	w.st.Kill()
	w.mu.Lock()
	close(w.dead) // steps that ignore their context end with the process
	w.mu.Unlock()
	w.k.Close()
}

func (w *world) eventsOf(id string) chan string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.events[id]
	if ch == nil {
		ch = make(chan string, 256)
		w.events[id] = ch
	}
	return ch
}

func (w *world) event(id, site string) {
	w.eventsOf(id) <- site
	w.mu.Lock()
	react := w.react
	w.mu.Unlock()
	if react != nil {
		w.pending.Add(1)
		go func() {
			defer w.pending.Done()
			react(w, id, site)
		}()
	}
}

// next is the next place execution id waited at or its end.
func (w *world) next(id string) string {
	select {
	case s := <-w.eventsOf(id):
		return display(s)
	case <-time.After(5 * time.Second):
		return "(nothing happened)"
	}
}

// effect notes what a flow or its step did, unless the kernel it ran in was crashed: what
// goroutines of a crashed kernel still do (a step that ignored its context ending when the
// process died, and the flow going on from there) stands for nothing, since nothing runs after
// a SIGKILL. The replay after the reopen does it again, and that is noted.
func (w *world) effect(c *kernel.Context, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.crashed[c.Kernel()] {
		return
	}
	w.effects[c.ID()] = append(w.effects[c.ID()], what)
}

func (w *world) takeEffects(id string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.effects[id]
	delete(w.effects, id)
	return e
}

func (w *world) release(id, step string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.holds[id+"/"+step]
	if ok {
		close(ch)
		delete(w.holds, id+"/"+step)
	}
	return ok
}

// resolve turns "p/c1" into the id of child c1 of p (recursively).
func resolve(id string) string {
	i := strings.LastIndex(id, "/")
	if i < 0 {
		return id
	}
	return kernel.ChildID(resolve(id[:i]), id[i+1:])
}

var childSuffix = regexp.MustCompile(`~[0-9a-f]{16}`)

// display undoes resolve for readable output.
func display(s string) string { return childSuffix.ReplaceAllString(s, "") }

// errName names an error by its type, never its text.
func errName(err error) string {
	var d *loomtype.DivergenceError
	var ce *kernel.CanceledError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ce):
		return "canceled(" + ce.Reason + ")"
	case errors.As(err, &d):
		return "divergence"
	case errors.Is(err, kernel.ErrChildMismatch):
		return "child-mismatch"
	case errors.Is(err, kernel.ErrEnded):
		return "ended"
	case errors.Is(err, loomtype.ErrNotFound):
		return "not-found"
	case errors.Is(err, loomtype.ErrClosed):
		return "closed"
	case errors.Is(err, kernel.ErrNotRunning):
		return "not-running"
	case errors.Is(err, kernel.ErrStopped):
		return "stopped"
	case errors.Is(err, kernel.ErrBadSignal):
		return "bad-signal"
	case errors.Is(err, kernel.ErrBadID):
		return "bad-id"
	case errors.Is(err, loomtype.ErrAlreadyStarted):
		return "already-started"
	case errors.Is(err, kernel.ErrUnknownFlow):
		return "unknown-flow"
	}
	return fmt.Sprintf("untyped(%T)", err)
}

// script is a flow that runs the ops of its input, each "kind:arg:...":
//
//	decide:N  step:N  hold:N[:deaf] (a step that waits for release; deaf: ignoring its context)
//	holddecide:N (a decider that waits for release)  recv  sleep:N:DUR  signal:N
//	child:N[@FLOW]:OPS (OPS separated by ",")  await:N (a child)  awaitend:ID  sendto:ID:MSG:TEXT
//	safepoint:N  rotate (continue as new with the ops left)
//
// It returns the list of what each op gave. A cancel is returned (after noting it as an effect);
// any other typed error is noted in the output and the flow goes on.
func (w *world) script(c *kernel.Context, input json.RawMessage) (json.RawMessage, error) {
	var ops []string
	if err := json.Unmarshal(input, &ops); err != nil {
		return nil, err
	}
	var out []string
	for i, op := range ops {
		w.mu.Lock()
		if r, ok := w.rename[op]; ok {
			op = r
		}
		w.mu.Unlock()
		if op == "rotate" {
			carry, _ := json.Marshal(ops[i+1:])
			return nil, c.ContinueAsNew(carry)
		}
		res, err := w.do(c, op)
		if err != nil {
			var d *loomtype.DivergenceError
			if errors.Is(err, kernel.ErrCanceled) {
				w.effect(c, "saw "+errName(err)+" at "+op)
				return nil, err
			}
			if errors.As(err, &d) || errors.Is(err, kernel.ErrStopped) {
				return nil, err
			}
			res = errName(err)
		}
		out = append(out, op+" = "+res)
	}
	return json.Marshal(out)
}

func (w *world) do(c *kernel.Context, op string) (string, error) {
	a := strings.Split(op, ":")
	arg := func(i int) string {
		if i < len(a) {
			return a[i]
		}
		return ""
	}
	switch a[0] {
	case "decide":
		v, err := c.Decide(arg(1), func() (json.RawMessage, error) {
			w.effect(c, "decide "+arg(1))
			return json.Marshal(arg(1))
		})
		return string(v), err
	case "step":
		v, err := c.Execute(arg(1), func(context.Context) (json.RawMessage, error) {
			w.effect(c, "run "+arg(1))
			return json.Marshal("ok")
		})
		return string(v), err
	case "hold":
		v, err := c.Execute(arg(1), func(ctx context.Context) (json.RawMessage, error) {
			w.effect(c, "run "+arg(1))
			ch := make(chan struct{})
			w.mu.Lock()
			w.holds[c.ID()+"/"+arg(1)] = ch
			dead := w.dead
			w.mu.Unlock()
			w.event(c.ID(), "hold "+arg(1))
			select {
			case <-ch:
				return json.Marshal("released")
			case <-ctx.Done():
				if arg(2) == "deaf" {
					// A step that does not look at its context: only its release or the death
					// of the process ends it.
					select {
					case <-ch:
						return json.Marshal("released")
					case <-dead:
						return nil, errors.New("the process died")
					}
				}
				w.effect(c, "abort "+arg(1))
				return nil, ctx.Err()
			}
		})
		return string(v), err
	case "holddecide":
		v, err := c.Decide(arg(1), func() (json.RawMessage, error) {
			w.effect(c, "decide "+arg(1))
			// Telling the world that it holds is an effect: as Decide's contract asks, the
			// decider goes through Ctx first, which commits the decisions made before it.
			ctx := c.Ctx()
			ch := make(chan struct{})
			w.mu.Lock()
			w.holds[c.ID()+"/"+arg(1)] = ch
			w.mu.Unlock()
			w.event(c.ID(), "hold "+arg(1))
			select {
			case <-ch:
				return json.Marshal("released")
			case <-ctx.Done():
				w.effect(c, "abort "+arg(1))
				return nil, c.Ctx().Err()
			}
		})
		return string(v), err
	case "recv":
		m, err := c.Receive()
		return m.MessageID + " " + string(m.Payload), err
	case "sleep":
		d, _ := time.ParseDuration(arg(2))
		return "woke", c.Sleep(arg(1), d)
	case "signal":
		d, err := c.WaitSignal(arg(1))
		return fmt.Sprintf("key=%s seq=%d payload=%s", d.Key, d.Seq, d.Payload), err
	case "child":
		sub, _ := json.Marshal(strings.Split(strings.Join(a[2:], ":"), ","))
		name, flow, _ := strings.Cut(arg(1), "@")
		if flow == "" {
			flow = "script"
		}
		id, err := c.StartChild(kernel.ChildRequest{Name: name, Flow: flow, Input: sub})
		return display(id), err
	case "await", "awaitend":
		id := arg(1)
		if a[0] == "await" {
			id = kernel.ChildID(c.ID(), id)
		}
		in, err := c.AwaitEnd(id)
		return infoLine(in), err
	case "sendto":
		b, _ := json.Marshal(arg(3))
		return "sent", c.SendTo(resolve(arg(1)), arg(2), b)
	case "safepoint":
		msgs, err := c.SafePoint(arg(1))
		var took []string
		for _, m := range msgs {
			took = append(took, m.MessageID)
		}
		return "took [" + strings.Join(took, " ") + "]", err
	}
	return "", fmt.Errorf("script: unknown op %q", op)
}

func infoLine(in kernel.Info) string {
	s := "state=" + in.State
	var list []string
	if json.Unmarshal(in.Output, &list) == nil {
		s += " output=[" + display(strings.Join(list, " | ")) + "]"
	} else if len(in.Output) > 0 {
		s += " output=" + display(string(in.Output))
	}
	if in.Error != "" {
		s += " error=" + display(in.Error)
	}
	return s
}

// journal renders every generation of an execution's log, one line per event.
func (w *world) journal(id string) []string {
	ctx := context.Background()
	var out []string
	for gen := int64(0); ; gen++ {
		evs, err := w.st.ReadForward(ctx, kernel.LogStream(id), gen, 0, store.MaxRead)
		require.NoError(w.t, err)
		if len(evs) == 0 {
			return out
		}
		for _, ev := range evs {
			line := fmt.Sprintf("%d.%d %s", gen, ev.Seq, renderEvent(ev))
			out = append(out, display(line))
		}
	}
}

func renderEvent(ev store.Event) string {
	var m map[string]any
	_ = json.Unmarshal(ev.Data, &m)
	js := func(k string) string {
		v, ok := m[k]
		if !ok {
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	parts := []string{ev.Kind}
	add := func(keys ...string) {
		for _, k := range keys {
			if v := js(k); v != "" {
				parts = append(parts, k+"="+v)
			}
		}
	}
	switch ev.Kind {
	case "started":
		add("flow", "inboxCursor")
	case "consumed":
		add("seq", "messageId", "payload") // a consumed event names the inbox entry it took
	case "decision":
		add("id", "value")
	case "step.started":
		add("id")
	case "step.completed":
		add("id", "result")
	case "step.failed":
		add("id", "error")
	case "timer.set":
		due, _ := m["due"].(float64)
		parts = append(parts, "id="+js("id"), "due=+"+time.UnixMilli(int64(due)).Sub(t0).String())
	case "end.observed":
		info, _ := m["info"].(map[string]any)
		parts = append(parts, "id="+js("id"), fmt.Sprintf("state=%v", info["state"]))
	case "signal.taken":
		add("id", "key", "seq", "payload")
	case "safepoint":
		var sp struct {
			ID       string           `json:"id"`
			Messages []kernel.Message `json:"messages"`
		}
		_ = json.Unmarshal(ev.Data, &sp)
		var ids []string
		for _, msg := range sp.Messages {
			ids = append(ids, msg.MessageID)
		}
		parts = append(parts, "id="+sp.ID, "took=["+strings.Join(ids, " ")+"]")
	default:
		keys := make([]string, 0, len(m))
		for k := range m {
			if k != "id" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		add("id")
		add(keys...)
	}
	return strings.Join(parts, " ")
}
