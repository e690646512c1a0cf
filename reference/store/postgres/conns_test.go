package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// Lease changes share the pool with the reads and writes, yet never wait behind them: with every
// connection the reads and writes may hold taken (Conns 2: a write left open, a read waiting for
// a table lock, and two more reads waiting for a connection; as many as the whole pool, were the
// reads not held to Conns), a renewal and a look at the holder still answer, and the reads and
// the write then finish.
func TestLeaseChangesDoNotWaitForBusyConnections(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{Conns: 2})
	l, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)

	free, wrote := heldWrite(t, st, "long", -1)

	// Another session holds the metadata table, so a read of it waits on its connection.
	locker := raw(t, url)
	lockTx, err := locker.Begin(bg)
	require.NoError(t, err)
	_, err = lockTx.Exec(bg, `LOCK TABLE public.meta IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	read := make(chan error, 3)
	for range 3 {
		go func() { _, _, err := st.Meta(bg, "k"); read <- err }()
	}
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, raw(t, url).QueryRow(bg, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT val%'`).Scan(&n))
		return n == 1
	}, 10*time.Second, 10*time.Millisecond, "one read waits for the table, holding the last connection")

	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	r, err := st.Renew(ctx, l, time.Minute)
	require.NoError(t, err, "renewed while the reads and writes held every connection of theirs")
	require.Equal(t, l.Token, r.Token)
	h, ok, err := st.Holder(ctx, "engine")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, r.Expires.UnixMilli(), h.Expires.UnixMilli())

	require.NoError(t, lockTx.Rollback(bg))
	free()
	require.NoError(t, <-wrote)
	for range 3 {
		require.NoError(t, <-read)
	}
}

// A write waiting for its write slot holds no connection meanwhile: with Conns 2 (one write at
// a time), one write held open and a second queued for the slot, a read still finds a connection
// (were the queued write holding one, the read would wait for the held write, and a held write
// that reads through the store before it commits would wait for ever).
func TestAWriteWaitingForItsSlotHoldsNoConnection(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{Conns: 2})
	free, wrote := heldWrite(t, st, "long", -1)
	queued := make(chan error, 1)
	go func() {
		queued <- st.Update(bg, func(tx store.Tx) error {
			_, err := tx.Append("other", 0, -1, store.NewEvent{Kind: "b"})
			return err
		})
	}()
	require.Eventually(t, func() bool { return st.WritesWaitingForASlot() == 1 },
		10*time.Second, time.Millisecond, "the second write waits for the slot")

	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	_, err := st.Head(ctx, "other", 0)
	require.NoError(t, err, "a read answered while one write held the slot and another waited for it")

	free()
	require.NoError(t, <-wrote)
	require.NoError(t, <-queued)
}

// A handle opens its listening connection at its first Subscribe, not before: one that reads,
// writes and holds a lease without subscribing (a follower node's) keeps no session listening.
// Once the first Subscribe has returned, the handle listens: another handle's commit wakes it.
func TestTheListenerWaitsForTheFirstSubscriber(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{Schema: "lazy"})
	other := open(t, url, postgres.Options{Schema: "lazy"})
	listening := func() int {
		var n int
		require.NoError(t, raw(t, url).QueryRow(bg, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'loom store listener lazy'`).Scan(&n))
		return n
	}
	_, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	appendKinds(t, other, "s", 0, "a")
	_, err = st.ReadForward(bg, "s", 0, 0, 10)
	require.NoError(t, err)
	require.Zero(t, listening(), "no handle subscribed")
	require.Zero(t, st.ListenerPID())

	ch, cancel := st.Subscribe("s")
	defer cancel()
	require.NotZero(t, st.ListenerPID(), "listening once Subscribe returned")
	require.Equal(t, 1, listening())
	appendKinds(t, other, "s", 0, "b")
	woken(t, ch, "a commit of the other handle")
}

// The listening connection, once open, lasts as long as the handle: after every subscription of
// the handle has ended, a new one is still woken by another handle's commit.
func TestTheListenerOutlivesTheSubscriptions(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{})
	other := open(t, url, postgres.Options{})
	ch, cancel := st.Subscribe("s")
	appendKinds(t, other, "s", 0, "a")
	woken(t, ch, "a commit of the other handle")
	cancel()

	ch, cancel = st.Subscribe("s")
	defer cancel()
	appendKinds(t, other, "s", 0, "b")
	woken(t, ch, "a commit of the other handle, after the handle's every earlier subscription ended")
}
