package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Leases of many names at once, as a store shared out in partitions uses them: one name per
// partition ("partition/<i>"), several holders, each grant fencing the writes of its own name
// alone, and Grants listing the grants of a prefix.

func init() {
	storeCases = append(storeCases,
		testCase{"PartitionLeasesFenceApart", testPartitionLeasesFenceApart},
		testCase{"FenceJudgesNameAndTokenAlone", testFenceJudgesNameAndTokenAlone},
		testCase{"FenceOfOneNameRacesAGrantOfAnother", func(t *testing.T, e *env) {
			st := e.handle(t)
			ls := leasesOf(t, st)
			raceAcrossNames(t, st, ls, ls)
		}},
		testCase{"NamespaceOverAFence", testNamespaceOverAFence},
		testCase{"GrantsListAPrefix", testGrantsListAPrefix},
	)
	sharedCases = append(sharedCases,
		testCase{"SharedFenceOfOneNameRacesAGrantOfAnother", func(t *testing.T, e *env) {
			node1, node2 := e.handle(t), e.handle(t)
			raceAcrossNames(t, node1, leasesOf(t, node1), leasesOf(t, node2))
		}},
	)
}

// partitions is how many names the tests grant: partition/0 .. partition/11.
const partitions = 12

// byName is the order of partition/0 .. partition/11 by name, in bytes: "partition/1" sorts
// before "partition/10", and "partition/11" before "partition/2".
var byName = []int{0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9}

func partitionName(i int) string { return fmt.Sprintf("partition/%d", i) }

// holderOf is the holder of partition i among three: node-1 holds 0, 3, 6, 9; node-2 holds 1,
// 4, 7, 10; node-3 holds 2, 5, 8, 11. noteOf is its address.
func holderOf(i int) string { return fmt.Sprintf("node-%d", i%3+1) }
func noteOf(i int) string   { return fmt.Sprintf("10.0.0.%d:8080", i%3+1) }

// requireGrants checks that Grants(prefix) is want, whole and in that order.
func requireGrants(t *testing.T, ls store.Leases, prefix string, want ...store.Lease) {
	t.Helper()
	got, err := ls.Grants(bg, prefix)
	require.NoError(t, err, "Grants(%q)", prefix)
	wantLines, gotLines := []string{}, []string{}
	for _, l := range want {
		wantLines = append(wantLines, leaseLine(l))
	}
	for _, l := range got {
		gotLines = append(gotLines, leaseLine(l))
	}
	require.Equal(t, wantLines, gotLines, "the grants under %q", prefix)
}

// inNameOrder is gs (indexed by partition) in the order of their names.
func inNameOrder(gs []store.Lease) []store.Lease {
	out := make([]store.Lease, 0, len(gs))
	for _, i := range byName {
		out = append(out, gs[i])
	}
	return out
}

// writeEach writes, through each view but the skipped ones, a write tagged p<i>-<round>, and
// checks that each is there whole.
func writeEach(t *testing.T, st store.Store, views []store.Store, round string, skip ...int) {
	t.Helper()
	skipped := map[int]bool{}
	for _, i := range skip {
		skipped[i] = true
	}
	for i, v := range views {
		if skipped[i] {
			continue
		}
		tag := fmt.Sprintf("p%d-%s", i, round)
		require.NoError(t, fencedWrite(v, tag), "write %s through %s's view", tag, partitionName(i))
		requireAllOf(t, st, tag)
	}
}

