package conversation

import (
	"context"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// Directions of a history read.
const (
	Forward  = "forward"
	Backward = "backward"
)

// HistoryOptions bound one history read.
type HistoryOptions struct {
	// Cursor is where to start: strictly after it (forward) or strictly before it (backward).
	// Empty means the beginning (forward) or the end (backward).
	Cursor    string
	Direction string
	// Limit is the most entries returned (1..500, default 50).
	Limit int
}

const block = 256

// History reads one bounded page of the transcript as principal sees it. One call scans at most
// MaxScan log events (every generation hop counts), so it costs O(MaxScan) whatever the cursor
// says; a cursor past the end is clamped to the end. The read stops when ctx ends.
//
// Errors: loomtype.ErrNotFound (missing or not yours), a *loomtype.CursorError.
//
//	page, err := cv.History(ctx, alice, "c1", conversation.HistoryOptions{Direction: conversation.Backward})
func (cv *Conversations) History(ctx context.Context, principal loomtype.Identity, id string, opt HistoryOptions) (loomtype.Page, error) {
	m, err := cv.authorize(ctx, principal, id)
	if err != nil {
		return loomtype.Page{}, err
	}
	if opt.Limit <= 0 {
		opt.Limit = 50
	}
	if opt.Limit > 500 {
		opt.Limit = 500
	}
	var cur *loomtype.Cursor
	if opt.Cursor != "" {
		c, err := loomtype.ParseCursor(opt.Cursor)
		if err != nil {
			return loomtype.Page{}, err
		}
		cur = &c
	}
	var entries []loomtype.Entry
	var next loomtype.Cursor
	var done bool
	switch opt.Direction {
	case "", Forward:
		from := loomtype.Cursor{}
		if cur != nil {
			from = *cur
		}
		entries, next, done, err = cv.ReadForward(ctx, id, from, opt.Limit)
	case Backward:
		entries, next, done, err = cv.readBackward(ctx, id, cur, opt.Limit)
	default:
		return loomtype.Page{}, loomtype.BadRequest("direction", "")
	}
	if err != nil {
		return loomtype.Page{}, err
	}
	entries, err = cv.viewAll(ctx, m, principal, id, entries)
	if err != nil {
		return loomtype.Page{}, err
	}
	if entries == nil {
		entries = []loomtype.Entry{}
	}
	return loomtype.Page{Entries: entries, NextCursor: next.String(), Done: done}, nil
}

func (cv *Conversations) headGen(ctx context.Context, id string) (int64, error) {
	info, err := cv.kernel().Info(ctx, id)
	if err != nil {
		return 0, err
	}
	return info.Gen, nil
}

// ReadForward reads up to limit entries strictly after from, oldest first, scanning at most
// MaxScan events. It does not authorize: callers have. next is where the read stopped; done
// reports that it reached the head.
//
// Errors: record.ErrInboxRef (also kernel.ErrUnreadable) for a record whose inbox entry is
// missing or altered; the kernel's and the store's.
func (cv *Conversations) ReadForward(ctx context.Context, id string, from loomtype.Cursor, limit int) ([]loomtype.Entry, loomtype.Cursor, bool, error) {
	var pend []record.Pending
	out, next, done, err := cv.readForward(ctx, id, from, limit, &pend)
	if err == nil {
		err = cv.resolve(ctx, id, out, pend)
	}
	if err != nil {
		return nil, from, false, err
	}
	return out, next, done, nil
}

// resolve fills in the entries pending names from conversation id's inbox (record.Resolve).
func (cv *Conversations) resolve(ctx context.Context, id string, out []loomtype.Entry, pending []record.Pending) error {
	return record.Resolve(func(seqs []int64) ([]kernel.Message, error) { return cv.kernel().InboxAt(ctx, id, seqs) }, out, pending)
}

// readForward is ReadForward, noting in pend the entries whose inbox fields are still to be
// filled in.
func (cv *Conversations) readForward(ctx context.Context, id string, from loomtype.Cursor, limit int, pend *[]record.Pending) ([]loomtype.Entry, loomtype.Cursor, bool, error) {
	head, err := cv.headGen(ctx, id)
	if err != nil {
		return nil, from, false, err
	}
	k := cv.kernel()
	g, s := from.Gen, from.Seq
	if g > head {
		g, s = head, 1<<62 // past the head: clamped below
	}
	scanned := 0
	var out []loomtype.Entry
	for {
		if err := ctx.Err(); err != nil {
			return nil, loomtype.Cursor{Gen: g, Seq: s}, false, err
		}
		n := min(block, cv.cfg.MaxScan-scanned)
		if n <= 0 {
			return out, loomtype.Cursor{Gen: g, Seq: s}, false, nil
		}
		evs, err := k.ReadLog(ctx, id, g, s, n)
		if err != nil {
			return nil, from, false, err
		}
		scanned += len(evs)
		for _, ev := range evs {
			s = ev.Seq
			if e, ref, ok := record.EntryOf(ev); ok {
				if ref != nil {
					*pend = append(*pend, record.Pending{At: len(out), Ref: *ref})
				}
				out = append(out, e)
				if len(out) == limit {
					return out, loomtype.Cursor{Gen: g, Seq: s}, false, nil
				}
			}
		}
		if len(evs) == n {
			continue
		}
		// The end of generation g.
		if len(evs) == 0 && s > 0 {
			tip, err := k.LogHead(ctx, id, g)
			if err != nil {
				return nil, from, false, err
			}
			scanned++
			if s > tip {
				s = tip
			}
		}
		if g >= head {
			return out, loomtype.Cursor{Gen: g, Seq: s}, true, nil
		}
		g, s = g+1, 0
		scanned++
	}
}

func (cv *Conversations) readBackward(ctx context.Context, id string, before *loomtype.Cursor, limit int) ([]loomtype.Entry, loomtype.Cursor, bool, error) {
	var pend []record.Pending
	out, next, done, err := cv.readBackwardOf(ctx, id, before, limit, &pend)
	if err == nil {
		err = cv.resolve(ctx, id, out, pend)
	}
	if err != nil {
		return nil, loomtype.Cursor{}, false, err
	}
	return out, next, done, nil
}

// readBackwardOf is readBackward, noting in pend the entries whose inbox fields are still to be
// filled in.
func (cv *Conversations) readBackwardOf(ctx context.Context, id string, before *loomtype.Cursor, limit int, pend *[]record.Pending) ([]loomtype.Entry, loomtype.Cursor, bool, error) {
	head, err := cv.headGen(ctx, id)
	if err != nil {
		return nil, loomtype.Cursor{}, false, err
	}
	k := cv.kernel()
	scanned := 0
	tipAfter := func(g int64) (int64, error) {
		scanned++
		t, err := k.LogHead(ctx, id, g)
		return t + 1, err
	}
	var g, s int64
	if before == nil || before.Gen > head {
		g = head
		if s, err = tipAfter(g); err != nil {
			return nil, loomtype.Cursor{}, false, err
		}
	} else {
		g, s = before.Gen, before.Seq
		tip, err := tipAfter(g)
		if err != nil {
			return nil, loomtype.Cursor{}, false, err
		}
		if s > tip {
			s = tip
		}
	}
	// The probe that found where to start is one point read, not a scanned event: without
	// this a maxScan of 1 would spend the whole call on it and never move.
	scanned = 0
	var out []loomtype.Entry
	for {
		if err := ctx.Err(); err != nil {
			return nil, loomtype.Cursor{Gen: g, Seq: s}, false, err
		}
		n := min(block, cv.cfg.MaxScan-scanned)
		if n <= 0 {
			return out, loomtype.Cursor{Gen: g, Seq: s}, false, nil
		}
		evs, err := k.ReadLogBackward(ctx, id, g, s, n)
		if err != nil {
			return nil, loomtype.Cursor{}, false, err
		}
		scanned += len(evs)
		for _, ev := range evs {
			s = ev.Seq
			if e, ref, ok := record.EntryOf(ev); ok {
				if ref != nil {
					*pend = append(*pend, record.Pending{At: len(out), Ref: *ref})
				}
				out = append(out, e)
				if len(out) == limit {
					return out, loomtype.Cursor{Gen: g, Seq: s}, false, nil
				}
			}
		}
		if len(evs) == n {
			continue
		}
		if g == 0 {
			return out, loomtype.Cursor{Gen: 0, Seq: 0}, true, nil
		}
		g--
		if s, err = tipAfter(g); err != nil {
			return nil, loomtype.Cursor{}, false, err
		}
	}
}

// Status reads a conversation's status as principal.
//
// Errors: loomtype.ErrNotFound.
func (cv *Conversations) Status(ctx context.Context, principal loomtype.Identity, id string) (loomtype.Status, error) {
	m, err := cv.authorize(ctx, principal, id)
	if err != nil {
		return loomtype.Status{}, err
	}
	return cv.status(ctx, m, id)
}

func (cv *Conversations) status(ctx context.Context, m meta, id string) (loomtype.Status, error) {
	info, err := cv.kernel().Info(ctx, id)
	if err != nil {
		return loomtype.Status{}, err
	}
	st := loomtype.Status{ID: id, Mode: m.mode, State: loomtype.StateOpen, Generation: info.Gen, Owner: m.owner}
	if info.State != kernel.StateOpen {
		st.State = loomtype.StateClosed
	}
	// The newest accepted turn, from the newest count the log holds near its end.
	if n, ok, err := cv.newestTurn(ctx, id, info.Gen); err != nil {
		return loomtype.Status{}, err
	} else if ok {
		st.Turns = n
		return st, nil
	}
	// A log written before records and verdicts carried the count: page backward until a record
	// with a turn, at most 50 pages.
	var cur *loomtype.Cursor
	for range 50 {
		entries, next, done, err := cv.readBackward(ctx, id, cur, 100)
		if err != nil {
			return loomtype.Status{}, err
		}
		for _, e := range entries {
			if e.Turn > 0 {
				st.Turns = e.Turn
				return st, nil
			}
		}
		if done {
			break
		}
		cur = &next
	}
	return st, nil
}

// StatusScan bounds the log events a status read looks at to find the newest accepted turn.
// Every message the dialogue takes up leaves a verdict holding the count, and every record holds
// it too, so the count is found within the events of one turn whatever the number of
// rejections before it: the cost of a status read does not grow with them.
const StatusScan = 4 * block

// newestTurn reads generation gen of a conversation's log backward from its end, at most
// StatusScan events, for the newest count of accepted turns: the value of a verdict or record
// decision, the carry that started the generation, or 0 at the very start. ok is false when none
// was found (a log from before the counts were recorded).
func (cv *Conversations) newestTurn(ctx context.Context, id string, gen int64) (int64, bool, error) {
	k := cv.kernel()
	head, err := k.LogHead(ctx, id, gen)
	if err != nil {
		return 0, false, err
	}
	before := head + 1
	// The count is usually in the newest few events: read a few first, more each time after.
	for scanned, want := 0, 8; scanned < StatusScan && before > 1; want = min(4*want, block) {
		evs, err := k.ReadLogBackward(ctx, id, gen, before, min(want, StatusScan-scanned))
		if err != nil {
			return 0, false, err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			scanned++
			before = ev.Seq
			if n, found, legacy := record.TurnsOf(ev, gen); found || legacy {
				return n, found, nil
			}
		}
	}
	return 0, false, nil
}

// WatchLog returns a channel that receives a value after each append to the conversation's log
// (a wake-up only: read the log to learn what happened) and a function that ends the watch.
func (cv *Conversations) WatchLog(id string) (<-chan struct{}, func()) {
	return cv.kernel().WatchLog(id)
}

// Follower is a stream's reader of one conversation's log. While anyone follows a conversation,
// what each of its commits appended is kept in memory, in the conversation's tail (live.Hub's,
// bounded by its TailLimits), as soon as the commit is durable; a follower whose cursor lies
// within the tail reads from there, without reading the store, and one whose cursor does not
// (it starts before the tail, or fell behind it, or a commit went unreported) reads the log.
// Either way it reads exactly what ReadForward would: the log is the only source of truth, and
// the tail holds nothing but what it committed. Safe for concurrent use.
//
//	f := cv.Follow("c1")
//	defer f.Close()
type Follower struct {
	cv *Conversations
	id string
	f  *live.Follower
}

// Follow returns a follower of conversation id, for one stream; Close it when the stream ends.
// It does not authorize: callers have.
//
//	f := cv.Follow("c1")
//	defer f.Close()
//	for {
//		entries, next, done, err := f.Read(ctx, cursor, 100)
//		...
//		<-f.Wake()
//	}
func (cv *Conversations) Follow(id string) *Follower {
	k := cv.kernel()
	lf := cv.hub.Follow(id, func(add func([]live.Record)) func() {
		return k.WatchLogCommits(id, func(c kernel.LogCommit) { add(tailRecords(c, cv.hub.Noted(id))) })
	})
	return &Follower{cv: cv, id: id, f: lf}
}

// tailRecords are the records of a commit as the tail keeps them: every event's position, and
// the transcript entry of each that holds one. A record that names its inbox entry is filled in
// from what the dialogue noted of that entry (noted, a dialogue.Noted); when that is not the
// entry it names, the commit is left out (none): the tail starts over at the next one, and a
// follower that needs this one reads the log.
func tailRecords(c kernel.LogCommit, noted any) []live.Record {
	evs := c.Decisions() // a start's input holds no entry
	out := make([]live.Record, len(evs))
	for i, ev := range evs {
		out[i].At = ev.Cursor()
		e, ref, ok := record.EntryOf(ev)
		if !ok {
			continue
		}
		if ref != nil {
			n, known := noted.(record.Noted)
			if !known || n.Ref != *ref {
				return nil
			}
			n.Asked.Fill(&e)
		}
		out[i].Entry = &e
	}
	return out
}

// Read reads up to limit entries strictly after from, oldest first, as ReadForward does (next is
// where the read stopped; done reports that it reached the head): from the tail when from lies
// within it, else from the log.
//
// Errors: those of ReadForward, ctx's.
//
//	entries, next, done, err := f.Read(ctx, cursor, 100)
func (f *Follower) Read(ctx context.Context, from loomtype.Cursor, limit int) ([]loomtype.Entry, loomtype.Cursor, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, from, false, err
	}
	if entries, next, done, ok := f.f.Read(from, limit); ok {
		return entries, next, done, nil
	}
	return f.cv.ReadForward(ctx, f.id, from, limit)
}

