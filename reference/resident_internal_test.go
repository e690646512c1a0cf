package reference

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// The resident share of these tests: logs of rLog bytes, and a caller's share of two of them
// (stream.maxBytes, stream.principalResidentBytes).
const (
	rLog   = 4096
	rShare = 2
)

func residentShare(o *Options) {
	o.Stream.Limits.MaxBytes = rLog
	o.Stream.PrincipalResidentBytes = rShare * rLog
}

// residentRefused checks err is the refusal of a caller holding its share of the resident logs.
func residentRefused(t *testing.T, err error) {
	t.Helper()
	var qe *sessions.QuotaError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, sessions.QuotaResident, qe.Reason)
	require.EqualValues(t, rShare*rLog, qe.Max)
}

// Two engines of one store (two partitions) hold one caller's share of the resident frame logs
// between them: a session opened on each (a ticket waits for both), and one more is refused on
// both; another caller is not affected; once the ticket of one is presented, the engine that holds
// it lets it go for the caller's next session there, and the other engine still refuses.
func TestResidentSessionsAreCountedAcrossPartitions(t *testing.T) {
	ctx := context.Background()
	raw := sharedStore(t)
	a, b := partitionEngine(t, raw, 0, residentShare), partitionEngine(t, raw, 1, residentShare)
	ca, cb := conversationOf(t, a, qAlice), conversationOf(t, b, qAlice)
	_, err := a.ss.Open(ctx, qAlice, ca, 0, "")
	require.NoError(t, err)
	opb, err := b.ss.Open(ctx, qAlice, cb, 0, "")
	require.NoError(t, err)
	_, err = a.ss.Open(ctx, qAlice, conversationOf(t, a, qAlice), 0, "")
	residentRefused(t, err)
	nextB := conversationOf(t, b, qAlice)
	_, err = b.ss.Open(ctx, qAlice, nextB, 0, "")
	residentRefused(t, err)
	_, err = b.ss.Open(ctx, qBob, conversationOf(t, b, qBob), 0, "")
	require.NoError(t, err, "another principal")

	_, err = b.ss.Redeem(opb.Ticket, qAlice, "")
	require.NoError(t, err)
	require.NoError(t, b.ss.Hold(ctx, qAlice, nextB), "cb, read by nobody, is let go")
	residentRefused(t, a.ss.Hold(ctx, qAlice, conversationOf(t, a, qAlice)))
}

// Two nodes on one PostgreSQL database of four partitions: the sessions a caller holds resident on
// engines of different partitions and nodes count against one stream.principalResidentBytes;
// once a node is gone and the other has taken its partitions over, the sessions its engines held
// no longer count.
func TestResidentShareAcrossTheNodesOfAPartitionedDatabase(t *testing.T) {
	const p = 4
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	a, _ := partitionedNode(t, url, "node-a", p, func(i int) bool { return i < 2 }, residentShare)
	waitHeld(t, a, 0, 1)
	b, _ := partitionedNode(t, url, "node-b", p, nil, residentShare)
	waitHeld(t, b, 2, 3)
	conv := func(n *Node, i int) string {
		s, _, err := n.engineOf(i).Conversations().Start(ctx, anonymous, conversation.StartOptions{ID: chosenIn(t, i, p)})
		require.NoError(t, err)
		return s.ID
	}
	open := func(n *Node, i int, id string) error {
		_, err := n.engineOf(i).ss.Open(ctx, anonymous, id, 0, "")
		return err
	}
	c0, c1, c2, c3 := conv(a, 0), conv(a, 1), conv(b, 2), conv(b, 3)
	require.NoError(t, open(a, 0, c0))
	require.NoError(t, open(b, 2, c2))
	residentRefused(t, open(a, 1, c1))
	residentRefused(t, open(b, 3, c3))
	require.NoError(t, open(a, 0, c0), "a session the caller holds already")
	other := loomtype.Identity{Actor: "other"}
	s, _, err := b.engineOf(3).Conversations().Start(ctx, other, conversation.StartOptions{})
	require.NoError(t, err)
	_, err = b.engineOf(3).ss.Open(ctx, other, s.ID, 0, "")
	require.NoError(t, err, "another principal")

	require.NoError(t, a.Close())
	waitHeld(t, b, 0, 1, 2, 3)
	require.NoError(t, open(b, 1, c1), "c0, held on the node that is gone, no longer counts")
	residentRefused(t, open(b, 3, c3))
}
