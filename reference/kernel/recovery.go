package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"
)

func (k *Kernel) register(in Info, fl Flow) *execution {
	e := &execution{id: in.ID, flow: fl, info: in, done: make(chan struct{}),
		loaded: make(chan struct{}), caught: make(chan struct{})}
	k.running[in.ID] = e
	return e
}

// launch registers a new execution and starts it (k.mu held).
func (k *Kernel) launch(in Info, fl Flow) *execution {
	e := k.register(in, fl)
	k.startLocked(e)
	return e
}

// startLocked starts e's goroutine unless it was started or the kernel has stopped (k.mu held).
func (k *Kernel) startLocked(e *execution) {
	if e.launched || k.stopped {
		return
	}
	e.launched = true
	k.wg.Add(1)
	go k.run(e)
}

// wake starts execution id now if it is open and has not been started yet (adopting it from its
// record when the background has not reached it: see find). It returns the execution, nil for
// one that is not running here.
func (k *Kernel) wake(ctx context.Context, id string) *execution {
	e := k.find(ctx, id)
	if e == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.startLocked(e)
	return e
}

// find returns execution id if it runs here or is open and waits to be replayed, nil otherwise.
// Until the background has walked every execution record, an id the kernel does not know yet is
// looked up by its key, and adopted when its record says it is open: a request, or an execution
// awaiting another, never takes an open execution the walk has not reached for one that ended.
// A record that cannot be read leaves the answer nil; the caller's own read of it reports that.
func (k *Kernel) find(ctx context.Context, id string) *execution {
	k.mu.Lock()
	e := k.running[id]
	_, known := k.infos[id]
	settled := e != nil || known || k.listed || k.stopped || k.unreadable[id]
	k.mu.Unlock()
	if settled {
		return e
	}
	raw, ok, err := k.st.Meta(ctx, metaKey(id))
	if err != nil || !ok {
		return nil
	}
	in, ok := k.decodeRecord(id, raw)
	if !ok {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.adoptLocked(in)
}

// decodeRecord decodes the stored record of execution id; one that does not decode is reported
// once (whether the walk or a lookup met it first) and answers false.
func (k *Kernel) decodeRecord(id string, raw []byte) (Info, bool) {
	var in Info
	err := json.Unmarshal(raw, &in)
	if err == nil {
		return in, true
	}
	k.mu.Lock()
	again := k.unreadable[id]
	k.unreadable[id] = true
	k.mu.Unlock()
	if !again {
		k.log.Error("kernel: unreadable execution record", "key", metaKey(id), "err", err)
	}
	return Info{}, false
}

// adoptLocked takes in, an execution's stored record, into the kernel unless the kernel knows
// the execution already (its record may then be older than what the kernel holds), and registers
// it when it is open: the background replays it, or whatever needs it first. It returns the
// execution registered under in.ID, nil for none (k.mu held).
func (k *Kernel) adoptLocked(in Info) *execution {
	if e := k.running[in.ID]; e != nil {
		return e
	}
	if _, known := k.infos[in.ID]; known || k.stopped {
		return nil
	}
	k.infos[in.ID] = in
	if in.State != StateOpen {
		return nil
	}
	fl, ok := k.opt.Flows[in.Flow]
	if !ok {
		k.log.Error("kernel: open execution of an unknown flow is not recovered", "id", in.ID, "flow", in.Flow)
		return nil
	}
	e := k.register(in, fl)
	k.adopted = append(k.adopted, e)
	if k.listed {
		// The background's queue is made: nothing else would start it.
		k.startLocked(e)
	}
	return e
}

// adoptStored is the background's walk of every execution record: each open execution the kernel
// does not know yet is adopted.
func (k *Kernel) adoptStored() error {
	kvs, err := k.st.MetaPrefix(k.ctx, metaPrefix)
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		if k.ctx.Err() != nil {
			return k.ctx.Err()
		}
		id := strings.TrimPrefix(kv.Key, metaPrefix)
		if k.here(id) != nil {
			continue
		}
		in, ok := k.decodeRecord(id, kv.Val)
		if !ok {
			continue
		}
		k.mu.Lock()
		k.adoptLocked(in)
		k.mu.Unlock()
	}
	return nil
}

