package quota

import (
	"context"
	"sync"

	"github.com/loomcheck/loomcheck/reference/loomtype"
)

type owner struct {
	kind Kind
	who  loomtype.Identity
}

// Memory counts slots in the memory of one process: exact for an engine alone on its store,
// and what a bound the specification makes per process keeps. The zero value is ready to use.
type Memory struct {
	mu      sync.Mutex
	slots   map[owner]map[string]int64 // slot id -> expiry (0: none)
	buckets map[loomtype.Identity]*bucket
}

var _ Counter = (*Memory)(nil)

// liveLocked drops o's expired slots and returns the rest. m.mu held.
func (m *Memory) liveLocked(o owner, now int64) map[string]int64 {
	held := m.slots[o]
	for id, exp := range held {
		if exp != 0 && exp <= now {
			delete(held, id)
		}
	}
	if len(held) == 0 {
		delete(m.slots, o)
		return nil
	}
	return held
}

// Admit is Counter.Admit.
func (m *Memory) Admit(_ context.Context, s Slot, max int, now int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := owner{s.Kind, s.Who}
	held := m.liveLocked(o, now)
	if _, ok := held[s.ID]; ok {
		return nil
	}
	if len(held) >= max {
		return &Refusal{Kind: s.Kind, Max: max}
	}
	if held == nil {
		if m.slots == nil {
			m.slots = map[owner]map[string]int64{}
		}
		held = map[string]int64{}
		m.slots[o] = held
	}
	held[s.ID] = s.Expires
	return nil
}

// Release is Counter.Release.
func (m *Memory) Release(_ context.Context, s Slot) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := owner{s.Kind, s.Who}
	if held := m.slots[o]; held != nil {
		delete(held, s.ID)
		if len(held) == 0 {
			delete(m.slots, o)
		}
	}
	return nil
}

// Held is Counter.Held.
func (m *Memory) Held(_ context.Context, kind Kind, who loomtype.Identity, now int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.liveLocked(owner{kind, who}, now)), nil
}