func testPartitionLeasesFenceApart(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	gs := make([]store.Lease, partitions)
	views := make([]store.Store, partitions)
	for i := range gs {
		gs[i] = acquire(t, ls, partitionName(i), holderOf(i), noteOf(i), time.Minute)
		views[i] = ls.Fence(gs[i])
	}
	writeEach(t, st, views, "first")
	requireGrants(t, ls, "partition/", inNameOrder(gs)...)

	// node-2 restarts and takes partition/4 back: a new token for that name alone. Its old view
	// of partition/4 is fenced; its views of partition/1, /7 and /10, and every other holder's,
	// still write.
	g4 := acquire(t, ls, partitionName(4), holderOf(4), noteOf(4), time.Minute)
	require.Greater(t, g4.Token, gs[4].Token)
	requireFenced(t, st, views[4], "p4-stale")
	writeEach(t, st, views, "second", 4)
	gs[4], views[4] = g4, ls.Fence(g4)
	writeEach(t, st, views, "third")

	// partition/7 passes from node-2 to node-3: released, and granted to node-3 at once. Only
	// partition/7's old view is fenced.
	require.NoError(t, ls.Release(bg, gs[7]))
	g7 := acquire(t, ls, partitionName(7), "node-3", noteOf(2), time.Minute)
	require.Greater(t, g7.Token, gs[7].Token)
	requireFenced(t, st, views[7], "p7-stale")
	writeEach(t, st, views, "fourth", 7)
	gs[7], views[7] = g7, ls.Fence(g7)
	writeEach(t, st, views, "fifth")
	requireGrants(t, ls, "partition/", inNameOrder(gs)...)
	for _, g := range gs {
		requireHolder(t, ls, g)
	}
}

func testFenceJudgesNameAndTokenAlone(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	stale3 := acquire(t, ls, partitionName(3), "node-1", noteOf(0), time.Minute)
	g4 := acquire(t, ls, partitionName(4), "node-2", noteOf(1), time.Minute)
	g3 := acquire(t, ls, partitionName(3), "node-1", noteOf(0), time.Minute)
	require.Greater(t, g3.Token, stale3.Token)
	view4 := ls.Fence(g4)

	// The stale token of partition/3 is refused and keeps nothing, while partition/4 writes.
	requireFenced(t, st, ls.Fence(stale3), "stale-3")
	require.NoError(t, fencedWrite(view4, "four-1"))
	requireAllOf(t, st, "four-1")

	// The newest grant of partition/3 with one field changed at a time: the name and the token
	// decide; the holder, the note and the expiry do not.
	vary := func(change func(l *store.Lease)) store.Lease {
		l := g3
		change(&l)
		return l
	}
	type variant struct {
		tag string
		l   store.Lease
	}
	fencedBy := []variant{
		{"older-token", vary(func(l *store.Lease) { l.Token = stale3.Token })},
		{"newer-token", vary(func(l *store.Lease) { l.Token = g3.Token + 1 })},
		{"never-granted-name", vary(func(l *store.Lease) { l.Name = "partition/30" })},
	}
	if g4.Token != g3.Token {
		// partition/3's token under partition/4's name is not partition/4's newest grant.
		fencedBy = append(fencedBy, variant{"other-name", vary(func(l *store.Lease) { l.Name = partitionName(4) })})
	}
	for _, c := range fencedBy {
		requireFenced(t, st, ls.Fence(c.l), c.tag)
		require.NoError(t, fencedWrite(view4, "four-"+c.tag), "partition/4 writes beside %s", c.tag)
		requireAllOf(t, st, "four-"+c.tag)
	}
	writes := []variant{
		{"as-granted", g3},
		{"other-holder", vary(func(l *store.Lease) { l.Holder = "node-2" })},
		{"other-note", vary(func(l *store.Lease) { l.Note = "elsewhere" })},
		{"lapsed-expiry", vary(func(l *store.Lease) { l.Expires = time.UnixMilli(1) })},
		{"no-expiry", vary(func(l *store.Lease) { l.Expires = time.Time{} })},
	}
	for _, c := range writes {
		require.NoError(t, fencedWrite(ls.Fence(c.l), c.tag), "the newest grant of partition/3, %s", c.tag)
		requireAllOf(t, st, c.tag)
	}
	requireHolder(t, ls, g3)
	requireHolder(t, ls, g4)
}

