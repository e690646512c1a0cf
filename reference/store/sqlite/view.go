package sqlite

import (
	"sync"

	"github.com/loomcheck/loomcheck/reference/store"
)

// The committed view: what the writer knows the database holds, kept for the readers so that the
// reads of the hot paths need no SQL. The store's handle is the only writer of its file (see
// heads.go), so what it committed stays true until it commits again; the view is changed by the
// writer only, and the writer holds it from before its COMMIT until the view holds what that
// COMMIT made (and before the subscribers are told): whenever a reader gets hold of the view it is
// exactly what the database holds, so a read of the view is never older than a read of the
// database made before it. A reader that finds the writer holding the view (a commit in progress)
// does not wait for it: it reads the database.
//
// It keeps, each bounded (two generations of at most viewKeys entries or viewBytes of values, the
// older dropped whole when the newer fills):
//
//   - heads: the committed head of each stream the writer appended to;
//   - meta: metadata values (and absences), written through by commits and filled by reads;
//   - tails: the last tailEvents events of each stream the writer appended to, so that a read
//     forward from near the head (an inbox read after a wake-up, a read that finds nothing new)
//     is answered from memory.
//
// A commit whose outcome is unknown empties the view (as it does the writer's heads). The rows'
// checksums are checked when a row is read from the database; a value in the view is the one the
// writer committed or a reader checked. Damage done to the files while the store is open is found
// by the next read of the database and by Open.
const (
	viewKeys       = 4096
	viewBytes      = 8 << 20
	tailEvents     = 8
	tailEventBytes = 16 << 10
)

// gen2 is a map bounded by two generations: entries go into cur, an entry read from old moves to
// cur, and when cur holds viewKeys entries or viewBytes of values a new cur begins and the older
// generation is dropped.
type gen2[K comparable, V any] struct {
	cur, old map[K]V
	curBytes int64
	size     func(V) int64
}

func (g *gen2[K, V]) get(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.old[k]
	if ok {
		delete(g.old, k)
		g.put(k, v)
	}
	return v, ok
}

func (g *gen2[K, V]) put(k K, v V) {
	if g.cur == nil {
		g.cur = make(map[K]V)
	}
	if prev, ok := g.cur[k]; ok {
		g.curBytes -= g.size(prev)
	} else if len(g.cur) >= viewKeys || g.curBytes >= viewBytes {
		g.old, g.cur, g.curBytes = g.cur, make(map[K]V), 0
	}
	delete(g.old, k)
	g.cur[k] = v
	g.curBytes += g.size(v)
}

func (g *gen2[K, V]) drop(k K) {
	if prev, ok := g.cur[k]; ok {
		g.curBytes -= g.size(prev)
		delete(g.cur, k)
	}
	delete(g.old, k)
}

// peek is get without moving the entry (for readers, who do not change the maps).
func (g *gen2[K, V]) peek(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.old[k]
	return v, ok
}

func (g *gen2[K, V]) reset() { g.cur, g.old, g.curBytes = nil, nil, 0 }

func (g *gen2[K, V]) len() int { return len(g.cur) + len(g.old) }

// metaEntry is a metadata value, or its absence.
type metaEntry struct {
	val     []byte
	present bool
}

// tail is the newest events of a stream, in order and without a gap; the last is the head.
type tail struct {
	evs []store.Event
}

func (t *tail) head() int64 { return t.evs[len(t.evs)-1].Seq }

type view struct {
	// cached says which streams' tails and which metadata keys the view keeps (Options.Cached).
	cached func(name string) bool
	// mu is held (written) by the writer from before a COMMIT until the view holds its outcome,
	// and read by readers, who never wait for it.
	mu sync.RWMutex
	// epoch changes with every change the writer makes to the view; a reader fills in what it
	// read from the database only when the epoch it saw before the read still holds. It starts
	// at 1: 0 is what a reader that could not look at the view holds, and never matches.
	epoch uint64
	heads gen2[headKey, int64]
	meta  gen2[string, metaEntry]
	tails gen2[headKey, *tail]
}

func newView(cached func(string) bool) *view {
	if cached == nil {
		cached = func(string) bool { return false }
	}
	return &view{
		cached: cached,
		epoch:  1,
		heads:  gen2[headKey, int64]{size: func(int64) int64 { return 0 }},
		meta:   gen2[string, metaEntry]{size: func(e metaEntry) int64 { return int64(len(e.val)) }},
		tails: gen2[headKey, *tail]{size: func(t *tail) int64 {
			var n int64
			for _, e := range t.evs {
				n += int64(len(e.Data) + len(e.Kind))
			}
			return n
		}},
	}
}

// head is the committed head of k, when the view knows it.
func (v *view) head(k headKey) (int64, bool) {
	if !v.mu.TryRLock() {
		return 0, false
	}
	defer v.mu.RUnlock()
	return v.heads.peek(k)
}

