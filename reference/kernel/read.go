package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// Typed reads of what the kernel journals, for the layers above it: they read an execution's log,
// record and side streams through these, never through the store, so how the kernel journals can
// change without them.

// MaxRead is the most events one read returns, whatever limit is asked for.
const MaxRead = store.MaxRead

// ErrConflict: an AppendAux whose expected head did not match the stream's head.
var ErrConflict = store.ErrConflict

// ErrUnreadable: an event or record of the journal that cannot be decoded.
var ErrUnreadable = errors.New("kernel: unreadable journal event")

// LogEvent is one event of an execution's log. Gen and Seq place it (a loomtype.Cursor names the
// same place); Kind and Data are what was stored, for readers that show the log unchanged; a
// decision and a generation's start come decoded too.
type LogEvent struct {
	Gen  int64
	Seq  int64
	Kind string
	Data json.RawMessage
	// Time is when the event was appended (Unix milliseconds).
	Time int64
	// Decision is set for a recorded decision whose payload could be read.
	Decision *Decision
	// Start is set for the start of a generation whose payload could be read.
	Start *Start
}

// Decision is a recorded decision: its id and value (Context.Decide).
type Decision struct {
	ID    string
	Value json.RawMessage
}

// Start is the start of a generation: its input (the start input in generation 0, the carry
// after).
type Start struct {
	Input json.RawMessage
}

// Cursor is where the event lies in the log.
func (e LogEvent) Cursor() loomtype.Cursor { return loomtype.Cursor{Gen: e.Gen, Seq: e.Seq} }

func logEvent(ev store.Event) LogEvent {
	out := decisionEvent(ev)
	if ev.Kind == kindStarted {
		var s evStarted
		if json.Unmarshal(ev.Data, &s) == nil {
			out.Start = &Start{Input: s.Input}
		}
	}
	return out
}

// decisionEvent is logEvent without a start's input.
func decisionEvent(ev store.Event) LogEvent {
	out := LogEvent{Gen: ev.Gen, Seq: ev.Seq, Kind: ev.Kind, Data: ev.Data, Time: ev.Time}
	data := ev.Data
	switch ev.Kind {
	case kindConsumed: // version 4 may hold the decision made of the message in the same row
		var ok bool
		if _, data, ok = splitConsumed(data); !ok {
			return out
		}
	case kindDecision:
	default:
		return out
	}
	if d, err := decodeDecision(data); err == nil {
		out.Decision = &Decision{ID: d.ID, Value: d.Value}
	}
	return out
}

func logEvents(evs []store.Event) []LogEvent {
	out := make([]LogEvent, len(evs))
	for i, ev := range evs {
		out[i] = logEvent(ev)
	}
	return out
}

// ReadLog returns up to limit events (at most MaxRead) of generation gen of execution id's log
// with Seq > after, oldest first. An execution or generation without events reads as none.
//
// Errors: store errors (loomtype.ErrCorrupt for damaged storage), ctx's.
//
//	evs, err := k.ReadLog(ctx, "c1", 0, 0, 100)
func (k *Kernel) ReadLog(ctx context.Context, id string, gen, after int64, limit int) ([]LogEvent, error) {
	evs, err := k.st.ReadForward(ctx, logStream(id), gen, after, limit)
	return logEvents(evs), err
}

// ReadLogBackward returns up to limit events (at most MaxRead) of generation gen of execution
// id's log with Seq < before, newest first.
//
//	evs, err := k.ReadLogBackward(ctx, "c1", 0, head+1, 8)
func (k *Kernel) ReadLogBackward(ctx context.Context, id string, gen, before int64, limit int) ([]LogEvent, error) {
	evs, err := k.st.ReadBackward(ctx, logStream(id), gen, before, limit)
	return logEvents(evs), err
}

// LogHead returns the newest Seq of generation gen of execution id's log, 0 when it is empty.
//
//	head, err := k.LogHead(ctx, "c1", info.Gen)
func (k *Kernel) LogHead(ctx context.Context, id string, gen int64) (int64, error) {
	return k.st.Head(ctx, logStream(id), gen)
}

// WatchLog returns a channel that receives a value (coalesced) after each append to execution
// id's log, a wake-up only, and a function that ends the watch.
//
//	wake, stop := k.WatchLog("c1")
//	defer stop()
func (k *Kernel) WatchLog(id string) (<-chan struct{}, func()) {
	return k.st.Subscribe(logStream(id))
}

