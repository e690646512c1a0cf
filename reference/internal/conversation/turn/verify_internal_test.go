package turn

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation/record"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// TestVerifyTurnComparesEveryMember: an execution found at a turn's id is adopted only when its
// input is that very turn: each member differing alone (the asker in each identity field
// alone, too) makes it another turn, even when the execution runs as the right principal.
func TestVerifyTurnComparesEveryMember(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	cv := New(record.Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, record.Deps{}, nil)
	hold := func(c *kernel.Context, _ json.RawMessage) (json.RawMessage, error) { return nil, nil }
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: map[string]kernel.Flow{record.TurnFlowName: hold}})
	require.NoError(t, err)
	defer k.Close()

	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	want := turnInput{V: 1, ConversationID: "c1", Ord: 3, Turn: 2, Asker: alice, MessageID: "m1", Text: "hi"}
	cases := map[string]func(in *turnInput){
		"the same turn":        func(*turnInput) {},
		"conversation":         func(in *turnInput) { in.ConversationID = "c2" },
		"ord":                  func(in *turnInput) { in.Ord = 4 },
		"turn":                 func(in *turnInput) { in.Turn = 3 },
		"asker's tenant":       func(in *turnInput) { in.Asker.Tenant = "evil" },
		"asker without tenant": func(in *turnInput) { in.Asker.Tenant = "" },
		"asker's actor":        func(in *turnInput) { in.Asker.Actor = "mallory" },
		"asker's onBehalfOf":   func(in *turnInput) { in.Asker.OnBehalfOf = "bob" },
		"message id":           func(in *turnInput) { in.MessageID = "m2" },
		"text":                 func(in *turnInput) { in.Text = "hi!" },
	}
	n := 0
	for name, change := range cases {
		n++
		got := want
		change(&got)
		raw, err := json.Marshal(got)
		require.NoError(t, err)
		info, err := k.Start(ctx, kernel.StartRequest{ID: "turn-" + string(rune('a'+n)), Flow: record.TurnFlowName, Input: raw, Principal: alice})
		require.NoError(t, err, name)
		err = cv.verifyTurn(ctx, k, info, want)
		if name == "the same turn" {
			require.NoError(t, err, name)
			continue
		}
		require.Error(t, err, "%s: an execution started for another turn must not be adopted", name)
	}
}