// listStored walks the execution records until one walk succeeds (adoptStored), and reports
// whether it did. A walk that fails for another reason than damage (a database that does not
// answer, say) is tried again, each wait twice the last up to listRetryMax, until the kernel
// stops: an open execution nothing names must still be recovered. A damaged record refuses its
// execution, as a damaged log does, and ends the walks: the store refuses what it holds from then
// on, and the other open executions are adopted by key as something names them.
func (k *Kernel) listStored() bool {
	for wait := listRetryMin; ; wait = min(2*wait, listRetryMax) {
		err := k.adoptStored()
		if err == nil {
			return true
		}
		if k.ctx.Err() != nil {
			return false
		}
		var ce *store.CorruptError
		if errors.As(err, &ce) {
			if strings.HasPrefix(ce.Key, metaPrefix) {
				k.refuse(strings.TrimPrefix(ce.Key, metaPrefix), err)
			}
			k.log.Error("kernel: the execution records are damaged; an open execution is recovered when something names it", "err", err)
			return false
		}
		k.log.Error("kernel: cannot list the execution records; trying again", "err", err, "wait", wait)
		select {
		case <-k.ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// The waits between two walks of the execution records that failed.
const (
	listRetryMin = 50 * time.Millisecond
	listRetryMax = 5 * time.Second
)

// need wakes execution id and waits until its log has been read, so that an execution found
// damaged is refused before anything is delivered to it. It waits for nothing else.
func (k *Kernel) need(ctx context.Context, id string) {
	e := k.wake(ctx, id)
	if e == nil {
		return
	}
	select {
	case <-e.loaded:
	case <-e.done:
	case <-ctx.Done():
	case <-k.ctx.Done():
	}
}

// Recover makes sure execution id runs: an open execution Open found that has not been replayed
// yet is replayed now, ahead of the background recovery. It returns once the execution has
// caught up with its log (it runs live, waits, or has ended), at once for one that already
// has, and does nothing for an execution that has ended or is unknown.
//
// Errors: ctx's, ErrStopped.
//
// Concurrency: safe for concurrent use.
//
//	if err := k.Recover(ctx, "c1"); err != nil { return err }
func (k *Kernel) Recover(ctx context.Context, id string) error {
	e := k.wake(ctx, id)
	if e == nil {
		return nil
	}
	select {
	case <-e.caught:
		return nil
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-k.ctx.Done():
		return ErrStopped
	}
}

// recoverAll is the background recovery: it walks the execution records and adopts every open
// execution (listStored), orders them (scanOrder), then replays them, at most
// Options.RecoveryWorkers at once, each worker moving on once the execution it started has
// caught up with its log.
func (k *Kernel) recoverAll() {
	defer k.wg.Done()
	defer close(k.recovered)
	if !k.listStored() {
		return
	}
	k.mu.Lock()
	k.listed = true
	all := append([]*execution(nil), k.adopted...)
	for _, e := range all {
		if !e.launched {
			k.dormant = append(k.dormant, e)
		}
	}
	k.mu.Unlock()
	k.scanOrder()
	var wg sync.WaitGroup
	for range k.opt.RecoveryWorkers {
		wg.Go(func() {
			for {
				e := k.takeDormant()
				if e == nil {
					return
				}
				if h := k.opt.BeforeBackgroundRecovery; h != nil {
					h(e.id)
				}
				k.mu.Lock()
				k.startLocked(e)
				k.mu.Unlock()
				select {
				case <-e.caught:
				case <-e.done:
				case <-k.ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	// What something needed was started outside the workers: it may still be replaying.
	for _, e := range all {
		select {
		case <-e.caught:
		case <-e.done:
		case <-k.ctx.Done():
			return
		}
	}
}

// takeDormant returns the next execution for the background to recover, nil when none is left
// or the kernel has stopped.
func (k *Kernel) takeDormant() *execution {
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.next < len(k.dormant) && !k.stopped {
		e := k.dormant[k.next]
		k.dormant[k.next] = nil
		k.next++
		if !e.launched {
			return e
		}
	}
	return nil
}

// scanOrder reads the newest event of each dormant execution's log and inbox and orders the
// background's queue by them: first those whose inbox received something after the log's last
// write (a message accepted and not taken yet), then the most recently active. An execution
// whose log ends with a durable timer set is started when the timer falls due, if the background
// has not reached it by then. The scan reads two events an execution; what it cannot read
// leaves the order as it is (the replay reports it).
func (k *Kernel) scanOrder() {
	k.mu.Lock()
	queue := append([]*execution(nil), k.dormant...)
	gens := make(map[*execution]int64, len(queue))
	for _, e := range queue {
		gens[e] = e.info.Gen
	}
	k.mu.Unlock()
	type rank struct {
		waiting bool
		active  int64
	}
	ranks := make(map[*execution]rank, len(queue))
	for _, e := range queue {
		if k.ctx.Err() != nil {
			return
		}
		var r rank
		logEvs, err := k.st.ReadBackward(k.ctx, logStream(e.id), gens[e], math.MaxInt64, 1)
		if err != nil || len(logEvs) == 0 {
			continue
		}
		last := logEvs[0]
		r.active = last.Time
		if in, err := k.st.ReadBackward(k.ctx, inboxStream(e.id), 0, math.MaxInt64, 1); err == nil && len(in) == 1 {
			r.waiting = in[0].Time > last.Time
			r.active = max(r.active, in[0].Time)
		}
		ranks[e] = r
		if last.Kind == kindTimerSet {
			var t evTimer
			if json.Unmarshal(last.Data, &t) == nil {
				k.wakeAt(e, time.UnixMilli(t.Due))
			}
		}
	}
	sort.SliceStable(queue, func(i, j int) bool {
		a, b := ranks[queue[i]], ranks[queue[j]]
		if a.waiting != b.waiting {
			return a.waiting
		}
		return a.active > b.active
	})
	k.mu.Lock()
	if k.next == 0 {
		k.dormant = queue
	}
	k.mu.Unlock()
}

// wakeAt starts e when the kernel's clock reaches t, unless it has been started by then.
func (k *Kernel) wakeAt(e *execution, t time.Time) {
	ch, release := k.clock().At(t)
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer release()
		select {
		case <-ch:
			k.mu.Lock()
			k.startLocked(e)
			k.mu.Unlock()
		case <-e.done:
		case <-k.ctx.Done():
		}
	}()
}
