// Package kernel runs durable executions on a store.Store.
//
// An execution is a Flow (a Go function) whose every contact with the world goes through its
// Context: messages are taken from its inbox with Receive, choices are recorded with Decide, side
// effects run as journaled steps with Execute, and a long execution continues as a new generation
// with ContinueAsNew. Each of these appends a fact to the execution's log (several facts made back
// to back, with nothing outside the execution able to see them in between, share one
// transaction: see Decide). Running executions live in memory; an execution that was open when
// the kernel was opened on a store is recovered by running its flow again against the log of its
// newest generation: recorded facts are served from the log in order (a decision by its id,
// exactly once; a completed step without running it again), a step that was in flight when the
// process died runs again, and anything the run does that the log does not hold is a
// *loomtype.DivergenceError naming the command index, what the log holds and what the run did.
// Recovery is lazy: Open returns before it has read a single execution record or replayed
// anything; an execution is found by its key and replayed as soon as something needs it (see
// Open), and the others in the background, a few at a time, once it has walked the records.
//
// A flow must be deterministic given what the Context returns: anything else it needs (the clock,
// randomness, a network answer) goes through Decide or Execute.
package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// Flow is the body of an execution. input is the start input in generation 0 and the carry in
// later generations. Returning ContinueAsNew's error continues as a new generation; returning
// any other error fails the execution; returning nil completes it with output.
type Flow func(c *Context, input json.RawMessage) (output json.RawMessage, err error)

// DivergenceMode says what recovery does when a run does not match its log.
type DivergenceMode int

const (
	// DivergenceFail fails the execution with the *loomtype.DivergenceError (the default).
	DivergenceFail DivergenceMode = iota
	// DivergenceWarn reports the divergence to OnDivergence, stops replaying and goes on live.
	// The log may then hold facts the replay did not reproduce; use it to diagnose, not to run.
	DivergenceWarn
)

// Options configure a Kernel.
type Options struct {
	// Flows maps a flow name to its body. An execution of an unknown flow is not recovered.
	Flows map[string]Flow
	// Divergence selects the divergence mode.
	Divergence DivergenceMode
	// DedupeWindow is how many message keys an execution remembers for deduplication from each
	// sender (default 4096): every sender has a window of its own, so one sender's messages never
	// push another's keys out. The windows belong to the execution, so they span its generations.
	DedupeWindow int
	// OnDivergence, if set, is told about every divergence.
	OnDivergence func(*loomtype.DivergenceError)
	// OnCorrupt, if set, is told once about every execution the kernel refuses because its
	// stored data is damaged (err matches loomtype.ErrCorrupt). Without it the refusal is logged.
	OnCorrupt func(id string, err error)
	// Logger receives operational messages (default: slog.Default()).
	Logger *slog.Logger
	// BeforeRecovery, if set, is called by Open with the new kernel before any open execution
	// is recovered: a flow that reaches the kernel through its owner (as the conversation layer
	// does) then finds it there from its first step.
	BeforeRecovery func(*Kernel)
	// Prepare, if set, is called by Open after BeforeRecovery and before any open execution is
	// recovered, with Open's context: the place for a layer to open its record tables and bring
	// what it stored earlier into them, so that a recovered flow reads them as they now are. An
	// error fails Open.
	Prepare func(ctx context.Context, k *Kernel) error
	// RecoveryWorkers bounds how many open executions the background recovery replays at once
	// (default 2). An execution something needs is replayed at once, outside the bound.
	RecoveryWorkers int
	// BeforeBackgroundRecovery, if set, is called by a background worker with the id of the
	// execution it is about to replay, and the replay waits until it returns (the execution is
	// replayed at once all the same if something needs it meanwhile); Close waits for it to
	// return too. It lets a test hold the background back.
	BeforeBackgroundRecovery func(id string)
	// Clock, if set, is the time timers are measured against (default: the system clock).
	Clock Clock
	// Owns, if set, says which executions this kernel may run: an engine that runs one partition
	// of a shared store answers for the ids of its partition alone. Start, Info, Send, Signal,
	// Cancel and Await of an id it does not own answer ErrNotHere and touch nothing, and the
	// recovery passes such an id by. Nil: every id.
	Owns func(id string) bool
}

