package sessions

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
)

// Two values of one session loaded at the same head (a session put out of residence while its
// pump was still committing, and the one loaded in its place): the first commit takes the cursors
// after the head, and the second is refused, since its frames carry those same cursors. The log
// then reads back whole, every frame at its own cursor.
func TestASecondWriterOfAFrameLogIsRefused(t *testing.T) {
	r := newQueueRig(t, Config{})
	ctx := context.Background()
	r.status()
	a, err := r.svc.load(ctx, r.id)
	require.NoError(t, err)
	b, err := r.svc.load(ctx, r.id)
	require.NoError(t, err)
	require.Equal(t, a.log.Head(), b.log.Head())
	spec := stream.Spec{Kind: stream.KindStatus, Data: map[string]string{"state": "y"}}
	commit := func(ss *session) error {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		_, err := ss.commit(ctx, []stream.Spec{spec}, nil, ss.pos)
		return err
	}
	require.NoError(t, commit(a))
	require.ErrorIs(t, commit(b), kernel.ErrConflict, "the second writer's frames would take cursors already given")
	fresh, err := r.svc.load(ctx, r.id)
	require.NoError(t, err, "the log reads back, every frame at its cursor")
	require.Equal(t, a.log.Head(), fresh.log.Head())
}
