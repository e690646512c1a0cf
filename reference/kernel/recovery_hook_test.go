package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// BeforeRecovery runs before any recovered execution does: a flow that reaches the kernel through
// its owner finds it from its first step. (A shared conversation recovered right after its turn's
// verdict used to reach a nil kernel at its next step and fail for good: loomcheck explore,
// dialogue "shared".)
func TestBeforeRecoveryPrecedesEveryRecoveredExecution(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	var bound atomic.Pointer[kernel.Kernel]
	seen := make(chan *kernel.Kernel, 512)
	flow := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		seen <- bound.Load()
		_, err := c.Receive()
		return nil, err
	}
	open := func() (*sqlite.SQLite, *kernel.Kernel) {
		st, err := sqlite.Open(ctx, path, sqlite.Options{})
		require.NoError(t, err)
		k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"f": flow},
			BeforeRecovery: func(k *kernel.Kernel) { bound.Store(k) }})
		require.NoError(t, err)
		return st, k
	}
	next := func() *kernel.Kernel {
		select {
		case k := <-seen:
			return k
		case <-time.After(10 * time.Second):
			t.Fatal("the flow did not run")
			return nil
		}
	}

	// Many executions, so that one launched early would run long before the last is launched.
	const n = 200
	st, k := open()
	for i := range n {
		_, err := k.Start(ctx, kernel.StartRequest{ID: fmt.Sprintf("x%d", i), Flow: "f", Principal: alice})
		require.NoError(t, err)
		require.Same(t, k, next())
	}
	st.Kill()
	k.Close()
	bound.Store(nil)

	st, k = open()
	defer func() { k.Close(); st.Close() }()
	for range n {
		require.Same(t, k, next(), "a recovered execution ran before the hook")
	}
}

// An execution that awaits another after a recovery finds it running, whatever order the two are
// recovered in. (A shared conversation recovered before its turn's execution used to find the turn
// not yet launched, take it for one that had ended open, and record the turn as failed: loomcheck
// explore, dialogue "shared".)
func TestAwaitAfterRecoveryWaitsForARecoveredExecution(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "loom.db")
	var bound atomic.Pointer[kernel.Kernel]
	parent := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		return c.Execute("await the child", func(ctx context.Context) (json.RawMessage, error) {
			info, err := bound.Load().Await(ctx, "z-child")
			if err != nil {
				return nil, err
			}
			return json.Marshal(info.State)
		})
	}
	child := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) {
		_, err := c.Receive()
		return nil, err
	}
	open := func() (*sqlite.SQLite, *kernel.Kernel) {
		st, err := sqlite.Open(ctx, path, sqlite.Options{})
		require.NoError(t, err)
		k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"parent": parent, "child": child},
			BeforeRecovery: func(k *kernel.Kernel) { bound.Store(k) }})
		require.NoError(t, err)
		return st, k
	}
	st, k := open()
	_, err := k.Start(ctx, kernel.StartRequest{ID: "z-child", Flow: "child", Principal: alice})
	require.NoError(t, err)
	// Executions recovered between the two, so the parent, recovered first, runs well before the
	// child would be launched.
	for i := range 200 {
		_, err := k.Start(ctx, kernel.StartRequest{ID: fmt.Sprintf("m-%03d", i), Flow: "child", Principal: alice})
		require.NoError(t, err)
	}
	_, err = k.Start(ctx, kernel.StartRequest{ID: "a-parent", Flow: "parent", Principal: alice})
	require.NoError(t, err)
	st.Kill()
	k.Close()

	st, k = open()
	defer func() { k.Close(); st.Close() }()
	_, err = k.Send(ctx, "z-child", alice, "go", json.RawMessage(`{}`))
	require.NoError(t, err)
	info, err := k.Await(ctx, "a-parent")
	require.NoError(t, err)
	require.Equal(t, kernel.StateCompleted, info.State, info.Error)
	require.JSONEq(t, `"completed"`, string(info.Output), "the parent saw the child complete, not seemingly ended open")
}