// Execution states.
const (
	StateOpen      = "open"
	StateCompleted = "completed"
	StateFailed    = "failed"
)

// Info describes an execution.
type Info struct {
	ID        string            `json:"id"`
	Flow      string            `json:"flow"`
	Principal loomtype.Identity `json:"principal"`
	State     string            `json:"state"`
	Gen       int64             `json:"gen"`
	Created   int64             `json:"created"`
	Output    json.RawMessage   `json:"output,omitempty"`
	Error     string            `json:"error,omitempty"`
}

// StartRequest starts an execution.
type StartRequest struct {
	ID        string
	Flow      string
	Input     json.RawMessage
	Principal loomtype.Identity
}

// Message is one inbox message. Key is the sender-bound dedupe identity of (Sender, MessageID).
type Message struct {
	Seq       int64             `json:"seq"`
	Sender    loomtype.Identity `json:"sender"`
	MessageID string            `json:"messageId"`
	Key       string            `json:"key"`
	Payload   json.RawMessage   `json:"payload"`
	// Time is when the message was delivered to the inbox (Unix milliseconds).
	Time int64 `json:"time"`
}

// Errors of the kernel.
var (
	// ErrUnknownFlow: Start named a flow that is not registered.
	ErrUnknownFlow = errors.New("kernel: unknown flow")
	// ErrBadID: an execution id that is empty, too long, not UTF-8 or holds a control character.
	ErrBadID = errors.New("kernel: invalid execution id")
	// ErrStopped: the kernel is closed or killed.
	ErrStopped = errors.New("kernel: stopped")
	// ErrNotHere: the id belongs to executions another kernel runs (Options.Owns): a request
	// sent to the wrong partition, never an answer about the execution.
	ErrNotHere = errors.New("kernel: execution not run here")
)

// here answers ErrNotHere for an id the kernel does not own.
func (k *Kernel) here(id string) error {
	if k.opt.Owns != nil && !k.opt.Owns(id) {
		return fmt.Errorf("%w: %q", ErrNotHere, id)
	}
	return nil
}

// StepError is a journaled step that failed. Replays serve the same failure.
type StepError struct {
	Step    string
	Message string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("kernel: step %s failed: %s", e.Step, e.Message)
}

// validName reports whether s may be an execution id or a signal or child name:
// ^[^\x00-\x1f\x7f]{1,256}$, 1 to 256 characters (an invalid UTF-8 byte counts as one), none of
// them a control character. (The regular expression cost every start a millisecond to compile.)
func validName(s string) bool {
	n := 0
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
		n++
	}
	return n >= 1 && n <= 256
}

// Kernel runs executions. All methods are safe for concurrent use.
type Kernel struct {
	st     store.Store
	opt    Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	// live counts the deciders and steps running live now, every execution's (LiveWork,
	// LiveIdle).
	live liveCount

	mu sync.Mutex
	// running holds every execution that runs, has yet to be recovered, or is being recovered.
	running map[string]*execution
	// adopted are the open executions found in the store (by the background's walk of the
	// execution records, or by key when something named one before the walk reached it).
	adopted []*execution
	// listed: the background has walked every execution record; from then on an execution that
	// is not in running or infos is not open.
	listed bool
	// unreadable holds the ids whose record does not decode, reported once.
	unreadable map[string]bool
	// dormant are the adopted executions in the order the background recovers them, once
	// listed; next is the first the background has not taken yet.
	dormant []*execution
	next    int
	// recovered is closed once the background recovery is over (see Recovered).
	recovered chan struct{}
	infos     map[string]Info
	// decoded spares StoredInfo decoding a record it decoded before.
	decoded decodedInfos
	// damaged holds the executions refused for damaged storage, with the damage: each call on
	// one answers that error, nothing of it runs and nothing is recorded for it.
	damaged map[string]error
	wg      sync.WaitGroup
	stopped bool

	x kernelExt // what the primitives of cancel.go, child.go, signal.go and timer.go keep
}

