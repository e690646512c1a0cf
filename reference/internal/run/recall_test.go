package run_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// fixedMemory answers every recall with its entries and counts the recalls, per scope.
type fixedMemory struct {
	mu      sync.Mutex
	entries []hostio.MemoryEntry
	recalls []string
}

func (m *fixedMemory) Recall(_ context.Context, scope, query string) ([]hostio.MemoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recalls = append(m.recalls, scope+" "+query)
	return m.entries, nil
}

func (m *fixedMemory) Write(context.Context, string, []hostio.MemoryEntry) error { return nil }

// echoRequests answers "ok", saying nothing, and keeps every request.
func echoRequests() *scriptmodel.Model {
	return scriptmodel.Sequence(model.Response{Content: "ok", FinishReason: model.FinishStop})
}

func openRecall(t *testing.T, mem hostio.Memory, p model.Provider) *run.Runs {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	rs := run.New(run.Deps{Provider: p, Memory: mem})
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows(), BeforeRecovery: rs.Bind})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })
	return rs
}

// A run with Recall asks its owner's whole scope once, with the prompt, and sends the entries
// fenced at the head of the prompt's user message, a tainted one inside the fence too.
func TestRecallFencesEntriesInThePrompt(t *testing.T) {
	mem := &fixedMemory{entries: []hostio.MemoryEntry{
		{ID: "1", Role: model.RoleUser, Text: "check pump 3"},
		{ID: "2", Role: model.RoleAssistant, Text: "open\nvalve 9", Tainted: true},
	}}
	p := echoRequests()
	rs := openRecall(t, mem, p)
	ctx := context.Background()
	bob := loomtype.Identity{Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"}
	v, _, err := rs.Start(ctx, bob, run.Options{Prompt: "and pump 4?", Recall: true,
		History: []run.HistoryEntry{{Role: model.RoleUser, Content: "hello"}}})
	require.NoError(t, err)
	for v.Status == run.StatusRunning {
		time.Sleep(time.Millisecond)
		v, err = rs.Get(ctx, bob, v.ID)
		require.NoError(t, err)
	}
	require.Equal(t, run.StatusCompleted, v.Status)
	require.Equal(t, []string{"acme/alice~bob and pump 4?"}, mem.recalls)
	got, _ := json.Marshal(p.Messages())
	want, _ := json.Marshal([][]model.Message{{
		{Role: model.RoleUser, Content: "hello"},
		{Role: model.RoleUser, Content: "<recalled-memory>\n- check pump 3\n- open valve 9\n</recalled-memory>\nand pump 4?"},
	}})
	require.JSONEq(t, string(want), string(got))
}

// Recall without memory is refused naming "recall"; a run without Recall never asks the memory.
func TestRecallNeedsMemoryAndIsOptIn(t *testing.T) {
	ctx := context.Background()
	rs := openRecall(t, nil, echoRequests())
	_, created, err := rs.Start(ctx, alice, run.Options{Prompt: "hi", Recall: true})
	var bad *loomtype.BadRequestError
	require.True(t, errors.As(err, &bad), "%v", err)
	require.Equal(t, "recall", bad.Field)
	require.False(t, created)

	mem := &fixedMemory{entries: []hostio.MemoryEntry{{ID: "1", Role: model.RoleUser, Text: "x"}}}
	p := echoRequests()
	rs = openRecall(t, mem, p)
	v, _, err := rs.Start(ctx, alice, run.Options{Prompt: "hi"})
	require.NoError(t, err)
	for v.Status == run.StatusRunning {
		time.Sleep(time.Millisecond)
		v, err = rs.Get(ctx, alice, v.ID)
		require.NoError(t, err)
	}
	require.Empty(t, mem.recalls)
	require.Equal(t, [][]model.Message{{{Role: model.RoleUser, Content: "hi"}}}, p.Messages())
}
