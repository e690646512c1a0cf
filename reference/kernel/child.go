package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

var (
	// ErrChildMismatch: the execution found at a child's id is not that child (another parent,
	// name, flow or principal). The error is a *ChildMismatchError.
	ErrChildMismatch = errors.New("kernel: the execution at a child's id is not that child")
	// ErrNotRunning: AwaitEnd named an execution that is open but not running in this process
	// (its flow is not registered, or it was refused), so it cannot end here.
	ErrNotRunning = errors.New("kernel: execution is open but not running")
)

// ChildMismatchError says why the execution at a child's id was not adopted. It matches
// ErrChildMismatch.
type ChildMismatchError struct {
	Child string // the derived id
	Want  ParentRef
	Got   ParentRef // zero when the execution there has no parent
	Why   string
}

func (e *ChildMismatchError) Error() string {
	return fmt.Sprintf("kernel: execution %s is not child %q of %s: %s", e.Child, e.Want.Name, e.Want.Parent, e.Why)
}

// Is makes a *ChildMismatchError match ErrChildMismatch.
func (e *ChildMismatchError) Is(target error) bool { return target == ErrChildMismatch }

// ParentRef is what a child execution records about its parent.
type ParentRef struct {
	Parent string `json:"parent"`
	Name   string `json:"name"`
}

// ChildRequest starts a child execution.
type ChildRequest struct {
	// Name identifies the child among its parent's children; with the parent's id it derives
	// the child's id (ChildID).
	Name string
	// Flow is the child's flow; Input its start input.
	Flow  string
	Input json.RawMessage
	// Principal is the identity the child runs as; the zero identity means the parent's.
	Principal loomtype.Identity
}

type evChild struct {
	ID    string `json:"id"` // the child's name
	Child string `json:"child"`
	Flow  string `json:"flow"`
}

type evEndObserved struct {
	ID   string `json:"id"` // the execution observed
	Info Info   `json:"info"`
}

func parentKey(id string) string { return "parent/" + id }