// ReadLog is Read from the log, whatever the tail holds: a stream reads it now and then, so that
// a commit whose report never came (its writer was told it failed, or it was in flight when the
// kernel's first watch began, as a commit of recovery is when a stream follows right after a
// restart: kernel.Kernel.WatchLogCommits) is still seen. For the same reason Read goes to the log
// whenever the tail holds nothing: an empty tail knows no head, however recently the log was read.
//
// Errors: those of ReadForward.
//
//	entries, next, done, err := f.ReadLog(ctx, cursor, 100)
func (f *Follower) ReadLog(ctx context.Context, from loomtype.Cursor, limit int) ([]loomtype.Entry, loomtype.Cursor, bool, error) {
	return f.cv.ReadForward(ctx, f.id, from, limit)
}

// Wake receives a value (coalesced) after each commit the tail took in: the moment to Read.
//
//	<-f.Wake()
//	entries, next, done, err := f.Read(ctx, cursor, 100)
func (f *Follower) Wake() <-chan struct{} { return f.f.Wake() }

// View is Conversations.View for an entry the follower read, checking who may read as View does
// but, where nothing it checks can have changed, without reading the store: in owner mode the
// owner and the mode are fixed when the conversation starts and a conversation never goes away,
// so once this process has read its record the answer is known. In shared mode, whose
// participants change, it is View.
//
// Errors: loomtype.ErrNotFound when viewer may not read the conversation, View's.
//
//	v, err := f.View(ctx, alice, e)
func (f *Follower) View(ctx context.Context, viewer loomtype.Identity, e loomtype.Entry) (loomtype.Entry, error) {
	f.cv.mu.Lock()
	m, known := f.cv.metas[f.id]
	f.cv.mu.Unlock()
	if !known || m.mode == ModeShared {
		return f.cv.View(ctx, viewer, f.id, e)
	}
	if !viewer.Valid() || !m.ok || !m.owner.Equal(viewer) {
		return loomtype.Entry{}, loomtype.ErrNotFound
	}
	return e, nil
}

// Close ends the follower; the conversation's tail goes with its last follower. Closing again
// does nothing.
//
//	f := cv.Follow("c1")
//	defer f.Close()
func (f *Follower) Close() { f.f.Close() }

// viewAll applies the viewer's filter (shared mode) to entries.
func (cv *Conversations) viewAll(ctx context.Context, m meta, viewer loomtype.Identity, id string, entries []loomtype.Entry) ([]loomtype.Entry, error) {
	if m.mode != ModeShared {
		return entries, nil
	}
	return cv.filter(ctx, viewer, entries), nil
}

// View is the per-viewer filter for one entry; in owner mode it returns the entry unchanged.
func (cv *Conversations) View(ctx context.Context, viewer loomtype.Identity, id string, e loomtype.Entry) (loomtype.Entry, error) {
	m, err := cv.authorize(ctx, viewer, id)
	if err != nil {
		return loomtype.Entry{}, err
	}
	out, err := cv.viewAll(ctx, m, viewer, id, []loomtype.Entry{e})
	if err != nil {
		return loomtype.Entry{}, err
	}
	return out[0], nil
}
