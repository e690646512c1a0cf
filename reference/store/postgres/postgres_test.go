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

// The first count proposed on a new database is recorded for good: a second handle proposing
// another reads the first, and so does the first handle when it asks again.
func TestThePartitionCountIsRecordedOnce(t *testing.T) {
	url := pgtest.TempDatabase(t)
	a, b := open(t, url, postgres.Options{}), open(t, url, postgres.Options{})
	p, err := a.Partitions(bg, 4)
	require.NoError(t, err)
	require.Equal(t, 4, p)
	for _, propose := range []int{1, 3, 5, 12} {
		p, err = b.Partitions(bg, propose)
		require.NoError(t, err)
		require.Equal(t, 4, p, "proposed %d", propose)
	}
	p, err = a.Partitions(bg, 1)
	require.NoError(t, err)
	require.Equal(t, 4, p)
	_, err = a.Partitions(bg, 0)
	require.ErrorIs(t, err, store.ErrPartitionCount)
	require.NoError(t, b.Close())
	_, err = b.Partitions(bg, 4)
	require.ErrorIs(t, err, store.ErrClosed)
}
