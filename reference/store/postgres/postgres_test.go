package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
)

// open opens a handle on url and closes it when the test ends.
func open(t testing.TB, url string, opt postgres.Options) *postgres.Postgres {
	t.Helper()
	st, err := postgres.Open(bg, url, opt)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// raw is a plain connection to url, as an operator or another program would make, closed when
// the test ends.
func raw(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(bg, url)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func appendKinds(t testing.TB, st store.Store, stream string, gen int64, kinds ...string) int64 {
	t.Helper()
	evs := make([]store.NewEvent, len(kinds))
	for i, k := range kinds {
		evs[i] = store.NewEvent{Kind: k, Data: []byte(`"` + k + `"`)}
	}
	var head int64
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		var err error
		head, err = tx.Append(stream, gen, -1, evs...)
		return err
	}))
	return head
}

func lines(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d %s", e.Seq, e.Kind)
	}
	return out
}

func streamLines(t testing.TB, st store.Store, stream string, gen int64) []string {
	t.Helper()
	evs, err := st.ReadForward(bg, stream, gen, 0, 0)
	require.NoError(t, err)
	return lines(evs)
}

func received(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func woken(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no wake-up within 10s: %s", what)
	}
}

func notWoken(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("woken: %s", what)
	case <-time.After(300 * time.Millisecond):
	}
}

// gate is a channel a test's goroutine waits on inside a write, and the function that opens it.
// The gate opens when the test ends at the latest, so that a failing test does not leave a write
// open for the store's Close to wait on.
func gate(t testing.TB) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(ch) }) }
	t.Cleanup(open)
	return ch, open
}

// heldWrite runs an Update through st that appends one event of kind to the stream "s" expecting
// head expect (nothing when kind is ""), then keeps its transaction open until free is called. It
// returns once the write is inside its transaction; done answers the Update's error.
func heldWrite(t testing.TB, st store.Store, kind string, expect int64) (free func(), done <-chan error) {
	inside := make(chan struct{})
	release, free := gate(t)
	ch := make(chan error, 1)
	go func() {
		ch <- st.Update(bg, func(tx store.Tx) error {
			if kind != "" {
				if _, err := tx.Append("s", 0, expect, store.NewEvent{Kind: kind}); err != nil {
					return err
				}
			}
			close(inside)
			<-release
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-ch:
		t.Fatalf("the held write ended before it was let go: %v", err)
	}
	return free, ch
}

// pgCode is the SQLSTATE of a PostgreSQL error, "" for another error.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// The append-only rule holds in the database, for whoever connects: a plain connection can
// neither update, delete nor truncate events, and lease tokens cannot go back.
func TestEventsAreAppendOnlyInTheDatabase(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{})
	appendKinds(t, st, "s", 0, "a", "b")
	l, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)

	c := raw(t, url)
	for _, q := range []string{
		`UPDATE events SET kind = 'x'::bytea`,
		`UPDATE events SET data = NULL WHERE seq = 2`,
		`UPDATE events SET seq = seq + 10 WHERE false`,
		`DELETE FROM events WHERE seq = 2`,
		`DELETE FROM events`,
		`TRUNCATE events`,
		`TRUNCATE events, meta`,
		`UPDATE leases SET token = token - 1`,
		`DELETE FROM leases`,
		`TRUNCATE leases`,
	} {
		_, err := c.Exec(bg, q)
		require.Error(t, err, "%s must be refused", q)
		require.Equal(t, "23001", pgCode(err), "%s: refused by the trigger (restrict_violation): %v", q, err)
	}
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, st, "s", 0), "every event is still there, unchanged")
	h, ok, err := st.Holder(bg, "engine")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, l.Token, h.Token)

	// What the rule does not forbid still works: appending through the store, metadata and
	// remembered keys (which are forgotten by design), lease grants.
	require.EqualValues(t, 3, appendKinds(t, st, "s", 0, "c"))
	_, err = c.Exec(bg, `DELETE FROM meta`)
	require.NoError(t, err)
	l2, err := st.Acquire(bg, "engine", "node-1", "", time.Minute)
	require.NoError(t, err)
	require.Greater(t, l2.Token, l.Token)
}

