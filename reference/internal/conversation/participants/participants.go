// Package participants keeps the participant sets of shared conversations: each change, with who
// made it, is recorded in the conversation execution's auxiliary stream "participants" (never in
// its log, so it is never replayed), and the current set is read back from it on every request, so
// that a change takes effect on the next one. A Book caches each set by the stream's head.
package participants

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// The journal vocabulary of the participants stream: its name and event kind are the on-disk
// shape of every shared conversation already written. Add; never rename.
const (
	// Stream is the kernel auxiliary stream of a conversation's participant changes.
	Stream = "participants"
	// KindChanged is the event kind of one change.
	KindChanged = "participant.changed"
)

// Op is what a change does.
type Op string

// Operations.
const (
	OpAdd    Op = "add"
	OpRemove Op = "remove"
)

// Change is one recorded change of a shared conversation's participants.
type Change struct {
	Op       Op                `json:"op"`
	Identity loomtype.Identity `json:"identity"`
	By       loomtype.Identity `json:"by"`
}

// MaxChanges bounds the changes a Set keeps (the oldest first).
const MaxChanges = 1000

// Set is a conversation's participants as its stream says at Head: the members (the owner first)
// and the changes that made them, oldest first (at most MaxChanges).
type Set struct {
	Head    int64
	Members []loomtype.Identity
	Changes []Change
}

// maxCached bounds the sets a Book remembers; past it the cache starts over.
const maxCached = 10_000

// Book reads and records participant sets. Safe for concurrent use; the zero Book is ready.
type Book struct {
	mu    sync.Mutex
	cache map[string]Set
}

// Read returns conversation id's participant set. An unchanged stream (the same head as last
// read) costs one head read.
//
// Errors: kernel and store errors.
//
//	set, err := book.Read(ctx, k, "c1")
func (b *Book) Read(ctx context.Context, k *kernel.Kernel, id string) (Set, error) {
	head, err := k.AuxHead(ctx, id, Stream)
	if err != nil {
		return Set{}, err
	}
	b.mu.Lock()
	c, ok := b.cache[id]
	b.mu.Unlock()
	if ok && c.Head == head {
		return c, nil
	}
	var set []loomtype.Identity
	var changes []Change
	var after int64
	for after < head {
		evs, err := k.ReadAux(ctx, id, Stream, after, kernel.MaxRead)
		if err != nil {
			return Set{}, err
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			after = ev.Seq
			var ch Change
			if json.Unmarshal(ev.Data, &ch) != nil {
				continue
			}
			if len(changes) < MaxChanges {
				changes = append(changes, ch)
			}
			switch ch.Op {
			case OpAdd:
				if !slices.Contains(set, ch.Identity) {
					set = append(set, ch.Identity)
				}
			case OpRemove:
				set = slices.DeleteFunc(set, func(x loomtype.Identity) bool { return x == ch.Identity })
			}
		}
	}
	b.mu.Lock()
	if b.cache == nil || len(b.cache) > maxCached {
		b.cache = map[string]Set{}
	}
	c = Set{Head: head, Members: set, Changes: changes}
	b.cache[id] = c
	b.mu.Unlock()
	return c, nil
}

// Init records the first participants of conversation id: owner, then each of ps not already in
// (every one added by owner). It appends only to an empty stream.
//
// Errors: kernel.ErrConflict when the stream holds anything already; kernel and store errors.
//
//	err := book.Init(ctx, k, "c1", alice, []loomtype.Identity{bob})
func (b *Book) Init(ctx context.Context, k *kernel.Kernel, id string, owner loomtype.Identity, ps []loomtype.Identity) error {
	set := []loomtype.Identity{owner}
	for _, p := range ps {
		if !slices.Contains(set, p) {
			set = append(set, p)
		}
	}
	evs := make([]kernel.AuxEvent, 0, len(set))
	for _, p := range set {
		data, _ := json.Marshal(Change{Op: OpAdd, Identity: p, By: owner})
		evs = append(evs, kernel.AuxEvent{Kind: KindChanged, Data: data})
	}
	return k.AppendAux(ctx, id, Stream, 0, evs...)
}

// Finish is Init for a conversation whose start may have stopped before it recorded its
// participants: a set already recorded, by the start or a concurrent retry, is kept.
//
// Errors: kernel and store errors.
func (b *Book) Finish(ctx context.Context, k *kernel.Kernel, id string, owner loomtype.Identity, ps []loomtype.Identity) error {
	head, err := k.AuxHead(ctx, id, Stream)
	if err != nil || head > 0 {
		return err
	}
	if err := b.Init(ctx, k, id, owner, ps); err != nil && !errors.Is(err, kernel.ErrConflict) {
		return err
	}
	return nil
}

// Record appends one change to conversation id's stream.
//
// Errors: kernel and store errors.
//
//	err := book.Record(ctx, k, "c1", participants.Change{Op: participants.OpAdd, Identity: carol, By: alice})
func (b *Book) Record(ctx context.Context, k *kernel.Kernel, id string, ch Change) error {
	data, _ := json.Marshal(ch)
	return k.AppendAux(ctx, id, Stream, -1, kernel.AuxEvent{Kind: KindChanged, Data: data})
}
