package world

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is reported by a wait, Start or a scripting call on a World that was closed.
var ErrClosed = errors.New("world: closed")

// ErrScriptFull is returned by a scripting call that would make a queue longer than
// Options.MaxScript.
var ErrScriptFull = errors.New("world: script queue full")

// ErrStarted is returned by Start on a World that is already listening.
var ErrStarted = errors.New("world: already started")

// WaitError is the failure of a Wait method: the context ended (Err wraps ctx.Err()) or the World
// was closed (Err is ErrClosed) before the awaited condition held. What names the condition.
//
//	err := w.Model().WaitRequests(ctx, 2)
//	var we *world.WaitError
//	if errors.As(err, &we) { t.Fatalf("gave up waiting for %s", we.What) }
type WaitError struct {
	What string
	Err  error
}

func (e *WaitError) Error() string { return "world: waiting for " + e.What + ": " + e.Err.Error() }

// Unwrap returns the context's error or ErrClosed.
func (e *WaitError) Unwrap() error { return e.Err }

// signal is a broadcast guarded by its owner's mutex: a waiter takes the current channel, which is
// closed by the next fire.
type signal struct{ ch chan struct{} }

func (s *signal) wait() <-chan struct{} {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) fire() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// waitUntil blocks until cond (evaluated with mu held) is true, ctx ends or closing is closed.
func waitUntil(ctx context.Context, mu *sync.Mutex, sig *signal, closing <-chan struct{}, what string, cond func() bool) error {
	for {
		mu.Lock()
		if cond() {
			mu.Unlock()
			return nil
		}
		ch := sig.wait()
		mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return &WaitError{What: what, Err: ctx.Err()}
		case <-closing:
			// A last look: the condition may have become true just before the close.
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return nil
			}
			return &WaitError{What: what, Err: ErrClosed}
		}
	}
}

// journal is a bounded recording. Entry i is the i-th arrival (0-based) for as long as entries
// are kept; once an entry does not fit, later ones are counted but no longer kept, so kept entries
// always form a prefix of the arrivals.
type journal[T any] struct {
	items    []T
	total    int
	bytes    int64
	maxItems int
	maxBytes int64
}

func newJournal[T any](o Options) *journal[T] {
	return &journal[T]{maxItems: o.MaxRecords, maxBytes: o.MaxRecordBytes}
}

// add counts an arrival of the given size and keeps it when it fits. It returns its index and
// whether it was kept.
func (j *journal[T]) add(item T, size int64) (int, bool) {
	i := j.total
	j.total++
	if len(j.items) != i || len(j.items) >= j.maxItems || j.bytes+size > j.maxBytes {
		return i, false
	}
	j.items = append(j.items, item)
	j.bytes += size
	return i, true
}

// at returns a pointer to kept entry i, or nil.
func (j *journal[T]) at(i int) *T {
	if i < 0 || i >= len(j.items) {
		return nil
	}
	return &j.items[i]
}

func (j *journal[T]) snapshot() []T {
	out := make([]T, len(j.items))
	copy(out, j.items)
	return out
}