// A gap in a stream, whoever made it (here a plain INSERT, which the rule allows), is damage:
// reads report it as a *store.CorruptError rather than return events out of sequence.
func TestGapsAreCorruption(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{})
	appendKinds(t, st, "s", 0, "a", "b", "c")
	c := raw(t, url)
	_, err := c.Exec(bg, `INSERT INTO events (stream, gen, seq, kind, data, time) VALUES ('s'::bytea, 0, 5, 'e'::bytea, NULL, 0)`)
	require.NoError(t, err)
	_, err = c.Exec(bg, `INSERT INTO events (stream, gen, seq, kind, data, time) VALUES ('t'::bytea, 0, 2, 'x'::bytea, NULL, 0), ('t'::bytea, 0, 3, 'y'::bytea, NULL, 0)`)
	require.NoError(t, err)

	var ce *store.CorruptError
	_, err = st.ReadForward(bg, "s", 0, 0, 0)
	require.ErrorIs(t, err, store.ErrCorrupt)
	require.ErrorAs(t, err, &ce)
	require.Equal(t, [4]any{"events", "s", int64(0), int64(5)}, [4]any{ce.Table, ce.Stream, ce.Gen, ce.Seq}, "it names the event read in place of seq 4: %v", err)
	evs, err := st.ReadForward(bg, "s", 0, 0, 3)
	require.NoError(t, err, "a read that stops before the gap is whole")
	require.Len(t, evs, 3)
	_, err = st.ReadBackward(bg, "s", 0, 100, 0)
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, 3, ce.Seq)

	_, err = st.ReadBackward(bg, "t", 0, 100, 0)
	require.ErrorAs(t, err, &ce, "a stream whose oldest event is not seq 1")
	require.Contains(t, ce.Reason, "oldest")
	_, err = st.ReadForward(bg, "t", 0, 0, 0)
	require.ErrorAs(t, err, &ce)
	require.EqualValues(t, 2, ce.Seq)
}

// Nodes opening one new database at once apply the migrations once: every Open succeeds, and
// each version is recorded once.
func TestMigrationsRunOnceWhenNodesOpenAtOnce(t *testing.T) {
	url := pgtest.TempDatabase(t)
	for _, schema := range []string{"public", "engine_b"} {
		const nodes = 8
		var wg sync.WaitGroup
		stores := make([]*postgres.Postgres, nodes)
		errs := make([]error, nodes)
		start := make(chan struct{})
		for i := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				stores[i], errs[i] = postgres.Open(bg, url, postgres.Options{Schema: schema, Conns: 2})
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "node %d opening %s", i, schema)
			t.Cleanup(func() { stores[i].Close() })
		}
		var versions []int64
		rows, err := raw(t, url).Query(bg, `SELECT version FROM `+pgx.Identifier{schema, "schema_version"}.Sanitize()+` ORDER BY version`)
		require.NoError(t, err)
		versions, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		want := make([]int64, postgres.SchemaVersion())
		for i := range want {
			want[i] = int64(i + 1)
		}
		require.Equal(t, want, versions, "schema %s: each version recorded once", schema)
		appendKinds(t, stores[0], "s", 0, "a")
		require.Equal(t, []string{"1 a"}, streamLines(t, stores[nodes-1], "s", 0))
	}
}

// A database migrated by a newer engine is refused, not guessed at.
func TestNewerSchemaIsRefused(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{Schema: "newer"})
	appendKinds(t, st, "s", 0, "a")
	require.NoError(t, st.Close())
	_, err := raw(t, url).Exec(bg, `INSERT INTO newer.schema_version (version, what) VALUES ($1, 'from the future')`, postgres.SchemaVersion()+1)
	require.NoError(t, err)

	again, err := postgres.Open(bg, url, postgres.Options{Schema: "newer"})
	if err == nil {
		again.Close()
	}
	require.ErrorIs(t, err, store.ErrSchemaNewer)
	var se *store.SchemaError
	require.ErrorAs(t, err, &se)
	require.Equal(t, postgres.SchemaVersion()+1, se.Have)
	require.Equal(t, postgres.SchemaVersion(), se.Know)
	require.Contains(t, se.Where, "newer")

	// Another schema of the same database is another store, and opens.
	open(t, url, postgres.Options{Schema: "older"})
}