// absentRecord stands in for the record of an id that has none, so that StoredInfo decodes a
// record for a missing id as it does for a present one.
var absentRecord = []byte(`{"id":"c_000000000000000000000000","flow":"-","principal":{"tenant":"-","actor":"-"},"state":"open","gen":0,"created":0}`)

// StoredInfo reads execution id's record from the store, whatever the kernel holds in memory,
// for callers whose answer must cost the same store work whether or not the id exists: a
// missing id reads and decodes a stand-in record before it answers loomtype.ErrNotFound.
//
// Errors: loomtype.ErrNotFound, ErrUnreadable (wrapped) for a record that cannot be decoded,
// store errors.
//
//	info, err := k.StoredInfo(ctx, "c1")
func (k *Kernel) StoredInfo(ctx context.Context, id string) (Info, error) {
	raw, present, err := k.st.Meta(ctx, metaKey(id))
	if !present {
		raw = absentRecord
	}
	in, derr := k.decoded.info(id, raw)
	switch {
	case err != nil:
		return Info{}, err
	case !present:
		return Info{}, loomtype.ErrNotFound
	case derr != nil:
		return Info{}, fmt.Errorf("%w: the record of %s: %v", ErrUnreadable, id, derr)
	}
	return in, nil
}

// LogPage reads execution id's whole log in order across its generations, up to limit events
// (1..500; another value means 500) strictly after the cursor after. A cursor past the newest
// generation is clamped to its end, so it reads back as itself. next is the cursor of the last
// event read (after, when none); done reports that the read reached the log's end.
//
// Errors: loomtype.ErrNotFound for an unknown execution, store errors.
//
//	evs, next, done, err := k.LogPage(ctx, "c1", loomtype.Cursor{}, 100)
func (k *Kernel) LogPage(ctx context.Context, id string, after loomtype.Cursor, limit int) ([]LogEvent, loomtype.Cursor, bool, error) {
	info, err := k.Info(ctx, id)
	if err != nil {
		return nil, after, false, err
	}
	if limit <= 0 || limit > 500 {
		limit = 500
	}
	if after.Gen > info.Gen {
		head, err := k.LogHead(ctx, id, info.Gen)
		if err != nil {
			return nil, after, false, err
		}
		after = loomtype.Cursor{Gen: info.Gen, Seq: head}
	}
	var out []LogEvent
	cur := after
	for len(out) < limit {
		evs, err := k.ReadLog(ctx, id, cur.Gen, cur.Seq, limit-len(out))
		if err != nil {
			return nil, after, false, err
		}
		for _, e := range evs {
			cur.Seq = e.Seq
			out = append(out, e)
		}
		if len(out) < limit && len(evs) < limit {
			if cur.Gen >= info.Gen {
				return out, cur, true, k.withMessages(ctx, id, out)
			}
			cur = loomtype.Cursor{Gen: cur.Gen + 1}
		}
	}
	return out, cur, false, k.withMessages(ctx, id, out)
}

// withMessages gives each consumed event of evs that names its inbox entry (journal version 2)
// the message it took, in the shape version 1 stored it, read from the inbox: the log a caller
// reads shows every consumed message as it was received, whichever version wrote it. An entry
// the inbox does not hold leaves the event as stored.
//
// Errors: store errors; ErrUnreadable (wrapped) for an inbox entry that cannot be decoded.
func (k *Kernel) withMessages(ctx context.Context, id string, evs []LogEvent) error {
	var at []int // indices of the events to fill
	var seqs []int64
	for i, e := range evs {
		if e.Kind != kindConsumed {
			continue
		}
		var m Message
		if json.Unmarshal(e.Data, &m) == nil && m.Payload == nil && m.Seq > 0 {
			at, seqs = append(at, i), append(seqs, m.Seq)
		}
	}
	if len(at) == 0 {
		return nil
	}
	lo, hi := slices.Min(seqs), slices.Max(seqs)
	msgs := make(map[int64]Message, len(at))
	for after := lo - 1; after < hi; {
		in, err := k.st.ReadForward(ctx, inboxStream(id), 0, after, int(min(hi-after, int64(store.MaxRead))))
		if err != nil {
			return err
		}
		if len(in) == 0 {
			break
		}
		for _, ev := range in {
			m, err := decodeInbox(ev)
			if err != nil {
				return fmt.Errorf("%w: %s: inbox event %d: %v", ErrUnreadable, id, ev.Seq, err)
			}
			msgs[ev.Seq] = m
			after = ev.Seq
		}
	}
	for j, i := range at {
		if m, ok := msgs[seqs[j]]; ok {
			b, _ := json.Marshal(m) // a payload is JSON
			if _, d, ok := splitConsumed(evs[i].Data); ok {
				b = append(append(b[:len(b)-1], ','), d[1:]...) // and the decision the row holds
			}
			evs[i].Data = b
		}
	}
	return nil
}