type execution struct {
	id   string
	flow Flow
	info Info
	done chan struct{}

	// launched: its goroutine was started (k.mu). An execution Open found open is not launched
	// until something needs it or the background recovery takes it.
	launched bool
	// loaded is closed once its log has been read (or found unreadable), caught once it has
	// stopped replaying: it runs live, runs a decider or a step again, or has returned.
	loaded, caught chan struct{}
	loadOnce       sync.Once
	caughtOnce     sync.Once

	mu  sync.Mutex
	ctx *Context // the generation running now
}

func (e *execution) markLoaded() { e.loadOnce.Do(func() { close(e.loaded) }) }
func (e *execution) markCaught() { e.caughtOnce.Do(func() { close(e.caught) }) }

// Open makes a kernel over st and recovers every open execution by replay, lazily: it returns
// without reading the executions' records, with none of them replayed yet. The background walks
// the records once and adopts every open execution it finds; one that something names before the
// walk has reached it is read by its key and adopted then, so a request, or an execution awaiting
// another, finds it all the same. An open execution is replayed as soon as something needs it: a
// message, a signal or a cancel for it (Send, Signal, Cancel, SendTo), a wait for its end (Await,
// AwaitEnd), its durable timer falling due, Recover; the others are replayed in the background
// once the walk is over, at most Options.RecoveryWorkers at once, the most recently active first
// and those with a message waiting before them. A request for one execution therefore waits for
// the read of one record and the replay of that one execution only, whatever the store holds. A
// record that does not decode is reported (logged) once, by the walk or by the read that met it.
// The kernel does not own st: close the kernel first, then the store.
//
// Errors: Options.Prepare's.
//
//	k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"echo": echo}})
//	if err != nil { return err }
//	defer k.Close()
func Open(ctx context.Context, st store.Store, opt Options) (*Kernel, error) {
	if opt.DedupeWindow <= 0 {
		opt.DedupeWindow = 4096
	}
	if opt.RecoveryWorkers <= 0 {
		opt.RecoveryWorkers = 2
	}
	lg := opt.Logger
	if lg == nil {
		lg = slog.Default()
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k := &Kernel{st: st, opt: opt, log: lg, ctx: kctx, cancel: cancel, recovered: make(chan struct{}),
		running: map[string]*execution{}, infos: map[string]Info{}, damaged: map[string]error{},
		unreadable: map[string]bool{}}
	k.st = newCommitTap(st) // what each commit appended to a log, for WatchLogCommits
	if opt.BeforeRecovery != nil {
		opt.BeforeRecovery(k)
	}
	if opt.Prepare != nil {
		if err := opt.Prepare(ctx, k); err != nil {
			cancel()
			return nil, err
		}
	}
	k.wg.Add(1)
	go k.recoverAll()
	return k, nil
}

// Recovered returns a channel closed once every execution Open found open has been replayed
// up to the end of its log (or has ended, or was refused), or the kernel has stopped: from
// then on every open execution runs, as it did before the restart. It closes too when the
// background cannot list the execution records (the failure is logged); an open execution is
// then replayed when something names it.
//
// Concurrency: safe for concurrent use.
//
//	<-k.Recovered() // every open execution runs again
func (k *Kernel) Recovered() <-chan struct{} { return k.recovered }

// Start starts an execution with a new id. Starting an id that exists is ErrAlreadyStarted
// (loomtype.ErrAlreadyStarted) together with the existing execution's Info: an id starts once.
//
//	info, err := k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "dialogue", Principal: alice})
func (k *Kernel) Start(ctx context.Context, req StartRequest) (Info, error) {
	return k.start(ctx, req, nil)
}

// start is Start; extra, if set, runs in the transaction that creates the execution.
func (k *Kernel) start(ctx context.Context, req StartRequest, extra func(store.Tx) error) (Info, error) {
	if !validName(req.ID) || !utf8.ValidString(req.ID) {
		return Info{}, ErrBadID
	}
	if err := k.here(req.ID); err != nil {
		return Info{}, err
	}
	fl, ok := k.opt.Flows[req.Flow]
	if !ok {
		return Info{}, fmt.Errorf("%w: %q", ErrUnknownFlow, req.Flow)
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("null")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return Info{}, ErrStopped
	}
	if in, ok := k.infos[req.ID]; ok {
		return in, loomtype.ErrAlreadyStarted
	}
	var info Info
	var existing bool
	err := k.st.Update(ctx, func(tx store.Tx) error {
		if v, ok, err := tx.Meta(metaKey(req.ID)); err != nil {
			return err
		} else if ok {
			existing = true
			return json.Unmarshal(v, &info)
		}
		started, _ := json.Marshal(evStarted{Flow: req.Flow, Principal: req.Principal, Input: req.Input})
		if _, err := tx.Append(logStream(req.ID), 0, 0, store.NewEvent{Kind: kindStarted, Data: started}); err != nil {
			return err
		}
		info = Info{ID: req.ID, Flow: req.Flow, Principal: req.Principal, State: StateOpen}
		if err := putInfo(tx, info); err != nil || extra == nil {
			return err
		}
		return extra(tx)
	})
	if err != nil {
		return Info{}, err
	}
	if existing {
		// An open execution the background has not reached yet is adopted now.
		k.adoptLocked(info)
		return info, loomtype.ErrAlreadyStarted
	}
	k.infos[req.ID] = info
	k.launch(info, fl)
	return info, nil
}

func putInfo(tx store.Tx, in Info) error {
	b, _ := json.Marshal(in)
	return tx.PutMeta(metaKey(in.ID), b)
}

// Info returns what is known about an execution; a missing one is loomtype.ErrNotFound, one
// whose stored data was found damaged is that damage (matching loomtype.ErrCorrupt).
func (k *Kernel) Info(ctx context.Context, id string) (Info, error) {
	if err := k.here(id); err != nil {
		return Info{}, err
	}
	k.mu.Lock()
	in, ok := k.infos[id]
	derr := k.damaged[id]
	k.mu.Unlock()
	if derr != nil {
		return Info{}, derr
	}
	if ok {
		return in, nil
	}
	v, ok, err := k.st.Meta(ctx, metaKey(id))
	if err != nil {
		return Info{}, err
	}
	if !ok {
		return Info{}, loomtype.ErrNotFound
	}
	if err := json.Unmarshal(v, &in); err != nil {
		return Info{}, fmt.Errorf("kernel: execution record %s: %w", id, err)
	}
	return in, nil
}

// Send delivers a message to an execution's inbox. A message with the same sender and messageID
// as one of the last DedupeWindow messages that sender delivered to the execution (in any
// generation) is not delivered again: Send then reports delivered == false and no error.
//
// Errors: loomtype.ErrNotFound for an unknown execution, loomtype.ErrClosed for one that ended.
//
//	delivered, err := k.Send(ctx, "c1", alice, "m-1", payload)
func (k *Kernel) Send(ctx context.Context, id string, sender loomtype.Identity, messageID string, payload json.RawMessage) (bool, error) {
	return k.SendInShare(ctx, id, sender, sender, messageID, payload)
}

// SendInShare is Send for a sender that delivers on behalf of others (a shared conversation's
// host delivers every participant's messages): the message's key counts against share's window
// of DedupeWindow keys rather than the sender's, so one participant's messages never push
// another's keys out. messageID must already tell apart the messages of different shares.
//
//	delivered, err := k.SendInShare(ctx, "c1", host, bob, key, payload)
func (k *Kernel) SendInShare(ctx context.Context, id string, sender, share loomtype.Identity, messageID string, payload json.RawMessage) (bool, error) {
	if err := k.here(id); err != nil {
		return false, err
	}
	k.need(ctx, id)
	in, err := k.Info(ctx, id)
	if err != nil {
		return false, err
	}
	if in.State != StateOpen {
		return false, loomtype.ErrClosed
	}
	key := SenderKey(sender, messageID)
	delivered := false
	err = k.st.Update(ctx, func(tx store.Tx) error {
		fresh, err := tx.Remember(senderDedupeScope(id, share), key, k.opt.DedupeWindow)
		if err != nil || !fresh {
			return err
		}
		_, err = tx.Append(inboxStream(id), 0, -1, store.NewEvent{Kind: kindMessage, Data: encodeInbox(sender, messageID, payload)})
		delivered = err == nil
		return err
	})
	return delivered, err
}

// Await waits until the execution has ended and returns its final Info. An open execution not
// replayed yet is replayed now.
func (k *Kernel) Await(ctx context.Context, id string) (Info, error) {
	if err := k.here(id); err != nil {
		return Info{}, err
	}
	if e := k.wake(ctx, id); e != nil {
		select {
		case <-e.done:
		case <-ctx.Done():
			return Info{}, ctx.Err()
		case <-k.ctx.Done():
			return Info{}, ErrStopped
		}
	}
	return k.Info(ctx, id)
}

// Close stops every running execution without recording anything for it (they resume on the
// next Open) and waits for them to return.
func (k *Kernel) Close() error {
	k.mu.Lock()
	k.stopped = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
	return nil
}

func (k *Kernel) isStopped() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopped || k.ctx.Err() != nil
}