// Stores in two schemas of one database share nothing: events, metadata, the write lock or
// wake-ups.
func TestSchemasAreSeparateStores(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a := open(t, url, postgres.Options{Schema: "a"})
	a2 := open(t, url, postgres.Options{Schema: "a"})
	b := open(t, url, postgres.Options{Schema: "b"})
	chA2, cancelA2 := a2.Subscribe("s")
	defer cancelA2()
	chB, cancelB := b.Subscribe("s")
	defer cancelB()

	appendKinds(t, a, "s", 0, "a1", "a2")
	require.NoError(t, a.Update(bg, func(tx store.Tx) error { return tx.PutMeta("k", []byte("a")) }))
	woken(t, chA2, "another handle on the same schema")
	notWoken(t, chB, "a store in another schema")
	require.Equal(t, []string{}, streamLines(t, b, "s", 0))
	_, ok, err := b.Meta(bg, "k")
	require.NoError(t, err)
	require.False(t, ok)
	require.EqualValues(t, 1, appendKinds(t, b, "s", 0, "b1"), "numbering is the schema's own")

	// A write of schema a held open does not hold up schema b's writers.
	free, done := heldWrite(t, a, "", 0)
	require.EqualValues(t, 2, appendKinds(t, b, "s", 0, "b2"))
	free()
	require.NoError(t, <-done)
}

// Stream names of any bytes, and too long for a notification's payload, still wake the
// subscribers of another handle (the payload is then a digest of the name), and only theirs.
func TestWakeUpsForAnyStreamName(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	long := strings.Repeat("x/very-long-execution-id-", 400)
	names := []string{"plain", "sg/id\x1fname", "nul\x00inside", "bad utf-8 \xff\xfe", "é and ü", long, long + "2"}
	for _, n := range names {
		if len(n) > 8000 || (strings.IndexByte(n, 0) >= 0 || strings.IndexByte(n, 0xff) >= 0) {
			require.True(t, strings.HasPrefix(postgres.PayloadOf(n), "#sha256:"), "%q is sent as a digest", n[:min(len(n), 20)])
		}
	}
	chans := make([]<-chan struct{}, len(names))
	for i, n := range names {
		ch, cancel := b.Subscribe(n)
		defer cancel()
		chans[i] = ch
	}
	for i, n := range names {
		appendKinds(t, a, n, 0, "e")
		woken(t, chans[i], fmt.Sprintf("stream %d", i))
		for j := range names {
			if j != i {
				require.False(t, received(chans[j]), "a commit to stream %d woke the subscriber of stream %d", i, j)
			}
		}
		evs, err := b.ReadForward(bg, n, 0, 0, 0)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		require.Equal(t, n, evs[0].Stream)
	}
}

// A handle wakes its own subscribers of its own commits once, before Update returns: the
// notification the commit also sends, which comes back to the handle's listener, wakes nobody a
// second time.
func TestOwnCommitsWakeOnce(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	mine, cancel := a.Subscribe("s")
	defer cancel()
	theirs, cancelTheirs := b.Subscribe("s")
	defer cancelTheirs()
	for i := range 3 {
		appendKinds(t, a, "s", 0, fmt.Sprint(i))
		require.True(t, received(mine), "woken before Update returned")
		woken(t, theirs, "the other handle, through the notification")
		notWoken(t, mine, "woken a second time by the handle's own notification")
	}
}

