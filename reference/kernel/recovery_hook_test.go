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
	"github.com/loomcheck/loomcheck/reference/store"
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
	open := func() (*store.SQLite, *kernel.Kernel) {
		st, err := store.Open(ctx, path, store.Options{})
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
