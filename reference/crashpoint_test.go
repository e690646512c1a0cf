package reference_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// A shared conversation's start is two writes: the conversation, then its participants. A crash
// between them (found by `loomcheck explore`, dialogue "shared", crash after write 1) left a
// conversation nobody could reach, and its retry answered 404 forever; the retry must finish it.
func TestSharedStartCrashedBeforeItsParticipantsIsFinishedByItsRetry(t *testing.T) {
	ctx := context.Background()
	svc := sutconfig.Principal{Tenant: "acme", Actor: "loom-service"}
	cfg := sutconfig.SUTConfig{Identity: sutconfig.IdentityConfig{Insecure: true}, Shared: sutconfig.SharedConfig{ServicePrincipal: &svc}}
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	bob := loomtype.Identity{Tenant: "acme", Actor: "bob"}
	opt := conversation.StartOptions{ID: "c-shared", Mode: conversation.ModeShared, Participants: []loomtype.Identity{bob}}

	eng := reftest.Open(t, reftest.Config(cfg))
	crashed := eng.CrashAfterWrite(1)
	_, _, err := eng.Conversations().Start(ctx, alice, opt)
	require.ErrorIs(t, err, loomtype.ErrStoreClosed, "the participants' write comes after the crash point")
	select {
	case <-crashed:
	case <-time.After(10 * time.Second):
		t.Fatal("the crash point was never reached")
	}
	eng.Crash()

	eng.Restart()
	st, created, err := eng.Conversations().Start(ctx, alice, opt)
	require.NoError(t, err, "the owner's retry of the start")
	require.False(t, created, "the conversation itself was recorded before the crash")
	require.Equal(t, conversation.ModeShared, st.Mode)
	pl, err := eng.Conversations().Participants(ctx, bob, st.ID)
	require.NoError(t, err, "bob is a participant")
	require.Equal(t, []loomtype.Identity{alice, bob}, pl.Participants)
}