// LISTEN/NOTIFY is only the wake-up: when the listening connection is lost, the store
// reconnects and wakes every subscriber once, so that a commit announced while nobody listened
// costs one read, never an event; then notifications flow again.
func TestLostListenerWakesEverySubscriber(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	chS, cancelS := b.Subscribe("s")
	defer cancelS()
	chT, cancelT := b.Subscribe("t")
	defer cancelT()
	mine, cancelMine := a.Subscribe("s")
	defer cancelMine()

	pid := b.ListenerPID()
	require.NotZero(t, pid)
	var ok bool
	require.NoError(t, raw(t, url).QueryRow(bg, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok))
	require.True(t, ok)
	woken(t, chS, "a subscriber of s after the listener was lost")
	woken(t, chT, "a subscriber of t, which nothing was appended to")
	require.NotEqual(t, pid, b.ListenerPID(), "listening again on a new connection")
	require.False(t, received(mine), "the other handle's listener was not lost")

	// Listening again: a commit of the other handle wakes the subscriber, once.
	appendKinds(t, a, "s", 0, "after")
	woken(t, chS, "a commit after the reconnection")
	notWoken(t, chS, "woken once")
	require.False(t, received(chT))

	// Lost again, several times, while commits go on: a reader that reads after every wake-up
	// still sees the last commit.
	for i := range 3 {
		require.NoError(t, raw(t, url).QueryRow(bg, `SELECT pg_terminate_backend($1)`, int32(b.ListenerPID())).Scan(&ok))
		appendKinds(t, a, "s", 0, fmt.Sprint(i))
		woken(t, chS, "after a loss")
	}
	require.Equal(t, []string{"1 after", "2 0", "3 1", "4 2"}, streamLines(t, b, "s", 0))
}

