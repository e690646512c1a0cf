package sessions

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/quota"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// openView opens a kernel on the namespace ns of st, closed at the end of the test.
func openView(t *testing.T, st store.Store, ns string, flows map[string]kernel.Flow) *kernel.Kernel {
	t.Helper()
	view, err := store.Namespace(st, ns)
	require.NoError(t, err)
	k, err := kernel.Open(context.Background(), view, kernel.Options{Flows: flows})
	require.NoError(t, err)
	t.Cleanup(func() { k.Close() })
	return k
}

// putBranches puts recs into the branch table of k.
func putBranches(t *testing.T, k *kernel.Kernel, recs map[string]branchRecord) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, branches.Open(ctx, k))
	require.NoError(t, k.Update(ctx, func(tx *kernel.Tx) error {
		for key, rec := range recs {
			if err := branches.Put(tx, key, rec); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestResumeMovesTheBranchKeysToTheSharedNamespace: a partition's engine that kept its branch
// keys with its own records (as every engine did before they were shared) finds them in the
// global namespace after Resume, and none left behind; a key the global namespace holds already
// keeps the branch it was bound to there. A second Resume moves nothing.
func TestResumeMovesTheBranchKeysToTheSharedNamespace(t *testing.T) {
	ctx := context.Background()
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, conversation.Deps{}, live.NewHub(0))
	require.NoError(t, err)
	k := openView(t, st, store.PartitionNamespace(1), dl.Flows())
	gk := openView(t, st, quota.Namespace, nil)

	moved, kept := branchKey(alice, "b-1"), branchKey(alice, "b-2")
	putBranches(t, k, map[string]branchRecord{
		moved: {From: "c1", Message: "m1", Session: "branch-1"},
		kept:  {From: "c1", Message: "m2", Session: "branch-2"},
	})
	putBranches(t, gk, map[string]branchRecord{kept: {From: "c9", Message: "m9", Session: "branch-9"}})

	svc := New(k, dl.Client(k), Config{Shared: gk})
	t.Cleanup(svc.Close)
	require.NoError(t, svc.Resume(ctx))
	rows, err := branches.All(ctx, gk, "")
	require.NoError(t, err)
	require.Equal(t, []kernel.Row[branchRecord]{
		{Key: moved, Value: branchRecord{From: "c1", Message: "m1", Session: "branch-1"}},
		{Key: kept, Value: branchRecord{From: "c9", Message: "m9", Session: "branch-9"}},
	}, rows)
	left, err := branches.All(ctx, k, "")
	require.NoError(t, err)
	require.Empty(t, left)

	require.NoError(t, svc.Resume(ctx), "a second open finds nothing to move")
	again, err := branches.All(ctx, gk, "")
	require.NoError(t, err)
	require.Equal(t, rows, again)

}
