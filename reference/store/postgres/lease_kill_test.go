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

// A grant of a lease made through another handle (another node) waits for a fenced write in
// flight, so the write that was let through precedes the grant that fences it; after the grant
// the view is fenced.
func TestAGrantWaitsForAFencedWriteInFlight(t *testing.T) {
	url := pgtest.TempDatabase(t)
	node1, node2 := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	l1, err := node1.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	view := node1.Fence(l1)

	free, done := heldWrite(t, view, "fenced", -1)
	type grant struct {
		l   store.Lease
		err error
	}
	granted := make(chan grant, 1)
	go func() {
		l, err := node2.Acquire(bg, "engine", "node-1", "restarted", time.Minute) // node 1 restarted on node2's handle
		granted <- grant{l, err}
	}()
	select {
	case g := <-granted:
		t.Fatalf("granted %+v (%v) while a write fenced by the older grant was open", g.l, g.err)
	case <-time.After(300 * time.Millisecond):
	}
	free()
	require.NoError(t, <-done, "the write let through commits")
	g := <-granted
	require.NoError(t, g.err)
	require.Greater(t, g.l.Token, l1.Token)
	require.Equal(t, []string{"1 fenced"}, streamLines(t, node2, "s", 0))
	err = view.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "late"})
		return err
	})
	require.ErrorIs(t, err, store.ErrFenced)
	require.Equal(t, []string{"1 fenced"}, streamLines(t, node2, "s", 0))
}

// A lease renewal does not queue behind the handle's writes: a node busy writing still keeps its
// lease.
func TestRenewalDoesNotWaitForWrites(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{})
	l, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	free, done := heldWrite(t, st.Fence(l), "long", -1)
	ctx, cancel := context.WithTimeout(bg, 2*time.Second)
	defer cancel()
	r, err := st.Renew(ctx, l, time.Minute)
	require.NoError(t, err, "renewed while a write was open")
	require.Equal(t, l.Token, r.Token)
	h, ok, err := st.Holder(ctx, "engine")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, r.Expires.UnixMilli(), h.Expires.UnixMilli())
	free()
	require.NoError(t, <-done)
}

// Kill waits for a lease change in flight, as for a write: nothing of the handle reaches the
// database after Kill returns.
func TestKillWaitsForALeaseChangeInFlight(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{})
	l, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	// Another session holds the lease's row, so the renewal below waits inside the database.
	locker, err := raw(t, url).Begin(bg)
	require.NoError(t, err)
	_, err = locker.Exec(bg, `SELECT 1 FROM leases FOR UPDATE`)
	require.NoError(t, err)
	renewed := make(chan error, 1)
	go func() {
		_, err := st.Renew(bg, l, time.Hour)
		renewed <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, raw(t, url).QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%leases%'`).Scan(&n))
		return n == 1
	}, 10*time.Second, 10*time.Millisecond, "the renewal waits for the row")
	killed := make(chan struct{})
	go func() { st.Kill(); close(killed) }()
	select {
	case <-killed:
		t.Fatal("Kill returned while a renewal was in flight")
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, locker.Rollback(bg))
	require.NoError(t, <-renewed, "the renewal in flight completes")
	select {
	case <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("Kill never returned")
	}
	_, err = st.Renew(bg, l, time.Hour)
	require.ErrorIs(t, err, store.ErrClosed)
}

// Kill lets go of every connection of the handle, the listening one included, in the background;
// Released is closed once they are gone from the server. Other handles go on.
func TestKillClosesTheConnections(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{Schema: "killed"})
	other := open(t, url, postgres.Options{Schema: "killed"})
	for _, h := range []*postgres.Postgres{st, other} {
		_, cancel := h.Subscribe("s") // which opens the handle's listening connection
		defer cancel()
	}
	appendKinds(t, st, "s", 0, "a")
	sessions := func() int {
		var n int
		require.NoError(t, raw(t, url).QueryRow(bg,
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'loom store%killed'`).Scan(&n))
		return n
	}
	require.GreaterOrEqual(t, sessions(), 4, "two handles, each a pool connection and a listener")
	st.Kill()
	select {
	case <-st.Released():
	case <-time.After(10 * time.Second):
		t.Fatal("Released never closed")
	}
	require.Eventually(t, func() bool { return sessions() == 2 }, 10*time.Second, 20*time.Millisecond,
		"only the other handle's sessions are left")
	_, err := st.Head(bg, "s", 0)
	require.ErrorIs(t, err, store.ErrClosed)
	require.EqualValues(t, 2, appendKinds(t, other, "s", 0, "b"))
	_, err = st.Acquire(bg, "engine", "n", "", time.Minute)
	require.ErrorIs(t, err, store.ErrClosed)
}