// Input returns the input an execution was started with (its generation 0 input).
//
// Errors: loomtype.ErrNotFound for an unknown execution, ErrUnreadable (wrapped) for a start
// that cannot be decoded.
func (k *Kernel) Input(ctx context.Context, id string) (json.RawMessage, error) {
	evs, err := k.st.ReadForward(ctx, logStream(id), 0, 0, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 || evs[0].Kind != kindStarted {
		return nil, loomtype.ErrNotFound
	}
	var s evStarted
	if err := json.Unmarshal(evs[0].Data, &s); err != nil {
		return nil, fmt.Errorf("%w: %s: started event: %v", ErrUnreadable, id, err)
	}
	return s.Input, nil
}

// Backlog returns up to limit messages delivered to an execution and not consumed yet, oldest
// first: not consumed durably, so a consumption still waiting to be committed does not count.
// It reads live state (the running execution's cursor, or for one not replayed yet its log) and
// is meant for admission decisions such as per-sender queue caps, which are best effort.
//
//	waiting, err := k.Backlog(ctx, "c1", 64)
func (k *Kernel) Backlog(ctx context.Context, id string, limit int) ([]Message, error) {
	e := k.find(ctx, id)
	k.mu.Lock()
	var gen int64
	if e != nil {
		gen = e.info.Gen
	}
	k.mu.Unlock()
	var after int64
	if e != nil {
		known := false
		e.mu.Lock()
		if c := e.ctx; c != nil {
			c.mu.Lock()
			if !c.replaying() {
				after, known = c.durableCursor(), true
			}
			c.mu.Unlock()
		}
		e.mu.Unlock()
		if !known {
			var err error
			if after, err = k.consumedCursor(ctx, id, gen); err != nil {
				return nil, err
			}
		}
	}
	evs, err := k.st.ReadForward(ctx, inboxStream(id), 0, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(evs))
	for _, ev := range evs {
		if m, err := decodeInbox(ev); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// consumedCursor reads the inbox cursor of execution id's newest committed consumption from the
// end of generation gen of its log: a consumed message, the last message a safe point took, or
// the cursor the generation started with.
func (k *Kernel) consumedCursor(ctx context.Context, id string, gen int64) (int64, error) {
	before := int64(math.MaxInt64)
	for {
		evs, err := k.st.ReadBackward(ctx, logStream(id), gen, before, 64)
		if err != nil {
			return 0, err
		}
		for _, ev := range evs {
			before = ev.Seq
			switch ev.Kind {
			case kindConsumed:
				var m Message
				if err := json.Unmarshal(ev.Data, &m); err != nil {
					return 0, fmt.Errorf("%w: %s: consumed event: %v", ErrUnreadable, id, err)
				}
				return m.Seq, nil
			case kindSafePoint:
				var sp evSafePoint
				if err := json.Unmarshal(ev.Data, &sp); err != nil {
					return 0, fmt.Errorf("%w: %s: safe point: %v", ErrUnreadable, id, err)
				}
				if n := len(sp.Messages); n > 0 {
					return sp.Messages[n-1].Seq, nil
				}
			case kindStarted:
				var st evStarted
				if err := json.Unmarshal(ev.Data, &st); err != nil {
					return 0, fmt.Errorf("%w: %s: started event: %v", ErrUnreadable, id, err)
				}
				return st.InboxCursor, nil
			}
		}
		if len(evs) < 64 {
			return 0, nil
		}
	}
}
