package participants_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/participants"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

var (
	alice = loomtype.Identity{Tenant: "acme", Actor: "alice"}
	bob   = loomtype.Identity{Tenant: "acme", Actor: "bob"}
	carol = loomtype.Identity{Tenant: "acme", Actor: "carol"}
)

// The set read back is what the recorded changes make it, in order, with every change and who
// made it; a second Init is refused and Finish keeps what is recorded; another book (a restart)
// reads the same.
func TestBookRecordsAndReadsBack(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	k, err := kernel.Open(ctx, st, kernel.Options{})
	require.NoError(t, err)
	defer k.Close()

	var b participants.Book
	require.NoError(t, b.Init(ctx, k, "c1", alice, []loomtype.Identity{bob, alice, bob}))
	require.ErrorIs(t, b.Init(ctx, k, "c1", alice, []loomtype.Identity{carol}), kernel.ErrConflict)
	require.NoError(t, b.Finish(ctx, k, "c1", alice, []loomtype.Identity{carol}))
	set, err := b.Read(ctx, k, "c1")
	require.NoError(t, err)
	require.Equal(t, participants.Set{Head: 2, Members: []loomtype.Identity{alice, bob}, Changes: []participants.Change{
		{Op: participants.OpAdd, Identity: alice, By: alice}, {Op: participants.OpAdd, Identity: bob, By: alice}}}, set)

	require.NoError(t, b.Record(ctx, k, "c1", participants.Change{Op: participants.OpAdd, Identity: carol, By: alice}))
	require.NoError(t, b.Record(ctx, k, "c1", participants.Change{Op: participants.OpRemove, Identity: bob, By: alice}))
	want := participants.Set{Head: 4, Members: []loomtype.Identity{alice, carol}, Changes: []participants.Change{
		{Op: participants.OpAdd, Identity: alice, By: alice}, {Op: participants.OpAdd, Identity: bob, By: alice},
		{Op: participants.OpAdd, Identity: carol, By: alice}, {Op: participants.OpRemove, Identity: bob, By: alice}}}
	set, err = b.Read(ctx, k, "c1")
	require.NoError(t, err)
	require.Equal(t, want, set)
	var again participants.Book
	set, err = again.Read(ctx, k, "c1")
	require.NoError(t, err)
	require.Equal(t, want, set)

	require.NoError(t, b.Finish(ctx, k, "c2", bob, nil), "a start that recorded nothing is finished")
	set, err = b.Read(ctx, k, "c2")
	require.NoError(t, err)
	require.Equal(t, []loomtype.Identity{bob}, set.Members)
}