// raceAcrossNames opens a write of partition/1 (held by node-1 through ls1) and, while it is
// open, partition/0 is granted again (node-2 restarting, through ls2): the grant of another
// name fences nothing of the write, which commits whole whether the grant completed first or
// waited. partition/0's old view is fenced by its new grant; partition/1's still writes.
func raceAcrossNames(t *testing.T, st store.Store, ls1, ls2 store.Leases) {
	t.Helper()
	a := acquire(t, ls2, partitionName(0), "node-2", noteOf(1), time.Minute)
	b := acquire(t, ls1, partitionName(1), "node-1", noteOf(0), time.Minute)
	viewA, viewB := ls2.Fence(a), ls1.Fence(b)

	r := raceGrant(t, viewB, ls2, a, "race-1")
	if r.grantFirst {
		t.Log("partition/0 was granted while the write of partition/1 was open")
	} else {
		t.Log("the grant of partition/0 waited for the write of partition/1")
	}
	require.NoError(t, r.err, "a write of partition/1 while partition/0 is granted again")
	require.Equal(t, []string{"1 raced"}, streamLines(t, st, "race-1", 0), "the write of partition/1 committed whole")
	require.Equal(t, "raced", metaOf(t, st, "race-1"), "the write of partition/1 committed whole")
	require.Greater(t, r.grant.Token, a.Token)

	requireHolder(t, ls1, r.grant)
	requireHolder(t, ls1, b)
	requireGrants(t, ls1, "partition/", r.grant, b)
	requireFenced(t, st, viewA, "p0-stale")
	require.NoError(t, fencedWrite(viewB, "p1-after"))
	requireAllOf(t, st, "p1-after")
	require.NoError(t, fencedWrite(ls2.Fence(r.grant), "p0-after"))
	requireAllOf(t, st, "p0-after")
}

func testNamespaceOverAFence(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	g3 := acquire(t, ls, partitionName(3), "node-1", noteOf(0), time.Minute)
	g4 := acquire(t, ls, partitionName(4), "node-2", noteOf(1), time.Minute)
	namespaced := func(s store.Store, i int) store.Store {
		v, err := store.Namespace(s, store.PartitionNamespace(i))
		require.NoError(t, err)
		return v
	}
	fenced3 := ls.Fence(g3)
	view3, view4 := namespaced(fenced3, 3), namespaced(ls.Fence(g4), 4)
	raw3, raw4 := namespaced(st, 3), namespaced(st, 4)

	// While the grant holds, the view writes, under its namespace and nowhere else.
	require.NoError(t, fencedWrite(view3, "held"))
	requireAllOf(t, raw3, "held")
	require.Equal(t, "held", metaOf(t, st, "partition/3/f/held"), "the key under the namespace")
	require.Equal(t, []string{}, streamLines(t, st, "f/held", 0), "nothing outside the namespace")
	require.Equal(t, "<none>", metaOf(t, st, "f/held"), "nothing outside the namespace")

	// A newer grant of partition/3: the namespaced view is refused as the fenced view under it
	// is (ErrFenced, nothing kept, nobody woken, no durable write), even for an Update that
	// writes nothing; reads through it pass.
	acquire(t, ls, partitionName(3), "node-1", noteOf(0), time.Minute)
	requireFenced(t, st, fenced3, "direct")
	requireFencedAt(t, st, raw3, view3, "namespaced")
	require.Equal(t, []string{}, streamLines(t, st, "f/namespaced", 0), "nothing outside the namespace")
	require.ErrorIs(t, fenced3.Update(bg, func(store.Tx) error { return nil }), store.ErrFenced)
	require.ErrorIs(t, view3.Update(bg, func(store.Tx) error { return nil }), store.ErrFenced)
	evs, err := view3.ReadForward(bg, "f/held", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 held"}, lines(evs))

	// partition/4's namespaced view writes meanwhile.
	require.NoError(t, fencedWrite(view4, "four"))
	requireAllOf(t, raw4, "four")
}

func testGrantsListAPrefix(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	requireGrants(t, ls, "")
	requireGrants(t, ls, "partition/")

	g := map[string]store.Lease{}
	for i, name := range []string{"partition/1", "partition/10", "partition/2", "partitions",
		"partition0", "partition.", "node/1", "\xff", "\xffz", "\xfe"} {
		g[name] = acquire(t, ls, name, holderOf(i), noteOf(i), time.Duration(i+1)*time.Minute)
	}
	list := func(names ...string) []store.Lease {
		out := make([]store.Lease, len(names))
		for i, n := range names {
			out[i] = g[n]
		}
		return out
	}
	check := func() {
		t.Helper()
		for _, c := range []struct {
			prefix string
			names  []string
		}{
			{"partition/", []string{"partition/1", "partition/10", "partition/2"}},
			{"partition/1", []string{"partition/1", "partition/10"}},
			{"partition/10", []string{"partition/10"}},
			{"partition", []string{"partition.", "partition/1", "partition/10", "partition/2", "partition0", "partitions"}},
			{"partitions", []string{"partitions"}},
			{"node/", []string{"node/1"}},
			{"\xff", []string{"\xff", "\xffz"}},
			{"", []string{"node/1", "partition.", "partition/1", "partition/10", "partition/2", "partition0", "partitions", "\xfe", "\xff", "\xffz"}},
			{"partition/3", nil},
			{"node/1/", nil},
		} {
			requireGrants(t, ls, c.prefix, list(c.names...)...)
		}
	}
	check()

	// Renewed, released, granted again, lapsed: each listed as its newest grant stands.
	r, err := ls.Renew(bg, g["partition/10"], time.Hour)
	require.NoError(t, err)
	g["partition/10"] = r
	require.NoError(t, ls.Release(bg, g["partition/2"]))
	released, ok, err := ls.Holder(bg, "partition/2")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, g["partition/2"].Token, released.Token, "a release keeps the token")
	require.False(t, released.Expires.After(time.Now()), "a released grant has lapsed: %s", leaseLine(released))
	g["partition/2"] = released
	require.NoError(t, ls.Release(bg, g["partition/1"]))
	moved := acquire(t, ls, "partition/1", "node-3", "moved", time.Minute)
	require.Greater(t, moved.Token, g["partition/1"].Token)
	g["partition/1"] = moved
	short := acquire(t, ls, "partitions", holderOf(3), "short", shortTTL)
	require.Greater(t, short.Token, g["partitions"].Token)
	g["partitions"] = short
	waitLapse(t, short)
	check()
}

