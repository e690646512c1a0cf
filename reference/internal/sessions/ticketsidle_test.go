package sessions_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// TicketsIdle is closed while no ticket waits, stays open while one does, and closes when the
// last one waiting is presented, or expires.
func TestTicketsIdleClosesWhenNoTicketWaits(t *testing.T) {
	ctx := context.Background()
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	const ttl = 2 * time.Second
	eng := reftest.Open(t, reftest.As(alice), reftest.With(func(o *reference.Options) { o.Stream.TicketTTL = ttl }))
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	require.True(t, reftest.IsClosed(ss.TicketsIdle()), "no ticket waits")

	first, err := ss.Open(ctx, alice, st.ID, 0, "")
	require.NoError(t, err)
	second, err := ss.Open(ctx, alice, st.ID, 0, "")
	require.NoError(t, err)
	idle := ss.TicketsIdle()
	_, err = ss.Redeem(first.Ticket, alice, "")
	require.NoError(t, err)
	require.Equal(t, 1, ss.TicketsWaiting())
	require.False(t, reftest.IsClosed(idle), "one ticket waits still")
	_, err = ss.Redeem(second.Ticket, alice, "")
	require.NoError(t, err)
	require.True(t, reftest.IsClosed(idle), "the last ticket waiting was presented")

	// One left to expire: the channel closes when it does, not before.
	third, err := ss.Open(ctx, alice, st.ID, 0, "")
	require.NoError(t, err)
	idle = ss.TicketsIdle()
	require.True(t, reftest.ClosesWithin(idle), "the last ticket waiting expired")
	require.False(t, time.Now().Before(third.Expires), "closed before the ticket expired")
	require.Zero(t, ss.TicketsWaiting())
}
