package dialogue_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// TestInvalidMessagesPastTheCapAreCountedEveryHundred: past maxInvalidRecords an invalid
// message is only counted, and the count is journaled once every 100 (at 100 and 200 of 201
// here), never for each message.
func TestInvalidMessagesPastTheCapAreCountedEveryHundred(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}, MaxInvalidRecords: 2, RotateEveryTurns: 1000}, conversation.Deps{}, nil)
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	defer k.Close()
	cv := dl.Client(k)
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	s, _, err := cv.Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	for range 201 {
		_, err := cv.SendTurn(ctx, alice, s.ID, " ", conversation.SendOptions{})
		require.NoError(t, err)
	}
	_, err = cv.SendTurn(ctx, alice, s.ID, "hello", conversation.SendOptions{})
	require.NoError(t, err)
	for deadline := time.Now().Add(time.Minute); ; {
		page, err := cv.History(ctx, alice, s.ID, conversation.HistoryOptions{Direction: conversation.Backward, Limit: 1})
		require.NoError(t, err)
		if len(page.Entries) == 1 && page.Entries[0].Role == loomtype.RoleAssistant {
			break
		}
		require.False(t, time.Now().After(deadline), "the turn after the invalid messages was not answered")
		time.Sleep(10 * time.Millisecond)
	}
	var dropped []string
	for after := int64(0); ; {
		evs, err := k.ReadLog(ctx, s.ID, 0, after, 500)
		require.NoError(t, err)
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if d := ev.Decision; d != nil && strings.HasPrefix(d.ID, strings.TrimSuffix(record.DroppedID(0), "0")) {
				dropped = append(dropped, d.ID)
			}
		}
		after = evs[len(evs)-1].Seq
	}
	require.Equal(t, []string{record.DroppedID(100), record.DroppedID(200)}, dropped)
}
