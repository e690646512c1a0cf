package kernel

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loomcheck/loomcheck/reference/store"
)

// LogCommit is what one committed transaction appended to one execution's log: its events in
// the order they were appended (a new generation's start after the end of the one before, when
// the transaction continued the execution as new). WatchLogCommits hands it out.
//
//	k.WatchLogCommits("c1", func(c kernel.LogCommit) { fmt.Println(c.ID, c.Len()) })
type LogCommit struct {
	// ID is the execution.
	ID  string
	evs []store.Event
}

// Events returns the commit's events decoded as ReadLog returns them, except Time, which is 0:
// the store stamps each event's time as it appends it and tells the writer nothing of it (read
// the log for the time). Each call decodes anew; the caller may keep the result.
//
//	for _, ev := range c.Events() { fmt.Println(ev.Gen, ev.Seq, ev.Kind) }
func (c LogCommit) Events() []LogEvent { return logEvents(c.evs) }

// Decisions returns the commit's events as Events does, except that a start's input is not
// decoded (Start is nil): a watcher that reads positions and decisions does not pay for a new
// generation's input, which holds the whole carry. Each call decodes anew.
//
//	for _, ev := range c.Decisions() { if ev.Decision != nil { fmt.Println(ev.Decision.ID) } }
func (c LogCommit) Decisions() []LogEvent {
	out := make([]LogEvent, len(c.evs))
	for i, ev := range c.evs {
		out[i] = decisionEvent(ev)
	}
	return out
}

// Len is the number of events the commit appended.
//
//	n := c.Len()
func (c LogCommit) Len() int { return len(c.evs) }

// WatchLogCommits calls fn after each transaction the kernel commits that appended to execution
// id's log, once per transaction, with what it appended there: after the commit is durable (the
// store's Update returned without an error) and before the writer goes on, on the writer's
// goroutine. Calls for one execution come in commit order, since its log has one writer at a
// time. fn must be quick and must neither block nor call the kernel (nor the returned stop); it
// must not change what it is given. A commit whose outcome the writer was not told (an Update that failed after the
// store may have committed, as a crash does) is never reported, and neither is one whose
// transaction began while nobody watched any execution's log (the kernel then notes nothing of
// what it appends), even when it becomes durable after this watch began: the first watch of a
// kernel, as a stream following a conversation right after a restart makes it, can miss a commit
// recovery has in flight. The log stays the only source of truth, and a watcher that finds a gap
// between two commits, or knows of none yet, reads the log. The returned function ends the watch
// (fn is not called once it has returned).
//
// Concurrency: safe for concurrent use, with any number of watchers of one execution.
//
//	stop := k.WatchLogCommits("c1", func(c kernel.LogCommit) { tail.add(c.Events()) })
//	defer stop()
func (k *Kernel) WatchLogCommits(id string, fn func(LogCommit)) (stop func()) {
	t, ok := k.st.(*commitTap)
	if !ok {
		return func() {}
	}
	return t.watch(id, fn)
}

// commitTap is the store as the kernel writes through it: every Update goes on to the store
// given to Open, and while anyone watches, what each committed Update appended to an
// execution's log is told to that execution's watchers. Nothing else changes: a capability of
// the store (store.Killer, store.Leases...) is to be asserted on the store given to Open.
type commitTap struct {
	store.Store
	n        atomic.Int64 // watchers registered: none, and an Update passes straight through
	mu       sync.RWMutex
	watchers map[string]map[*commitWatch]struct{}
}

type commitWatch struct {
	mu   sync.Mutex // held while fn runs, and by stop: once stop returns fn is not called
	fn   func(LogCommit)
	done bool
}

func newCommitTap(st store.Store) *commitTap {
	return &commitTap{Store: st, watchers: map[string]map[*commitWatch]struct{}{}}
}

func (t *commitTap) watch(id string, fn func(LogCommit)) func() {
	w := &commitWatch{fn: fn}
	t.mu.Lock()
	set := t.watchers[id]
	if set == nil {
		set = map[*commitWatch]struct{}{}
		t.watchers[id] = set
	}
	set[w] = struct{}{}
	t.n.Add(1)
	t.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			if set := t.watchers[id]; set != nil {
				delete(set, w)
				if len(set) == 0 {
					delete(t.watchers, id)
				}
			}
			t.n.Add(-1)
			t.mu.Unlock()
			w.mu.Lock()
			w.done = true
			w.mu.Unlock()
		})
	}
}

// Update runs fn through the store; while anyone watches, it notes what fn appended to
// execution logs and, once the commit is durable, tells their watchers.
func (t *commitTap) Update(ctx context.Context, fn func(store.Tx) error) error {
	return t.update(ctx, t.Store.Update, fn)
}

// UpdateRelaxed is Update as a relaxed commit of the store (store.UpdateRelaxed), told to the
// watchers once it is committed.
func (t *commitTap) UpdateRelaxed(ctx context.Context, fn func(store.Tx) error) error {
	return t.update(ctx, func(ctx context.Context, fn func(store.Tx) error) error {
		return store.UpdateRelaxed(t.Store, ctx, fn)
	}, fn)
}

// LossEpoch is the store's (store.LossEpoch).
func (t *commitTap) LossEpoch() int64 { return store.LossEpoch(t.Store) }

// SyncRelaxed is the store's (store.SyncRelaxed).
func (t *commitTap) SyncRelaxed(ctx context.Context) error { return store.SyncRelaxed(t.Store, ctx) }

// update runs fn through commit (the store's Update or its relaxed one), telling the watchers.
func (t *commitTap) update(ctx context.Context, commit func(context.Context, func(store.Tx) error) error, fn func(store.Tx) error) error {
	if t.n.Load() == 0 {
		return commit(ctx, fn)
	}
	var rec tapTx
	err := commit(ctx, func(tx store.Tx) error {
		rec = tapTx{Tx: tx} // a store may run fn again: only its last run committed
		return fn(&rec)
	})
	if err != nil || len(rec.appended) == 0 {
		return err
	}
	t.tell(rec.appended)
	return nil
}

// tell hands each execution's share of appended to its watchers, in the order it was appended.
func (t *commitTap) tell(appended []store.Event) {
	var ids []string
	byID := map[string][]store.Event{}
	for _, ev := range appended {
		id := strings.TrimPrefix(ev.Stream, logPrefix)
		if _, ok := byID[id]; !ok {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], ev)
	}
	for _, id := range ids {
		t.mu.RLock()
		ws := make([]*commitWatch, 0, len(t.watchers[id]))
		for w := range t.watchers[id] {
			ws = append(ws, w)
		}
		t.mu.RUnlock()
		c := LogCommit{ID: id, evs: byID[id]}
		for _, w := range ws {
			w.mu.Lock()
			if !w.done {
				w.fn(c)
			}
			w.mu.Unlock()
		}
	}
}

// logPrefix begins the store stream of every execution's log (logStream).
var logPrefix = logStream("")

// tapTx notes the events each successful Append adds to an execution's log.
type tapTx struct {
	store.Tx
	appended []store.Event
}

func (x *tapTx) Append(stream string, gen, expect int64, evs ...store.NewEvent) (int64, error) {
	head, err := x.Tx.Append(stream, gen, expect, evs...)
	if err != nil || !strings.HasPrefix(stream, logPrefix) {
		return head, err
	}
	first := head - int64(len(evs)) + 1
	for i, e := range evs {
		x.appended = append(x.appended, store.Event{Stream: stream, Gen: gen, Seq: first + int64(i), Kind: e.Kind, Data: e.Data})
	}
	return head, nil
}