// metaOf is key's committed value (a copy) and whether it is present, when the view knows it
// (known); otherwise it returns the epoch to hand to fillMeta after reading the database.
func (v *view) metaOf(key string) (val []byte, present, known bool, epoch uint64) {
	if !v.cached(key) || !v.mu.TryRLock() { // a key not cached is never in the view
		return nil, false, false, 0
	}
	defer v.mu.RUnlock()
	e, ok := v.meta.peek(key)
	if !ok {
		return nil, false, false, v.epoch
	}
	if e.present {
		val = append(make([]byte, 0, len(e.val)), e.val...)
	}
	return val, e.present, true, 0
}

// fillMeta keeps what a reader read of key from the database, unless the writer changed the view
// since epoch (the value read may then be older than the one committed) or is changing it now.
func (v *view) fillMeta(key string, val []byte, present bool, epoch uint64) {
	if !v.cached(key) || !v.mu.TryLock() {
		return
	}
	defer v.mu.Unlock()
	if v.epoch != epoch {
		return
	}
	v.meta.put(key, metaEntry{val: append([]byte(nil), val...), present: present})
}

// forward answers a read of up to limit events of k after `after` when the view holds every
// one of them (ok); the events' data are copies.
func (v *view) forward(k headKey, after int64, limit int) (evs []store.Event, ok bool) {
	if !v.mu.TryRLock() {
		return nil, false
	}
	defer v.mu.RUnlock()
	t, found := v.tails.peek(k)
	if !found {
		return nil, false
	}
	after = max(after, 0)
	first := t.evs[0].Seq
	if after+1 < first {
		return nil, false
	}
	if after >= t.head() {
		return []store.Event{}, true
	}
	from := int(after + 1 - first)
	to := min(len(t.evs), from+limit)
	n := 0
	for _, e := range t.evs[from:to] {
		n += len(e.Data)
	}
	buf := make([]byte, 0, n)
	evs = make([]store.Event, 0, to-from)
	for _, e := range t.evs[from:to] {
		if len(e.Data) > 0 { // empty data reads back as nil, as it does from the database
			start := len(buf)
			buf = append(buf, e.Data...)
			e.Data = buf[start:len(buf):len(buf)]
		} else {
			e.Data = nil
		}
		evs = append(evs, e)
	}
	return evs, true
}

// applied is what one Update changed, to apply to the view once its transaction committed.
type applied struct {
	metas []metaPut
	evs   []store.Event
}

type metaPut struct {
	key string
	val []byte
	// gone: the key was deleted.
	gone bool
}

// hold takes the view for a COMMIT (writer only); commitHeld or resetHeld gives it back.
func (v *view) hold() {
	v.mu.Lock()
	v.epoch++
}

// commitHeld applies the changes of the Updates that committed together, in the order they ran,
// and the heads they left, then gives the view back (writer only, after hold).
func (v *view) commitHeld(changes []*applied, heads map[headKey]int64) {
	defer v.mu.Unlock()
	for _, c := range changes {
		for _, m := range c.metas {
			if v.cached(m.key) {
				v.meta.put(m.key, metaEntry{val: m.val, present: !m.gone})
			}
		}
		for _, e := range c.evs {
			if v.cached(e.Stream) {
				v.appendTail(headKey{e.Stream, e.Gen}, e)
			}
		}
	}
	for k, h := range heads {
		if k.gen < 0 {
			continue // a remembered scope's number (topKey), not a stream
		}
		v.heads.put(k, h)
		if t, ok := v.tails.get(k); ok && t.head() != h {
			v.tails.drop(k) // cannot happen: every append is in evs; the view keeps nothing unsure
		}
	}
}

// appendTail adds e, the event after k's head, to k's tail (v.mu held).
func (v *view) appendTail(k headKey, e store.Event) {
	if len(e.Data)+len(e.Kind) > tailEventBytes {
		v.tails.drop(k)
		return
	}
	var evs []store.Event
	if t, ok := v.tails.get(k); ok && t.head() == e.Seq-1 {
		keep := t.evs
		if len(keep) >= tailEvents {
			keep = keep[len(keep)-tailEvents+1:]
		}
		evs = make([]store.Event, 0, len(keep)+1)
		evs = append(evs, keep...)
	}
	v.tails.put(k, &tail{evs: append(evs, e)})
}

// drop forgets what the view knows of k (writer only).
func (v *view) drop(k headKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.epoch++
	v.heads.drop(k)
	v.tails.drop(k)
}

// resetHeld forgets everything, then gives the view back (writer only, after hold): a commit's
// outcome is not known.
func (v *view) resetHeld() {
	defer v.mu.Unlock()
	v.heads.reset()
	v.meta.reset()
	v.tails.reset()
}