// A write that has begun is bounded by WriteTimeout, not by its caller: a statement that the
// database does not answer fails the write (keeping nothing) instead of holding it forever, and
// the store writes again once the database does.
func TestWriteTimeoutBoundsAStuckWrite(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{WriteTimeout: 300 * time.Millisecond})
	var idle string
	require.NoError(t, st.Update(bg, func(tx store.Tx) error { return nil }))

	locker := raw(t, url)
	require.NoError(t, locker.QueryRow(bg, `SHOW idle_in_transaction_session_timeout`).Scan(&idle))
	lock, err := locker.Begin(bg)
	require.NoError(t, err)
	_, err = lock.Exec(bg, `LOCK TABLE meta IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- st.Update(bg, func(tx store.Tx) error {
			if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "a"}); err != nil {
				return err
			}
			return tx.PutMeta("k", []byte("v")) // waits for the lock
		})
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		require.NoError(t, lock.Rollback(bg))
		t.Fatalf("the write still waited after 10s (then: %v)", <-done)
	}
	took := time.Since(start)
	require.Error(t, err)
	require.Less(t, took, 5*time.Second, "the write gave up after about WriteTimeout")
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.NoError(t, lock.Rollback(bg))
	require.Equal(t, []string{}, streamLines(t, st, "s", 0), "nothing of the failed write")

	appendKinds(t, st, "s", 0, "b")
	require.Equal(t, []string{"1 b"}, streamLines(t, st, "s", 0))
}

// The server ends a write transaction left idle for longer than WriteTimeout, and with it the
// locks it took: a writer that stalls inside fn cannot hold other nodes' writes of what it touched.
func TestAStalledWriterReleasesItsLocks(t *testing.T) {
	url := pgtest.TempDatabase(t)
	stalled := open(t, url, postgres.Options{WriteTimeout: 300 * time.Millisecond})
	other := open(t, url, postgres.Options{})
	free, done := heldWrite(t, stalled, "stalled", -1)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	require.NoError(t, other.Update(ctx, func(tx store.Tx) error {
		h, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "other"})
		if h != 1 {
			err = fmt.Errorf("head %d after appending to what the stalled write left: %w", h, err)
		}
		return err
	}), "the other node wrote once the server ended the stalled transaction, which kept nothing")
	free()
	require.Error(t, <-done, "the stalled write failed")
	require.Equal(t, []string{"1 other"}, streamLines(t, other, "s", 0))
	appendKinds(t, stalled, "s", 0, "again")
}

// ctx governs an Update until its transaction begins: the wait for the store's write lock, held
// alone here by another session (as a writer of an engine from before writers ran at once holds
// it), ends with ctx, and fn never runs.
func TestContextGovernsTheWaitForTheWriteLock(t *testing.T) {
	url := pgtest.TempDatabase(t)
	st := open(t, url, postgres.Options{})
	holder, err := raw(t, url).Begin(bg)
	require.NoError(t, err)
	_, err = holder.Exec(bg, `SELECT pg_advisory_xact_lock($1)`, st.WriteLockKey())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	defer cancel()
	ran := false
	err = st.Update(ctx, func(tx store.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran)

	// A writer without a deadline waits for the lock, then writes.
	done := make(chan error, 1)
	go func() {
		done <- st.Update(bg, func(tx store.Tx) error {
			_, err := tx.Append("s", 0, 0, store.NewEvent{Kind: "a"})
			return err
		})
	}()
	select {
	case err := <-done:
		t.Fatalf("wrote while another session held the write lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, holder.Rollback(bg))
	require.NoError(t, <-done)
	require.Equal(t, []string{"1 a"}, streamLines(t, st, "s", 0))
}

// Writes of two handles to one stream are serialised by the database: a write held open on one
// handle holds the other's until it commits, and the second then sees the first's events.
func TestWritesOfTwoHandlesToOneStreamAreSerialised(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	free, done := heldWrite(t, a, "a", 0)
	second := make(chan error, 1)
	go func() {
		second <- b.Update(bg, func(tx store.Tx) error {
			_, err := tx.Append("s", 0, 1, store.NewEvent{Kind: "b"})
			return err
		})
	}()
	select {
	case err := <-second:
		t.Fatalf("the second handle wrote while the first's write was open: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	free()
	require.NoError(t, <-done)
	require.NoError(t, <-second, "the second write saw the first's commit (expected head 1)")
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, b, "s", 0))
}

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

// Databases for scenarios: created with a valid name, reachable at the returned URL, dropped with
// sessions still on them; bad names refused before the server hears of them.
func TestCreateAndDropDatabase(t *testing.T) {
	pgtest.Require(t)
	for _, bad := range []string{"", "Upper", "with-dash", "semi;colon", `quo"te`, "space d", "é", strings.Repeat("a", 64)} {
		_, err := postgres.CreateDatabase(bg, pgtest.AdminURL, bad)
		require.Error(t, err, "%q", bad)
		require.Error(t, postgres.DropDatabase(bg, pgtest.AdminURL, bad), "%q", bad)
	}
	name := fmt.Sprintf("loomtest_create_%d", time.Now().UnixNano())
	url, err := postgres.CreateDatabase(bg, pgtest.AdminURL, name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = postgres.DropDatabase(bg, pgtest.AdminURL, name) })
	require.Equal(t, "postgres:///"+name, url)
	_, err = postgres.CreateDatabase(bg, pgtest.AdminURL, name)
	require.Error(t, err, "the database exists")

	st, err := postgres.Open(bg, url, postgres.Options{})
	require.NoError(t, err)
	appendKinds(t, st, "s", 0, "a")
	var db string
	require.NoError(t, raw(t, url).QueryRow(bg, `SELECT current_database()`).Scan(&db))
	require.Equal(t, name, db)

	require.NoError(t, postgres.DropDatabase(bg, pgtest.AdminURL, name), "dropped with the store still open on it")
	_, err = st.Head(bg, "s", 0)
	require.Error(t, err, "the store's sessions were ended")
	st.Close()
	_, err = postgres.Open(bg, url, postgres.Options{})
	require.Error(t, err, "the database is gone")
	require.NoError(t, postgres.DropDatabase(bg, pgtest.AdminURL, name), "dropping what is gone is no error")
}

func TestOpenRefusesBadOptions(t *testing.T) {
	for _, schema := range []string{"Public", "a-b", `x"; DROP TABLE events; --`} {
		_, err := postgres.Open(bg, "postgres://127.0.0.1:1/x", postgres.Options{Schema: schema})
		require.ErrorContains(t, err, "schema", "%q", schema)
	}
	_, err := postgres.Open(bg, "postgres://%zz", postgres.Options{})
	require.Error(t, err)
}
