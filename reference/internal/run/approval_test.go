package run_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// twoCalls asks for lookup and transfer at once, then answers with every tool result it got.
func twoCalls() *scriptmodel.Model {
	return scriptmodel.Tools([]model.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"q":1}`}, {ID: "c2", Name: "transfer", Arguments: `{"amount":5}`}},
		func(results []model.Message) string {
			var seen []string
			for _, m := range results {
				seen = append(seen, m.Content)
			}
			return strings.Join(seen, " | ")
		})
}

type recTools struct {
	mu    sync.Mutex
	calls []string
	human map[string]bool
}

func (t *recTools) Call(_ context.Context, name string, args json.RawMessage, key string) (json.RawMessage, error) {
	t.mu.Lock()
	t.calls = append(t.calls, name+" "+key)
	t.mu.Unlock()
	if t.human[name] {
		return nil, agent.ErrPendingHuman
	}
	return json.RawMessage(`{"tool":"` + name + `"}`), nil
}

func (t *recTools) call(i int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[i]
}

func (t *recTools) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, c := range t.calls {
		out = append(out, strings.Fields(c)[0])
	}
	return out
}

var alice = loomtype.Identity{Tenant: "acme", Actor: "alice"}

type rig struct {
	rs    *run.Runs
	k     *kernel.Kernel
	st    *sqlite.SQLite
	p     *scriptmodel.Model
	tools *recTools
}

func open(t *testing.T, dir string, human ...string) *rig {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	r := &rig{st: st, p: twoCalls(), tools: &recTools{human: map[string]bool{}}}
	for _, h := range human {
		r.tools.human[h] = true
	}
	r.rs = run.New(run.Deps{Provider: r.p, Runner: r.tools, Human: human,
		Tools: []model.Tool{{Name: "lookup"}, {Name: "transfer"}, {Name: "ask"}}})
	r.k, err = kernel.Open(ctx, st, kernel.Options{Flows: r.rs.Flows(), BeforeRecovery: r.rs.Bind, Divergence: kernel.DivergenceFail})
	require.NoError(t, err)
	return r
}

func (r *rig) close() { r.k.Close(); r.st.Close() }

// waitFor polls the run until it has the status.
func waitFor(t *testing.T, r *rig, id, status string) run.View {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := r.rs.Get(context.Background(), alice, id)
		require.NoError(t, err)
		if v.Status == status {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: status %s, want %s: %+v", id, v.Status, status, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGatesFirstThenCalls(t *testing.T) {
	ctx := context.Background()
	r := open(t, t.TempDir())
	defer r.close()
	v, _, err := r.rs.Start(ctx, alice, run.Options{ID: "g1", Prompt: "pay", Approval: run.NeedsApprovalRule(true, nil)})
	require.NoError(t, err)
	w := waitFor(t, r, v.ID, run.StatusWaiting)
	require.Equal(t, []run.Pending{{Kind: "approval", ID: "t1-c0", Name: "lookup", Arguments: json.RawMessage(`{"q":1}`)}}, w.Pending)
	require.Empty(t, r.tools.names(), "a parked turn runs none of its calls")
	_, err = r.rs.Approve(ctx, alice, v.ID, "t1-c1", true)
	require.ErrorIs(t, err, run.ErrNotPending, "the second gate is not asked before the first is answered")
	_, err = r.rs.Approve(ctx, alice, v.ID, "t1-c0", true)
	require.NoError(t, err)
	_, err = r.rs.Approve(ctx, alice, v.ID, "t1-c0", true)
	require.NoError(t, err, "the same answer again")
	_, err = r.rs.Approve(ctx, alice, v.ID, "t1-c0", false)
	require.ErrorIs(t, err, run.ErrNotPending, "the other answer after the first")
	w = waitFor(t, r, v.ID, run.StatusWaiting)
	require.Equal(t, "t1-c1", w.Pending[0].ID)
	require.Empty(t, r.tools.names(), "still nothing ran")
	_, err = r.rs.Approve(ctx, alice, v.ID, "t1-c1", false)
	require.NoError(t, err)
	done := waitFor(t, r, v.ID, run.StatusCompleted)
	require.Equal(t, `{"tool":"lookup"} | {"error":"not approved"}`, *done.Output)
	require.Equal(t, []string{"lookup"}, r.tools.names())
}

func TestHumanToolAsksAgainAfterRestartAndConsumesOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := open(t, dir, "transfer")
	v, _, err := r.rs.Start(ctx, alice, run.Options{ID: "h1", Prompt: "pay", Parallel: -1})
	require.NoError(t, err)
	w := waitFor(t, r, v.ID, run.StatusWaiting)
	require.Equal(t, []run.Pending{{Kind: "human", ID: "t1-c1", Name: "transfer", Arguments: json.RawMessage(`{"amount":5}`)}}, w.Pending)
	// The wait is announced before the ask reaches the tool server.
	require.Eventually(t, func() bool { return len(r.tools.names()) == 2 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"lookup", "transfer"}, r.tools.names())
	first := r.tools.call(1)
	r.close()
	r = open(t, dir, "transfer")
	defer r.close()
	waitFor(t, r, v.ID, run.StatusWaiting)
	require.Eventually(t, func() bool { return len(r.tools.names()) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, first, r.tools.call(0), "asked again with the same key")
	_, err = r.rs.AnswerHuman(ctx, alice, v.ID, "t1-c1", json.RawMessage(`{"sent":true}`))
	require.NoError(t, err)
	done := waitFor(t, r, v.ID, run.StatusCompleted)
	require.Equal(t, `{"tool":"lookup"} | {"sent":true}`, *done.Output)
	_, err = r.rs.AnswerHuman(ctx, alice, v.ID, "t1-c1", json.RawMessage(`{"sent": true}`))
	require.NoError(t, err, "the same answer again, after the run ended")
	_, err = r.rs.AnswerHuman(ctx, alice, v.ID, "t1-c1", json.RawMessage(`{"sent":false}`))
	require.ErrorIs(t, err, run.ErrNotPending)
	require.Equal(t, []string{"transfer"}, r.tools.names(), "consumed once: nothing asked again")
}

// journal is the kernel log of a run, every event's kind and data (times dropped, since they are
// the clock's, not the run's).
func journal(t *testing.T, r *rig, id string) []byte {
	evs, err := r.k.ReadLog(context.Background(), id, 0, 0, kernel.MaxRead)
	require.NoError(t, err)
	var b bytes.Buffer
	for _, ev := range evs {
		data := ev.Data
		if ev.Kind == "signal.taken" {
			var m map[string]any
			require.NoError(t, json.Unmarshal(data, &m))
			delete(m, "time")
			data, _ = json.Marshal(m)
		}
		fmt.Fprintf(&b, "%d %s %s\n", ev.Seq, ev.Kind, data)
	}
	return b.Bytes()
}

// The same effective decision spelled needsApproval or requireApproval records the same journal,
// byte for byte.
func TestBothSpellingsRecordOneJournal(t *testing.T) {
	ctx := context.Background()
	record := func(rule *run.ApprovalRule, deprecated bool) []byte {
		r := open(t, t.TempDir())
		defer r.close()
		v, _, err := r.rs.Start(ctx, alice, run.Options{ID: "same", Prompt: "pay", Approval: rule, RequireApproval: deprecated})
		require.NoError(t, err)
		waitFor(t, r, v.ID, run.StatusWaiting)
		_, err = r.rs.Approve(ctx, alice, v.ID, "t1-c1", false)
		require.NoError(t, err)
		waitFor(t, r, v.ID, run.StatusCompleted)
		return journal(t, r, v.ID)
	}
	needs := record(run.NeedsApprovalRule(false, map[string]bool{"lookup": false}), false)
	require.Equal(t, string(needs), string(record(run.RequireApprovalRule(false, map[string]bool{"lookup": true}), true)))
	require.Contains(t, string(needs), `"approval:t1-c1"`)
}