// AuxEvent is one event of an execution's auxiliary stream.
type AuxEvent struct {
	Seq  int64
	Kind string
	Data json.RawMessage
	// Time is when the event was appended (Unix milliseconds).
	Time int64
}

// ErrAuxName: an auxiliary stream name that is empty, holds a '/' or is one the kernel uses.
var ErrAuxName = errors.New("kernel: invalid auxiliary stream name")

// auxStream names an auxiliary stream of an execution in the store ("<name>/<id>").
func auxStream(name, id string) (string, error) {
	switch name {
	case "", "x", "in", "exec", "dd", "sg": // "sg": the named signals (signal.go)
		return "", ErrAuxName
	}
	if strings.Contains(name, "/") {
		return "", ErrAuxName
	}
	return name + "/" + id, nil
}

// AppendAux appends events to the auxiliary stream name of execution id: a side stream the layer
// above keeps beside the execution (a shared conversation's participants), never part of its log
// and never replayed. With expect >= 0 the stream's head must equal expect, else ErrConflict and
// nothing is appended; -1 appends whatever the head. It does not check that the execution exists.
//
// Errors: ErrAuxName, ErrConflict, store errors.
//
//	err := k.AppendAux(ctx, "c1", "participants", 0, kernel.AuxEvent{Kind: "participant.changed", Data: b})
func (k *Kernel) AppendAux(ctx context.Context, id, name string, expect int64, evs ...AuxEvent) error {
	stream, err := auxStream(name, id)
	if err != nil {
		return err
	}
	nevs := make([]store.NewEvent, len(evs))
	for i, e := range evs {
		nevs[i] = store.NewEvent{Kind: e.Kind, Data: e.Data}
	}
	return k.st.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Append(stream, 0, expect, nevs...)
		return err
	})
}

// ReadAux returns up to limit events (at most MaxRead) of execution id's auxiliary stream name
// with Seq > after, oldest first.
//
// Errors: ErrAuxName, store errors.
//
//	evs, err := k.ReadAux(ctx, "c1", "participants", 0, kernel.MaxRead)
func (k *Kernel) ReadAux(ctx context.Context, id, name string, after int64, limit int) ([]AuxEvent, error) {
	stream, err := auxStream(name, id)
	if err != nil {
		return nil, err
	}
	evs, err := k.st.ReadForward(ctx, stream, 0, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]AuxEvent, len(evs))
	for i, ev := range evs {
		out[i] = AuxEvent{Seq: ev.Seq, Kind: ev.Kind, Data: ev.Data, Time: ev.Time}
	}
	return out, nil
}

// AuxHead returns the newest Seq of execution id's auxiliary stream name, 0 when it is empty.
//
// Errors: ErrAuxName, store errors.
func (k *Kernel) AuxHead(ctx context.Context, id, name string) (int64, error) {
	stream, err := auxStream(name, id)
	if err != nil {
		return 0, err
	}
	return k.st.Head(ctx, stream, 0)
}

// decodedInfos remembers the last record of each execution it decoded, so that a record read
// again unchanged (every request reads its conversation's) is not decoded again. Bounded: two
// generations of decodedKept ids.
type decodedInfos struct {
	mu       sync.Mutex
	cur, old map[string]decodedInfo
}

type decodedInfo struct {
	raw []byte
	in  Info
}

const decodedKept = 4096

// info decodes raw, the stored record of id, or answers what it decoded when it last met the
// same bytes. The Info returned is the caller's own.
func (d *decodedInfos) info(id string, raw []byte) (Info, error) {
	d.mu.Lock()
	e, ok := d.cur[id]
	if !ok {
		e, ok = d.old[id]
	}
	d.mu.Unlock()
	if ok && bytes.Equal(e.raw, raw) {
		in := e.in
		in.Output = bytes.Clone(in.Output)
		return in, nil
	}
	var in Info
	if err := json.Unmarshal(raw, &in); err != nil {
		return Info{}, err
	}
	kept := in
	kept.Output = bytes.Clone(in.Output)
	d.mu.Lock()
	if d.cur == nil || len(d.cur) >= decodedKept {
		d.old, d.cur = d.cur, make(map[string]decodedInfo)
	}
	d.cur[id] = decodedInfo{raw: bytes.Clone(raw), in: kept}
	d.mu.Unlock()
	return in, nil
}
