package conversation_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TestChosenIDIsTheOwnersOwn: a chosen id becomes one conversation id per identity: the same for
// an equal identity, another for an identity that differs in any one field (an absent tenant
// included), always a valid conversation id that keeps the chosen one readable, and never one
// a minted id or another chosen id can be.
func TestChosenIDIsTheOwnersOwn(t *testing.T) {
	alice := loomtype.Identity{Tenant: "acme", Actor: "alice"}
	id := conversation.ChosenID(alice, "plan-1")
	require.Equal(t, id, conversation.ChosenID(loomtype.Identity{Tenant: "acme", Actor: "alice"}, "plan-1"))
	require.True(t, strings.HasPrefix(id, "plan-1."), id)
	require.Len(t, id, len("plan-1.")+24)
	seen := map[string]string{id: "alice"}
	for name, who := range map[string]loomtype.Identity{
		"another tenant": {Tenant: "evil", Actor: "alice"},
		"no tenant":      {Actor: "alice"},
		"another actor":  {Tenant: "acme", Actor: "bob"},
		"onBehalfOf":     {Tenant: "acme", Actor: "alice", OnBehalfOf: "bob"},
		"fields shifted": {Tenant: "acme/alice", Actor: ""},
	} {
		other := conversation.ChosenID(who, "plan-1")
		require.NotContains(t, seen, other, "%s gets an id of its own", name)
		seen[other] = name
	}
	require.NotEqual(t, id, conversation.ChosenID(alice, "plan-2"))
	require.NotEqual(t, id, conversation.ChosenID(alice, id), "a chosen id that looks like a derived one is derived again")

	long := "a" + strings.Repeat("b", 127)
	require.True(t, conversation.ValidID(long))
	got := conversation.ChosenID(alice, long)
	require.True(t, conversation.ValidID(got), "at most 128 characters: %d", len(got))
	require.Len(t, got, 128)
	require.NotEqual(t, got, conversation.ChosenID(alice, long[:127]+"c"), "ids that share the kept head still differ")
}