// ChildID is the id of the child named name of execution parent: deterministic, so a parent
// that runs again after a crash finds the child it started.
//
//	id := kernel.ChildID("run-7", "search") // "run-7/search~" + 16 hex digits
func ChildID(parent, name string) string {
	h := sha256.Sum256([]byte(parent + "\x00" + name))
	return clip(parent, 128) + "/" + clip(name, 64) + "~" + hex.EncodeToString(h[:8])
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Parent returns what a child execution recorded about its parent, and false for an execution
// that was not started as a child.
//
// Errors: a store error.
//
// Concurrency: safe for concurrent use.
//
//	ref, ok, err := k.Parent(ctx, kernel.ChildID("run-7", "search"))
func (k *Kernel) Parent(ctx context.Context, id string) (ParentRef, bool, error) {
	raw, ok, err := k.st.Meta(ctx, parentKey(id))
	if err != nil || !ok {
		return ParentRef{}, false, err
	}
	var ref ParentRef
	if err := json.Unmarshal(raw, &ref); err != nil {
		return ParentRef{}, false, fmt.Errorf("kernel: parent record %s: %w", id, err)
	}
	return ref, true, nil
}

// StartChild starts a child execution once and returns its id (ChildID of this execution's id
// and req.Name). The child is created in the same transaction that journals its start in this
// execution's log, so a crash leaves both or neither; a replay serves the start from the log and
// checks the child is still this one's. An execution already found at the id (a replay of a
// log, or anything else) is adopted only when it records this execution and name as its parent
// and runs req.Flow as the principal asked for; a child that has ended is adopted as it is,
// never started again.
//
// Errors: a *ChildMismatchError (ErrChildMismatch) for an execution at the id that is not the
// child, ErrUnknownFlow, ErrBadID (a name that yields no valid id), a *CanceledError, a
// *loomtype.DivergenceError, ErrStopped or a store error.
//
// Concurrency: the flow's goroutine only.
//
//	id, err := c.StartChild(kernel.ChildRequest{Name: "search", Flow: "search", Input: q})
//	if err != nil { return nil, err }
//	info, err := c.AwaitEnd(id)
func (c *Context) StartChild(req ChildRequest) (string, error) {
	if req.Principal == (loomtype.Identity{}) {
		req.Principal = c.principal
	}
	want := ParentRef{Parent: c.id, Name: req.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok, err := c.replayCommand(kindChildStarted, req.Name)
	if err != nil {
		return "", err
	}
	if ok {
		var ev evChild
		_ = json.Unmarshal(data, &ev)
		if err := c.k.verifyChild(c.ctx, ev.Child, want, req); err != nil {
			return "", c.stopErr(err)
		}
		return ev.Child, nil
	}
	id := ChildID(c.id, req.Name)
	if req.Name == "" || !validName(req.Name) {
		return "", ErrBadID
	}
	rec := evChild{ID: req.Name, Child: id, Flow: req.Flow}
	b, _ := json.Marshal(rec)
	pb, _ := json.Marshal(want)
	var h int64
	_, err = c.k.start(c.ctx, StartRequest{ID: id, Flow: req.Flow, Input: req.Input, Principal: req.Principal}, func(tx store.Tx) error {
		if err := tx.PutMeta(parentKey(id), pb); err != nil {
			return err
		}
		var err error
		h, err = c.appendTx(tx, store.NewEvent{Kind: kindChildStarted, Data: b})
		return err
	})
	switch {
	case err == nil:
		c.committed(h)
		return id, nil
	case errors.Is(err, loomtype.ErrAlreadyStarted):
		if err := c.k.verifyChild(c.ctx, id, want, req); err != nil {
			return "", c.stopErr(err)
		}
		if err := c.record(kindChildStarted, rec, nil); err != nil {
			return "", err
		}
		return id, nil
	default:
		return "", c.stopErr(err)
	}
}

// verifyChild checks that the execution at id is the child want of req.
func (k *Kernel) verifyChild(ctx context.Context, id string, want ParentRef, req ChildRequest) error {
	in, err := k.Info(ctx, id)
	if err != nil {
		return err
	}
	got, _, err := k.Parent(ctx, id)
	if err != nil {
		return err
	}
	mismatch := func(why string) error {
		return &ChildMismatchError{Child: id, Want: want, Got: got, Why: why}
	}
	switch {
	case got != want:
		return mismatch("it records another parent")
	case in.Flow != req.Flow:
		return mismatch(fmt.Sprintf("it runs flow %q", in.Flow))
	case !in.Principal.Equal(req.Principal):
		return mismatch("it runs as another principal")
	}
	return nil
}

// AwaitEnd waits until execution id has ended and returns its final Info. The wait is journaled:
// a replay returns the recorded Info without waiting, and a wait a crash interrupted waits again.
//
// Errors: loomtype.ErrNotFound (an unknown execution), ErrNotRunning (open but not running in
// this process), the damage of a refused one, a *CanceledError, a *loomtype.DivergenceError,
// ErrStopped or a store error; none of these is journaled.
//
// Concurrency: the flow's goroutine only.
//
//	info, err := c.AwaitEnd(kernel.ChildID(c.ID(), "search"))
//	if err == nil && info.State == kernel.StateCompleted { use(info.Output) }
func (c *Context) AwaitEnd(id string) (Info, error) {
	c.mu.Lock()
	data, ok, err := c.replayCommand(kindEndObserved, id)
	c.mu.Unlock()
	if err != nil {
		return Info{}, err
	}
	if ok {
		var ev evEndObserved
		_ = json.Unmarshal(data, &ev)
		return ev.Info, nil
	}
	site := "await " + id
	for {
		in, err := c.k.Info(c.ctx, id)
		if err != nil {
			return Info{}, c.stopErr(err)
		}
		if in.State != StateOpen {
			c.mu.Lock()
			defer c.mu.Unlock()
			if err := c.record(kindEndObserved, evEndObserved{ID: id, Info: in}, nil); err != nil {
				return Info{}, err
			}
			return in, nil
		}
		c.k.x.endLooked(id)
		e := c.k.wake(c.ctx, id) // one not replayed yet is needed now
		if e == nil {
			// It may have ended since the look above: an execution leaves the running set only
			// once its end is recorded, so a second look tells the two apart.
			again, err := c.k.Info(c.ctx, id)
			if err != nil {
				return Info{}, c.stopErr(err)
			}
			if again.State == StateOpen {
				return Info{}, ErrNotRunning
			}
			continue
		}
		if err := c.wait(site, e.done); err != nil {
			return Info{}, err
		}
		site = ""
	}
}
