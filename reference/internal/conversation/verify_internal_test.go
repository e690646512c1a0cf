package conversation

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// Every refusal of a request's content names its field (a *loomtype.BadRequestError).
func TestBadRequestsNameTheirField(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	dl, err := New(Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, Deps{}, nil)
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	defer k.Close()
	cv := dl.Client(k)
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	field := func(err error) loomtype.BadRequestError {
		t.Helper()
		var br *loomtype.BadRequestError
		require.ErrorAs(t, err, &br)
		return *br
	}
	_, _, err = cv.Start(ctx, alice, StartOptions{Mode: "group"})
	require.Equal(t, loomtype.BadRequestError{Field: "mode", Reason: "unknown mode"}, field(err))
	_, _, err = cv.Start(ctx, alice, StartOptions{Mode: ModeShared})
	require.Equal(t, loomtype.BadRequestError{Field: "mode", Reason: "shared mode is not configured"}, field(err))
	_, _, err = cv.Start(ctx, alice, StartOptions{Participants: []loomtype.Identity{{Tenant: "acme", Actor: "bob"}}})
	require.Equal(t, loomtype.BadRequestError{Field: "participants", Reason: "participants need shared mode"}, field(err))
	s, _, err := cv.Start(ctx, alice, StartOptions{})
	require.NoError(t, err)
	_, err = cv.SendTurn(ctx, alice, s.ID, "hi", SendOptions{MessageID: "\x01"})
	require.Equal(t, loomtype.BadRequestError{Field: "messageId"}, field(err))
	_, err = cv.SendTurn(ctx, alice, s.ID, "hi", SendOptions{EditOf: -1})
	require.Equal(t, loomtype.BadRequestError{Field: "editOf"}, field(err))
	_, err = cv.History(ctx, alice, s.ID, HistoryOptions{Direction: "sideways"})
	require.Equal(t, loomtype.BadRequestError{Field: "direction"}, field(err))
	_, err = cv.ChangeParticipants(ctx, alice, s.ID, "add", alice)
	require.Equal(t, loomtype.BadRequestError{Field: "mode", Reason: "an owner-only conversation has no participants to manage"}, field(err))
}
