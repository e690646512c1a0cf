package world

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// MemoryEntry is one remembered text in a scope.
type MemoryEntry struct {
	ID   string `json:"id,omitempty"`
	Role string `json:"role,omitempty"`
	Text string `json:"text"`
}

// MemoryWrite is one recorded write-back.
type MemoryWrite struct {
	Scope   string        `json:"scope"`
	Entries []MemoryEntry `json:"entries"`
	Arrived time.Time     `json:"-"`
}

// MemoryRecall is one recorded recall. Held is what the scope held when it arrived, oldest first
// (before the answer's cut to the newest 20).
type MemoryRecall struct {
	Scope   string        `json:"scope"`
	Query   string        `json:"query"`
	Arrived time.Time     `json:"-"`
	Held    []MemoryEntry `json:"-"`
}

// Memory is the agent memory the world keeps per scope: POST /memory/recall {"scope","query"}
// answers {"entries": [...]} (everything the scope holds, oldest first, at most 20), and POST
// /memory/write {"scope","entries"} appends to the scope (an entry whose id the scope already
// holds is skipped) and answers 204. Safe for concurrent use.
//
//	w.Memory().Seed("user:acme/bob", "bob's pump 7 runs hot")
type Memory struct {
	w *World

	mu      sync.Mutex
	sig     signal
	scopes  map[string][]MemoryEntry
	writes  *journal[MemoryWrite]
	recalls *journal[MemoryRecall]
}

// Paths of the memory service.
const (
	PathMemoryRecall = "/memory/recall"
	PathMemoryWrite  = "/memory/write"
)

func newMemory(w *World) *Memory {
	return &Memory{w: w, scopes: map[string][]MemoryEntry{}, writes: newJournal[MemoryWrite](w.opts),
		recalls: newJournal[MemoryRecall](w.opts)}
}

func (m *Memory) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scopes = map[string][]MemoryEntry{}
	m.writes = newJournal[MemoryWrite](m.w.opts)
	m.recalls = newJournal[MemoryRecall](m.w.opts)
	m.sig.fire()
}

// Seed puts texts into a scope. It fails with ErrScriptFull past Options.MaxScript entries.
func (m *Memory) Seed(scope string, texts ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.scopes[scope])+len(texts) > m.w.opts.MaxScript {
		return ErrScriptFull
	}
	for i, t := range texts {
		m.scopes[scope] = append(m.scopes[scope], MemoryEntry{ID: fmt.Sprintf("seed-%d", i), Text: t})
	}
	return nil
}

// Writes returns a copy of the recorded write-backs, oldest first.
func (m *Memory) Writes() []MemoryWrite {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writes.snapshot()
}

// Recalls returns a copy of the recorded recalls, oldest first.
func (m *Memory) Recalls() []MemoryRecall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recalls.snapshot()
}

// WaitWrites blocks until at least n write-backs have arrived.
func (m *Memory) WaitWrites(ctx context.Context, n int) error {
	return waitUntil(ctx, &m.mu, &m.sig, m.w.closing, fmt.Sprintf("%d memory write(s)", n),
		func() bool { return m.writes.total >= n })
}

func (m *Memory) serveRecall(rw http.ResponseWriter, r *http.Request) {
	var req MemoryRecall
	body, ok := m.w.readBody(rw, r, &req)
	if !ok {
		return
	}
	if req.Scope == "" {
		m.w.reject(rw, r, http.StatusBadRequest, "scope missing")
		return
	}
	req.Arrived = time.Now()
	m.mu.Lock()
	entries := append([]MemoryEntry{}, m.scopes[req.Scope]...)
	req.Held = append([]MemoryEntry(nil), entries...)
	m.recalls.add(req, int64(len(body)))
	m.sig.fire()
	m.mu.Unlock()
	if len(entries) > 20 {
		entries = entries[len(entries)-20:]
	}
	_ = writeJSON(rw, http.StatusOK, map[string]any{"entries": entries})
}

func (m *Memory) serveWrite(rw http.ResponseWriter, r *http.Request) {
	var req MemoryWrite
	body, ok := m.w.readBody(rw, r, &req)
	if !ok {
		return
	}
	if req.Scope == "" {
		m.w.reject(rw, r, http.StatusBadRequest, "scope missing")
		return
	}
	req.Arrived = time.Now()
	m.mu.Lock()
	m.writes.add(req, int64(len(body)))
	have := map[string]bool{}
	for _, e := range m.scopes[req.Scope] {
		have[e.ID] = true
	}
	for _, e := range req.Entries {
		if e.ID == "" || !have[e.ID] {
			if len(m.scopes[req.Scope]) < m.w.opts.MaxScript {
				m.scopes[req.Scope] = append(m.scopes[req.Scope], e)
			}
			have[e.ID] = true
		}
	}
	m.sig.fire()
	m.mu.Unlock()
	rw.WriteHeader(http.StatusNoContent)
}

// Scope returns a copy of what a scope holds, oldest first (seeded entries and write-backs).
//
//	for _, e := range w.Memory().Scope("acme/alice") { fmt.Println(e.Role, e.Text) }
func (m *Memory) Scope(scope string) []MemoryEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]MemoryEntry(nil), m.scopes[scope]...)
}