// raced is how a write raced a grant: the write's outcome, the grant made, and whether the grant
// completed while the write was still open.
type raced struct {
	err        error
	grant      store.Lease
	grantFirst bool
}

// raceGrant opens a write through view (an event on stream tag, metadata tag = "raced") and,
// while it is open, asks acquirer for ask.Name on behalf of ask.Holder (publishing ask.Note). It
// gives the grant notYet to complete before it lets the write end, then waits (bounded) for both;
// the grant must succeed. The caller judges the outcome.
func raceGrant(t *testing.T, view store.Store, acquirer store.Leases, ask store.Lease, tag string) raced {
	t.Helper()
	var once, releaseOnce sync.Once
	inside, release := make(chan struct{}), make(chan struct{})
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free() // a failing test lets the write end before its handle is closed
	done := make(chan error, 1)
	go func() {
		done <- view.Update(bg, func(tx store.Tx) error {
			if _, err := tx.Append(tag, 0, -1, store.NewEvent{Kind: "raced"}); err != nil {
				return err
			}
			if err := tx.PutMeta(tag, []byte("raced")); err != nil {
				return err
			}
			once.Do(func() { close(inside) })
			<-release
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("the fenced write ended before the race: %v", err)
	case <-time.After(waitBound):
		t.Fatal("the fenced write never began")
	}

	type grant struct {
		l   store.Lease
		err error
	}
	granted := make(chan grant, 1)
	go func() {
		l, err := acquirer.Acquire(bg, ask.Name, ask.Holder, ask.Note, time.Minute)
		granted <- grant{l, err}
	}()
	var r raced
	var g grant
	select {
	case g = <-granted:
		r.grantFirst = true
	case <-time.After(notYet):
	}
	free()
	select {
	case r.err = <-done:
	case <-time.After(waitBound):
		t.Fatal("the fenced write never ended")
	}
	if !r.grantFirst {
		select {
		case g = <-granted:
		case <-time.After(waitBound):
			t.Fatal("the new grant never came")
		}
	}
	require.NoError(t, g.err, "the grant of %s raced by a write", ask.Name)
	require.Equal(t, [3]string{ask.Name, ask.Holder, ask.Note}, [3]string{g.l.Name, g.l.Holder, g.l.Note})
	r.grant = g.l
	return r
}
