package live

import (
	"slices"
	"sync"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// The tail of a conversation is the newest stretch of its log that recent commits appended, kept
// in memory for the conversation's streams while anyone follows it: a stream whose cursor lies
// within the tail reads what comes after it from here, without reading the store. The log stays
// the only source of truth: the tail holds only what a commit reported after it was durable, in
// the log's own order with no gap, and a stream whose cursor lies before the tail's start (or
// anywhere else outside it) reads the log instead. A commit that does not follow the tail's end
// (one was missed) starts the tail over from that commit.

// Default bounds of a tail (TailLimits).
const (
	// DefaultTailRecords is how many log events one conversation's tail keeps.
	DefaultTailRecords = 512
	// DefaultTailBytes is how many bytes (as Record.Size counts them) one tail keeps.
	DefaultTailBytes = 256 << 10
	// DefaultTailTotalBytes is how many bytes all the tails of one hub keep together.
	DefaultTailTotalBytes = 64 << 20
)

// TailLimits bound the tails of a hub: each keeps at most Records records and Bytes bytes, and
// all of them together at most TotalBytes bytes. Past a bound the oldest records of the tail
// being added to go first; a tail always keeps its newest record, however big. A value of 0 or
// less takes the default.
//
//	hub.SetTailLimits(live.TailLimits{Records: 1024, Bytes: 1 << 20})
type TailLimits struct {
	Records    int
	Bytes      int
	TotalBytes int
}

func (l TailLimits) withDefaults() TailLimits {
	if l.Records <= 0 {
		l.Records = DefaultTailRecords
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultTailBytes
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = DefaultTailTotalBytes
	}
	return l
}

// Record is one event of a conversation's log as its tail keeps it: where it lies, and the
// transcript entry it holds, if it is one (nil for every other event of the log).
//
//	add([]live.Record{{At: loomtype.Cursor{Gen: 0, Seq: 7}, Entry: &e}})
type Record struct {
	At    loomtype.Cursor
	Entry *loomtype.Entry
}

// recordOverhead is what a record costs beside its entry's variable parts: the record, its slot
// and the entry's fixed fields.
const recordOverhead = 48

// Size is what r counts against a tail's byte bound: a fixed overhead, and for an entry its
// fixed fields and the bytes of its strings.
//
//	n := live.Record{At: c, Entry: &e}.Size()
func (r Record) Size() int {
	n := recordOverhead
	if e := r.Entry; e != nil {
		n += 256 + len(e.Cursor) + len(e.Reason) + len(e.ErrorID) + len(e.MessageID) + len(e.TurnExecutionID) + len(e.Role) + len(e.Status)
		if e.Text != nil {
			n += len(*e.Text)
		}
		if e.Asker != nil {
			n += 48 + len(e.Asker.Tenant) + len(e.Asker.Actor) + len(e.Asker.OnBehalfOf)
		}
		for _, c := range e.Classes {
			n += 16 + len(c)
		}
	}
	return n
}

// tail is one conversation's tail and its followers.
type tail struct {
	h  *Hub
	id string

	mu    sync.Mutex
	recs  []Record
	sizes []int
	bytes int
	// prev is the position just before recs[0] when known (prevOK): a cursor equal to it reads
	// from the tail's start.
	prev   loomtype.Cursor
	prevOK bool
	subs   map[*Follower]struct{}
	lim    TailLimits
	// gone: the last follower closed; nothing is added any more.
	gone bool
	// noted is what the conversation's writer noted for its next commits (note.go).
	noted any

	// stop ends what feeds the tail (guarded by h.mu, with the tail's place in h.tails).
	stop func()
}

// Follower is one stream's handle on a conversation's tail: where the stream can read what
// recent commits appended, and a wake-up after each one. Close it when the stream ends. Safe for
// concurrent use.
//
//	f := hub.Follow("c1", start)
//	defer f.Close()
type Follower struct {
	t      *tail
	wake   chan struct{}
	closed sync.Once
}

// Follow returns a follower of conversation id's tail, making the tail on its first follower:
// start is called then (and only then), with the function that adds a commit's records to the
// tail, and returns what stops feeding it, which is called once the last follower has closed.
// The tail starts empty: it holds what is added after it was made. A commit whose records the
// feeder cannot give is added with none (every commit appends at least one event): the tail then
// empties and wakes its followers, which read that commit from the log.
//
// Concurrency: safe for concurrent use; start runs on the caller's goroutine, with no lock of
// the hub held, and add may be called from any goroutine, one commit at a time.
//
//	f := hub.Follow("c1", func(add func([]live.Record)) func() {
//		return k.WatchLogCommits("c1", func(c kernel.LogCommit) { add(records(c)) })
//	})
//	defer f.Close()
func (h *Hub) Follow(id string, start func(add func([]Record)) (stop func())) *Follower {
	f := &Follower{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	t := h.tails[id]
	fresh := t == nil
	if fresh {
		t = &tail{h: h, id: id, subs: map[*Follower]struct{}{}, lim: h.limits.withDefaults()}
		if h.tails == nil {
			h.tails = map[string]*tail{}
		}
		h.tails[id] = t
	}
	t.mu.Lock()
	t.subs[f] = struct{}{}
	t.mu.Unlock()
	f.t = t
	h.mu.Unlock()
	if fresh {
		stop := start(t.add)
		h.mu.Lock()
		if h.tails[id] == t {
			t.stop = stop
			stop = nil
		}
		h.mu.Unlock()
		if stop != nil { // every follower closed while it started
			stop()
		}
	}
	return f
}

// Close ends the follower; the tail goes (and stops being fed) with its last follower. Closing
// again does nothing.
//
//	f := hub.Follow("c1", start)
//	defer f.Close()
func (f *Follower) Close() {
	f.closed.Do(func() {
		t, h := f.t, f.t.h
		h.mu.Lock()
		t.mu.Lock()
		delete(t.subs, f)
		last := len(t.subs) == 0
		t.mu.Unlock()
		var stop func()
		if last && h.tails[t.id] == t {
			delete(h.tails, t.id)
			stop, t.stop = t.stop, nil
		}
		h.mu.Unlock()
		if stop != nil {
			stop()
		}
		if last {
			t.mu.Lock()
			h.tailBytes.Add(-int64(t.bytes))
			t.recs, t.sizes, t.bytes, t.prevOK, t.gone = nil, nil, 0, false, true
			t.mu.Unlock()
		}
	})
}

// Wake receives a value (coalesced) after each commit added to the tail, or left out of it.
//
//	<-f.Wake()
//	entries, next, done, ok := f.Read(cursor, 100)
func (f *Follower) Wake() <-chan struct{} { return f.wake }

// Read returns the entries after cursor from that the tail holds, oldest first, at most limit
// of them (limit <= 0: all), with next, the position of the last record read (from when none),
// and done, whether the read reached the tail's end (false when it stopped at limit, even on
// the last record, as a read of the log does). ok is false, with nothing read, when from
// does not lie within the tail (before its start, after its end, or nowhere when it holds
// nothing): the caller reads the log. The entries are copies; what they point to is shared and
// must not be changed.
//
//	entries, next, done, ok := f.Read(cursor, 100)
//	if !ok { entries, next, done, err = cv.ReadForward(ctx, id, cursor, 100) }
func (f *Follower) Read(from loomtype.Cursor, limit int) (entries []loomtype.Entry, next loomtype.Cursor, done, ok bool) {
	t := f.t
	t.mu.Lock()
	defer t.mu.Unlock()
	i, ok := t.after(from)
	if !ok {
		return nil, from, false, false
	}
	next = from
	for ; i < len(t.recs); i++ {
		r := t.recs[i]
		next = r.At
		if r.Entry != nil {
			entries = append(entries, *r.Entry)
			if len(entries) == limit {
				return entries, next, false, true // as a read of the log stops at its limit
			}
		}
	}
	return entries, next, true, true
}

// after returns the index of the first record after cursor c, when c lies within the tail (t.mu
// held).
func (t *tail) after(c loomtype.Cursor) (int, bool) {
	if len(t.recs) == 0 {
		return 0, false
	}
	if t.prevOK && c == t.prev {
		return 0, true
	}
	i, found := slices.BinarySearchFunc(t.recs, c, func(r Record, c loomtype.Cursor) int { return compare(r.At, c) })
	if !found {
		return 0, false
	}
	return i + 1, true
}

func compare(a, b loomtype.Cursor) int {
	switch {
	case a.Gen != b.Gen:
		return cmpInt(a.Gen, b.Gen)
	default:
		return cmpInt(a.Seq, b.Seq)
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// before is the position just before r's, when it can be told from r alone: the previous event
// of its generation, or the very beginning for the first event of generation 0.
func before(r Record) (loomtype.Cursor, bool) {
	switch {
	case r.At.Seq > 1:
		return loomtype.Cursor{Gen: r.At.Gen, Seq: r.At.Seq - 1}, true
	case r.At.Seq == 1 && r.At.Gen == 0:
		return loomtype.Cursor{}, true
	}
	return loomtype.Cursor{}, false
}

// add appends the records of one commit, in the log's order, and wakes the followers. A commit
// that does not follow the tail's end starts the tail over; inside a commit a record may also
// start the next generation (a continue-as-new commits the end of one and the start of the
// next together). A commit added with no records is one left out of the tail: the tail empties.
func (t *tail) add(recs []Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gone {
		return
	}
	if len(recs) == 0 {
		// A commit the feeder could not give: what follows the tail's end is not known here any
		// more. The tail empties, so that a follower at its end reads the log instead of being
		// told it is at the head, and the followers are woken to do so.
		t.h.tailBytes.Add(-int64(t.bytes))
		t.recs, t.sizes, t.bytes, t.prevOK = nil, nil, 0, false
		t.wakeLocked()
		return
	}
	lim := t.lim
	for i, r := range recs {
		follows := false
		if n := len(t.recs); n > 0 {
			last := t.recs[n-1].At
			follows = r.At.Gen == last.Gen && r.At.Seq == last.Seq+1 ||
				i > 0 && r.At.Gen == last.Gen+1 && r.At.Seq == 1
		}
		if !follows {
			t.h.tailBytes.Add(-int64(t.bytes))
			t.recs, t.sizes, t.bytes = t.recs[:0], t.sizes[:0], 0
			t.prev, t.prevOK = before(r)
		}
		n := r.Size()
		t.recs = append(t.recs, r)
		t.sizes = append(t.sizes, n)
		t.bytes += n
		t.h.tailBytes.Add(int64(n))
	}
	for len(t.recs) > 1 && (len(t.recs) > lim.Records || t.bytes > lim.Bytes || t.h.tailBytes.Load() > int64(lim.TotalBytes)) {
		t.prev, t.prevOK = t.recs[0].At, true
		t.bytes -= t.sizes[0]
		t.h.tailBytes.Add(-int64(t.sizes[0]))
		t.recs[0] = Record{}
		t.recs, t.sizes = t.recs[1:], t.sizes[1:]
	}
	if cap(t.recs) > 2*lim.Records && len(t.recs) < cap(t.recs)/4 {
		t.recs, t.sizes = slices.Clone(t.recs), slices.Clone(t.sizes) // let go of the dropped front
	}
	t.wakeLocked()
}

// wakeLocked wakes every follower of the tail (t.mu held).
func (t *tail) wakeLocked() {
	for f := range t.subs {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// TailFigures are what one conversation's tail holds (Hub.Tail).
//
//	fig, _ := hub.Tail("c1")
//	fmt.Println(fig.Records, fig.Bytes, fig.First, fig.Last)
type TailFigures struct {
	// Records and Bytes are the records held and their size (Record.Size).
	Records, Bytes int
	// First and Last are the positions of the oldest and newest records held.
	First, Last loomtype.Cursor
	// Followers are the followers of the tail.
	Followers int
}

// Tail reports what conversation id's tail holds now; ok is false when nobody follows it.
//
//	fig, ok := hub.Tail("c1")
func (h *Hub) Tail(id string) (fig TailFigures, ok bool) {
	h.mu.Lock()
	t := h.tails[id]
	h.mu.Unlock()
	if t == nil {
		return TailFigures{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fig = TailFigures{Records: len(t.recs), Bytes: t.bytes, Followers: len(t.subs)}
	if n := len(t.recs); n > 0 {
		fig.First, fig.Last = t.recs[0].At, t.recs[n-1].At
	}
	return fig, true
}

// SetTailLimits sets the bounds of the tails the hub makes from now on (zero values: the
// defaults); a tail made before keeps its own.
//
// Concurrency: safe for concurrent use.
//
//	hub.SetTailLimits(live.TailLimits{Records: 1024})
func (h *Hub) SetTailLimits(l TailLimits) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.limits = l.withDefaults()
}
