package run_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/agent"
	"github.com/loomcheck/loomcheck/reference/internal/hostio"
	"github.com/loomcheck/loomcheck/reference/internal/run"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// writeLog is a memory that counts its writes and a hook that keeps its reports, shared by
// the lives of one store.
type writeLog struct {
	mu      sync.Mutex
	writes  int
	reports []report
}

type report struct {
	id  string
	err error
}

func (w *writeLog) Recall(context.Context, string, string) ([]hostio.MemoryEntry, error) {
	return nil, nil
}

func (w *writeLog) Write(context.Context, string, []hostio.MemoryEntry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return nil
}

func (w *writeLog) onError(id string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reports = append(w.reports, report{id, err})
}

// openWriteBack opens the runs on the store at path; alice is granted "remember" only when
// granted says so.
func openWriteBack(t *testing.T, path string, granted bool, tools *recTools, log *writeLog) (*run.Runs, *kernel.Kernel, *sqlite.SQLite) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	require.NoError(t, err)
	rs := run.New(run.Deps{Provider: echoRequests(), Runner: tools, Memory: log, OnError: log.onError,
		Tools:   []model.Tool{{Name: "lookup"}, {Name: "remember"}},
		Allowed: func(_ loomtype.Identity, tool string) bool { return granted || tool != "remember" }})
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: rs.Flows(), BeforeRecovery: rs.Bind, Divergence: kernel.DivergenceFail})
	require.NoError(t, err)
	return rs, k, st
}

// endOf polls the run until it has ended; ok is false once the store has crashed.
func endOf(t *testing.T, rs *run.Runs, id string, crashed <-chan struct{}) (run.View, bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-crashed:
			return run.View{}, false
		default:
		}
		v, err := rs.Get(context.Background(), alice, id)
		if err == nil && v.Status != run.StatusRunning {
			return v, true
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", id)
	return run.View{}, false
}

// A write-back through a tool the owner is not granted is an authority denial: the tool is
// never called and nothing is written, the run fails "denied" with an error id, and the hook is
// told of it as a *agent.DeniedError naming the tool. The same holds at every point a crash can
// cut the run, and the error id the run carries is the one the hook was told. A granted owner's
// write-back is one call of the tool, under one key, whatever the crash.
func TestWriteBackIsHeldToTheOwnersGrants(t *testing.T) {
	for _, granted := range []bool{false, true} {
		t.Run(map[bool]string{false: "denied", true: "granted"}[granted], func(t *testing.T) {
			completed := false
			for n := int64(1); !completed; n++ {
				path := filepath.Join(t.TempDir(), "loom.db")
				tools, log := &recTools{}, &writeLog{}
				rs, k, st := openWriteBack(t, path, granted, tools, log)
				crashed := st.CrashAfterWrite(n)
				v, _, err := rs.Start(context.Background(), alice, run.Options{ID: "wb", Prompt: "check pump 3",
					WriteBack: &run.WriteBack{ToolID: "remember"}})
				if err != nil {
					_ = k.Close()
					_ = st.Close()
					continue // the crash took the start itself: there is no run
				}
				id := v.ID
				v, completed = endOf(t, rs, id, crashed)
				_ = k.Close()
				_ = st.Close()
				if !completed {
					rs, k, st = openWriteBack(t, path, granted, tools, log)
					v, _ = endOf(t, rs, id, nil)
					_ = k.Close()
					_ = st.Close()
				}
				log.mu.Lock()
				reports, writes := log.reports, log.writes
				log.mu.Unlock()
				require.Zero(t, writes, "crash after write %d: the memory is never written directly", n)
				if granted {
					require.Equal(t, run.StatusCompleted, v.Status, "crash after write %d", n)
					require.Empty(t, reports)
					calls := tools.names()
					require.NotEmpty(t, calls, "crash after write %d", n)
					for i := range calls {
						require.Equal(t, "remember", calls[i])
						require.Equal(t, strings.Fields(tools.call(0))[1], strings.Fields(tools.call(i))[1], "one idempotency key")
					}
					continue
				}
				require.Equal(t, run.StatusFailed, v.Status, "crash after write %d", n)
				require.Equal(t, loomtype.ReasonDenied, v.Reason)
				require.Nil(t, v.Output)
				require.NotEmpty(t, v.ErrorID)
				require.Empty(t, tools.names(), "crash after write %d: the tool is never called", n)
				require.NotEmpty(t, reports)
				require.Equal(t, v.ErrorID, reports[len(reports)-1].id, "the run's error id is the one reported")
				for _, r := range reports {
					var d *agent.DeniedError
					require.True(t, errors.As(r.err, &d), "%v", r.err)
					require.Equal(t, "remember", d.Tool)
					require.ErrorIs(t, r.err, agent.ErrDenied)
				}
			}
		})
	}
}

// The verdict is recorded around the write: a denied run's journal holds it with the run's
// error id and no step of the tool; a granted run's holds the tool's step and then the verdict.
func TestWriteBackVerdictIsJournaled(t *testing.T) {
	for _, granted := range []bool{false, true} {
		tools, log := &recTools{}, &writeLog{}
		rs, k, st := openWriteBack(t, filepath.Join(t.TempDir(), "loom.db"), granted, tools, log)
		v, _, err := rs.Start(context.Background(), alice, run.Options{Prompt: "check pump 3",
			WriteBack: &run.WriteBack{ToolID: "remember"}})
		require.NoError(t, err)
		v, _ = endOf(t, rs, v.ID, nil)
		j := string(journal(t, &rig{k: k}, v.ID))
		_ = k.Close()
		_ = st.Close()
		grant := strings.Index(j, `#writeback:grant"`)
		step := strings.Index(j, `#writeback"`)
		require.GreaterOrEqual(t, grant, 0, j)
		if granted {
			require.Less(t, step, grant, "the tool's step comes first, inside the verdict:\n%s", j)
			require.NotContains(t, j, `"denied"`)
			continue
		}
		require.Equal(t, -1, step, "no step of the tool:\n%s", j)
		require.Contains(t, j, `{"denied":true,"errorId":"`+v.ErrorID+`"}`)
	}
}
