package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// TestDedupeWindowSharePerSender: each sender has its own DedupeWindow of message keys in an
// execution, so one sender's flood of new messages never pushes another sender's key out; a
// sender's own key is forgotten after DedupeWindow newer messages of that same sender.
func TestDedupeWindowSharePerSender(t *testing.T) {
	const window = 4
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	var calls atomic.Int64
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"echo": echo(&calls)}, DedupeWindow: window})
	require.NoError(t, err)
	t.Cleanup(func() { k.Close(); st.Close() })
	_, err = k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	bob := loomtype.Identity{Tenant: "acme", Actor: "bob"}
	say := func(who loomtype.Identity, id string) bool {
		t.Helper()
		b, _ := json.Marshal(id)
		ok, err := k.Send(ctx, "c1", who, id, b)
		require.NoError(t, err)
		return ok
	}
	require.True(t, say(alice, "a-0"))
	for i := range 2 * window {
		require.True(t, say(bob, fmt.Sprintf("b-%d", i)))
	}
	require.False(t, say(alice, "a-0"), "another sender's flood does not push alice's key out")
	for i := 1; i < window; i++ {
		require.True(t, say(alice, fmt.Sprintf("a-%d", i)))
	}
	require.False(t, say(alice, "a-0"), "alice's key is kept while fewer than the window of her messages follow it")
	require.True(t, say(alice, fmt.Sprintf("a-%d", window)))
	require.True(t, say(alice, "a-0"), "past her own window, alice's key is forgotten")
	require.False(t, say(bob, fmt.Sprintf("b-%d", 2*window-1)), "bob's newest key is still his")
}

// TestDedupeWindowShareOnBehalf: a host that delivers for several participants counts each
// message against the participant's window, not its own.
func TestDedupeWindowShareOnBehalf(t *testing.T) {
	const window = 4
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	var calls atomic.Int64
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{"echo": echo(&calls)}, DedupeWindow: window})
	require.NoError(t, err)
	t.Cleanup(func() { k.Close(); st.Close() })
	_, err = k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	host := loomtype.Identity{Tenant: "acme", Actor: "host"}
	bob := loomtype.Identity{Tenant: "acme", Actor: "bob"}
	say := func(who loomtype.Identity, id string) bool {
		t.Helper()
		b, _ := json.Marshal(id)
		ok, err := k.SendInShare(ctx, "c1", host, who, kernel.SenderKey(who, id), b)
		require.NoError(t, err)
		return ok
	}
	require.True(t, say(alice, "m"))
	for i := range 2 * window {
		require.True(t, say(bob, fmt.Sprintf("b-%d", i)))
	}
	require.False(t, say(alice, "m"), "bob's flood through the host does not push alice's key out")
	require.True(t, say(bob, "m"), "the same message id from bob is his own message")
}
