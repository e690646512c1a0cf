package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

func init() {
	storeCases = append(storeCases,
		testCase{"LeaseGrantsAFreeName", testLeaseGrantsAFreeName},
		testCase{"LeaseSameHolderTakesItBack", testLeaseSameHolderTakesItBack},
		testCase{"LeaseLapses", testLeaseLapses},
		testCase{"LeaseRenew", testLeaseRenew},
		testCase{"LeaseRelease", testLeaseRelease},
		testCase{"FenceWritesWhileNewest", testFenceWritesWhileNewest},
		testCase{"FenceRefusesOnceSuperseded", testFenceRefusesOnceSuperseded},
		testCase{"FenceRacesANewerGrant", testFenceRacesANewerGrant},
		testCase{"LapsedGrantNobodyTookStillWrites", testLapsedGrantNobodyTookStillWrites},
		testCase{"LeaseCallsAfterCloseAreErrClosed", testLeaseCallsAfterCloseAreErrClosed},
	)
}

// shortTTL is the lifetime of grants a test waits to see lapse.
const shortTTL = 300 * time.Millisecond

// leasesOf is st as store.Leases; the test is skipped when the backend offers none.
func leasesOf(t *testing.T, st store.Store) store.Leases {
	t.Helper()
	ls, ok := st.(store.Leases)
	if !ok {
		t.Skip("the backend offers no store.Leases")
	}
	return ls
}

// leaseLine renders a grant whole, its expiry to the millisecond.
func leaseLine(l store.Lease) string {
	exp := int64(0)
	if !l.Expires.IsZero() {
		exp = l.Expires.UnixMilli()
	}
	return fmt.Sprintf("%s holder=%s note=%q token=%d expires=%d", l.Name, l.Holder, l.Note, l.Token, exp)
}

// acquire takes name for holder and checks the grant: name, holder and note as asked, the
// expiry ttl from the time of the call, and Holder returning it whole.
func acquire(t *testing.T, ls store.Leases, name, holder, note string, ttl time.Duration) store.Lease {
	t.Helper()
	before := time.Now()
	l, err := ls.Acquire(bg, name, holder, note, ttl)
	after := time.Now()
	require.NoError(t, err, "acquire %s for %s", name, holder)
	require.Equal(t, [3]string{name, holder, note}, [3]string{l.Name, l.Holder, l.Note}, "the grant names what was asked")
	requireExpires(t, l, before, after, ttl)
	requireHolder(t, ls, l)
	return l
}

// requireExpires checks that l lapses ttl after an instant between before and after (to the
// millisecond).
func requireExpires(t *testing.T, l store.Lease, before, after time.Time, ttl time.Duration) {
	t.Helper()
	lo, hi, got := before.Add(ttl).UnixMilli(), after.Add(ttl).UnixMilli()+1, l.Expires.UnixMilli()
	require.True(t, lo <= got && got <= hi, "%s lapses at %d ms, not %s after the call (between %d and %d)", leaseLine(l), got, ttl, lo, hi)
}

// requireHolder checks that the newest grant of want.Name is want, whole.
func requireHolder(t *testing.T, ls store.Leases, want store.Lease) {
	t.Helper()
	got, ok, err := ls.Holder(bg, want.Name)
	require.NoError(t, err)
	require.True(t, ok, "Holder(%s) finds a grant", want.Name)
	require.Equal(t, leaseLine(want), leaseLine(got), "the newest grant of %s", want.Name)
}

// requireHeld checks the answer of an Acquire refused because want is in force: ErrLeaseHeld, a
// *HeldError naming want, and want returned as the lease (so that the caller can reach its
// holder).
func requireHeld(t *testing.T, got store.Lease, err error, want store.Lease) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrLeaseHeld)
	var he *store.HeldError
	require.ErrorAs(t, err, &he)
	require.Equal(t, leaseLine(want), leaseLine(he.Lease), "the HeldError names the grant in force")
	require.Equal(t, leaseLine(want), leaseLine(got), "a refused Acquire returns the grant in force")
}

// acquireAfterLapse polls (bounded) Acquire of name for holder until the grant in force, old,
// lapses and holder is granted. Every refusal before must name old; the grant must not come
// before old's expiry.
func acquireAfterLapse(t *testing.T, ls store.Leases, old store.Lease, holder, note string, ttl time.Duration) store.Lease {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		before := time.Now()
		l, err := ls.Acquire(bg, old.Name, holder, note, ttl)
		after := time.Now()
		if err == nil {
			require.False(t, after.Before(old.Expires.Truncate(time.Millisecond)),
				"%s granted at %s, before %s lapsed", leaseLine(l), after.Format(time.RFC3339Nano), leaseLine(old))
			require.Equal(t, [3]string{old.Name, holder, note}, [3]string{l.Name, l.Holder, l.Note})
			requireExpires(t, l, before, after, ttl)
			require.Greater(t, l.Token, old.Token, "a later grant has a greater token")
			requireHolder(t, ls, l)
			return l
		}
		requireHeld(t, l, err, old)
		if time.Now().After(deadline) {
			t.Fatalf("%s never lapsed", leaseLine(old))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLapse waits (bounded) until l has lapsed by the clock.
func waitLapse(t *testing.T, l store.Lease) {
	t.Helper()
	require.Less(t, time.Until(l.Expires), waitBound, "%s lapses within the bound", leaseLine(l))
	for !time.Now().After(l.Expires) {
		time.Sleep(10 * time.Millisecond)
	}
}

// fencedWrite writes through view: an event on stream "f/"+tag, metadata "f/"+tag and the
// remembered key tag of scope "f".
func fencedWrite(view store.Store, tag string) error {
	return view.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("f/"+tag, 0, -1, store.NewEvent{Kind: tag}); err != nil {
			return err
		}
		if err := tx.PutMeta("f/"+tag, []byte(tag)); err != nil {
			return err
		}
		fresh, err := tx.Remember("f", tag, 100)
		if err == nil && !fresh {
			err = fmt.Errorf("the key %s was remembered before", tag)
		}
		return err
	})
}

// rememberedBefore remembers ("f", tag) through st and reports whether it was there already.
func rememberedBefore(t *testing.T, st store.Store, tag string) bool {
	t.Helper()
	var fresh bool
	require.NoError(t, st.Update(bg, func(tx store.Tx) error {
		var err error
		fresh, err = tx.Remember("f", tag, 100)
		return err
	}))
	return !fresh
}

// requireAllOf checks, through st, that everything fencedWrite(tag) did is there.
func requireAllOf(t *testing.T, st store.Store, tag string) {
	t.Helper()
	require.Equal(t, []string{"1 " + tag}, streamLines(t, st, "f/"+tag, 0), "the event of write %s", tag)
	require.Equal(t, tag, metaOf(t, st, "f/"+tag), "the metadata of write %s", tag)
	require.True(t, rememberedBefore(t, st, tag), "the remembered key of write %s", tag)
}

// requireNothingOf checks, through st, that nothing fencedWrite(tag) did is there.
func requireNothingOf(t *testing.T, st store.Store, tag string) {
	t.Helper()
	require.Equal(t, []string{}, streamLines(t, st, "f/"+tag, 0), "no event of write %s", tag)
	require.Equal(t, "<none>", metaOf(t, st, "f/"+tag), "no metadata of write %s", tag)
	require.False(t, rememberedBefore(t, st, tag), "no remembered key of write %s", tag)
}

// requireFenced writes through view, which must be fenced: ErrFenced, and nothing of the write
// in st (a handle on the same storage, not fenced), no wake-up, no durable write counted.
func requireFenced(t *testing.T, st, view store.Store, tag string) {
	t.Helper()
	requireFencedAt(t, st, st, view, tag)
}

// requireFencedAt is requireFenced for a view whose writes land where seen (a view of st, such
// as a namespace) looks: nothing of the write through seen, no wake-up of seen's subscribers,
// no durable write counted by st.
func requireFencedAt(t *testing.T, st, seen, view store.Store, tag string) {
	t.Helper()
	ch, cancel := seen.Subscribe("f/" + tag)
	defer cancel()
	c, counts := st.(store.WriteCrasher)
	var writes int64
	if counts {
		writes = c.Writes()
	}
	err := fencedWrite(view, tag)
	require.ErrorIs(t, err, store.ErrFenced, "write %s through a fenced view", tag)
	require.False(t, received(ch), "a fenced write wakes nobody")
	if counts {
		require.Equal(t, writes, c.Writes(), "a fenced write is no durable write")
	}
	requireNothingOf(t, seen, tag)
}

func testLeaseGrantsAFreeName(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l, ok, err := ls.Holder(bg, "engine")
	require.NoError(t, err)
	require.False(t, ok, "a name never granted has no holder")
	require.Equal(t, leaseLine(store.Lease{}), leaseLine(l))

	l1 := acquire(t, ls, "engine", "node-1", "10.0.0.1:8080", time.Minute)

	// Another holder is refused, and told who holds it; the grant stays as it was.
	l, err = ls.Acquire(bg, "engine", "node-2", "10.0.0.2:8080", time.Minute)
	requireHeld(t, l, err, l1)
	requireHolder(t, ls, l1)

	// Another name is a lease of its own: granted to another holder, and fencing nothing of the
	// first.
	m := acquire(t, ls, "other", "node-2", "", time.Minute)
	requireHolder(t, ls, l1)
	require.NoError(t, fencedWrite(ls.Fence(l1), "one"))
	require.NoError(t, fencedWrite(ls.Fence(m), "two"))
	requireAllOf(t, st, "one")
	requireAllOf(t, st, "two")
}

func testLeaseSameHolderTakesItBack(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "before", time.Minute)
	view1 := ls.Fence(l1)
	require.NoError(t, fencedWrite(view1, "one"))

	// The holder restarted: it takes its name back at once, with a greater token.
	l2 := acquire(t, ls, "engine", "node-1", "after", time.Minute)
	require.Greater(t, l2.Token, l1.Token, "a new grant has a greater token")

	// Its earlier incarnation is fenced.
	requireFenced(t, st, view1, "two")
	r, err := ls.Renew(bg, l1, time.Hour)
	require.ErrorIs(t, err, store.ErrFenced, "Renew of a superseded grant (returned %s)", leaseLine(r))
	requireHolder(t, ls, l2)
	require.NoError(t, fencedWrite(ls.Fence(l2), "three"))
	requireAllOf(t, st, "one")
	requireAllOf(t, st, "three")

	// Releasing the superseded grant gives up nothing of the newer one.
	err = ls.Release(bg, l1)
	if err != nil {
		require.ErrorIs(t, err, store.ErrFenced, "Release of a superseded grant")
	}
	requireHolder(t, ls, l2)
	l, err := ls.Acquire(bg, "engine", "node-2", "", time.Minute)
	requireHeld(t, l, err, l2)
}

func testLeaseLapses(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "", shortTTL)
	view1 := ls.Fence(l1)
	l2 := acquireAfterLapse(t, ls, l1, "node-2", "10.0.0.2:8080", time.Minute)
	requireFenced(t, st, view1, "late")
	r, err := ls.Renew(bg, l1, time.Minute)
	require.ErrorIs(t, err, store.ErrFenced, "Renew of a superseded grant (returned %s)", leaseLine(r))
	requireHolder(t, ls, l2)
	require.NoError(t, fencedWrite(ls.Fence(l2), "new"))
	requireAllOf(t, st, "new")
}

func testLeaseRenew(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "addr", shortTTL)

	// Renewing extends the grant from now; the grant stays the same one.
	before := time.Now()
	r, err := ls.Renew(bg, l1, time.Hour)
	after := time.Now()
	require.NoError(t, err)
	requireExpires(t, r, before, after, time.Hour)
	r1 := l1
	r1.Expires = r.Expires
	require.Equal(t, leaseLine(r1), leaseLine(r), "a renewal is the same grant, lapsing later")
	requireHolder(t, ls, r)
	l, err := ls.Acquire(bg, "engine", "node-2", "", time.Minute)
	requireHeld(t, l, err, r)
	require.NoError(t, fencedWrite(ls.Fence(l1), "renewed"), "the renewed grant's first view still writes")

	// A short renewal counts from now too: it replaces the hour.
	before = time.Now()
	r2, err := ls.Renew(bg, r, shortTTL)
	after = time.Now()
	require.NoError(t, err)
	requireExpires(t, r2, before, after, shortTTL)
	require.Equal(t, r.Token, r2.Token)
	l2 := acquireAfterLapse(t, ls, r2, "node-2", "", time.Minute)
	_, err = ls.Renew(bg, r2, time.Minute)
	require.ErrorIs(t, err, store.ErrFenced)
	requireHolder(t, ls, l2)
	requireAllOf(t, st, "renewed")
}

func testLeaseRelease(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "", time.Minute)
	require.NoError(t, ls.Release(bg, l1))

	// Released, the grant lapsed at once: it is still the newest, lapsed.
	h, ok, err := ls.Holder(bg, "engine")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, [3]any{l1.Name, l1.Holder, l1.Token}, [3]any{h.Name, h.Holder, h.Token})
	require.False(t, h.Expires.After(time.Now()), "a released grant has lapsed: %s", leaseLine(h))

	// Another holder is granted at once, with a greater token, and the released grant is fenced.
	l2 := acquire(t, ls, "engine", "node-2", "", time.Minute)
	require.Greater(t, l2.Token, l1.Token)
	requireFenced(t, st, ls.Fence(l1), "released")

	// Releasing a superseded grant leaves the newer in force.
	err = ls.Release(bg, l1)
	if err != nil {
		require.ErrorIs(t, err, store.ErrFenced, "Release of a superseded grant")
	}
	l, err := ls.Acquire(bg, "engine", "node-3", "", time.Minute)
	requireHeld(t, l, err, l2)

	// Tokens are never reused: after a release, the next grant, to whatever holder, is greater.
	require.NoError(t, ls.Release(bg, l2))
	l3 := acquire(t, ls, "engine", "node-2", "", time.Minute)
	require.Greater(t, l3.Token, l2.Token, "the same holder after its release")
	require.NoError(t, ls.Release(bg, l3))
	l4 := acquire(t, ls, "engine", "node-1", "", time.Minute)
	require.Greater(t, l4.Token, l3.Token, "another holder after a release")
	requireFenced(t, st, ls.Fence(l3), "released-again")
}

func testFenceWritesWhileNewest(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l := acquire(t, ls, "engine", "node-1", "", time.Minute)
	view := ls.Fence(l)

	ch, cancel := view.Subscribe("f/one")
	defer cancel()
	require.NoError(t, fencedWrite(view, "one"))
	require.True(t, received(ch), "a subscription through the view is told of a commit through it")
	requireAllOf(t, st, "one")
	appendKinds(t, st, "f/one", 0, "direct")
	require.True(t, received(ch), "... and of a commit through the store")

	// Reads pass through.
	evs, err := view.ReadForward(bg, "f/one", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 one", "2 direct"}, lines(evs))
	evs, err = view.ReadBackward(bg, "f/one", 0, 3, 1)
	require.NoError(t, err)
	require.Equal(t, []string{"2 direct"}, lines(evs))
	h, err := view.Head(bg, "f/one", 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, h)
	require.Equal(t, "one", metaOf(t, view, "f/one"))
	kvs, err := view.MetaPrefix(bg, "f/")
	require.NoError(t, err)
	require.Equal(t, []string{"f/one=one"}, kvLines(kvs))

	// An Update through the view is an Update: its transaction sees its own writes, a conflict
	// and fn's own error come back and keep nothing.
	var inside []int64
	require.NoError(t, view.Update(bg, func(tx store.Tx) error {
		inside = inside[:0]
		n, err := tx.Append("f/one", 0, 2, store.NewEvent{Kind: "third"})
		if err != nil {
			return err
		}
		h, err := tx.Head("f/one", 0)
		inside = append(inside, n, h)
		return err
	}))
	require.Equal(t, []int64{3, 3}, inside)
	err = view.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("f/one", 0, 2, store.NewEvent{Kind: "stale"})
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)
	boom := errors.New("boom")
	require.ErrorIs(t, view.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("f/boom", []byte("x")); err != nil {
			return err
		}
		return boom
	}), boom)
	require.Equal(t, "<none>", metaOf(t, st, "f/boom"))
	require.Equal(t, []string{"1 one", "2 direct", "3 third"}, streamLines(t, st, "f/one", 0))

	// Closing the view leaves the store open.
	require.NoError(t, view.Close())
	appendKinds(t, st, "f/one", 0, "after")
	require.Equal(t, []string{"1 one", "2 direct", "3 third", "4 after"}, streamLines(t, st, "f/one", 0))
	require.NoError(t, fencedWrite(ls.Fence(l), "two"), "another view of the grant still writes")
	requireAllOf(t, st, "two")
}

func testFenceRefusesOnceSuperseded(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "", time.Minute)
	view := ls.Fence(l1)
	require.NoError(t, fencedWrite(view, "before"))
	l2 := acquire(t, ls, "engine", "node-1", "", time.Minute)

	// Every Update through the superseded view is refused, whatever it does, and keeps nothing.
	requireFenced(t, st, view, "after")
	ran := false
	err := view.Update(bg, func(tx store.Tx) error { ran = true; return nil })
	require.ErrorIs(t, err, store.ErrFenced, "an Update that writes nothing is refused too (fn ran: %v)", ran)
	err = view.Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("f/before", 0, 1, store.NewEvent{Kind: "next"})
		return err
	})
	require.ErrorIs(t, err, store.ErrFenced)
	require.Equal(t, []string{"1 before"}, streamLines(t, st, "f/before", 0))

	// Reads and subscriptions through it still pass through.
	evs, err := view.ReadForward(bg, "f/before", 0, 0, 0)
	require.NoError(t, err)
	require.Equal(t, []string{"1 before"}, lines(evs))
	ch, cancel := view.Subscribe("f/before")
	defer cancel()
	appendKinds(t, st, "f/before", 0, "direct")
	require.True(t, received(ch))

	// A fabricated grant with a token never granted is fenced too.
	forged := l2
	forged.Token = l2.Token + 1000
	requireFenced(t, st, ls.Fence(forged), "forged")
	require.NoError(t, fencedWrite(ls.Fence(l2), "newest"))
	requireAllOf(t, st, "newest")
}

func testFenceRacesANewerGrant(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l1 := acquire(t, ls, "engine", "node-1", "", time.Minute)
	raceFence(t, st, ls.Fence(l1), ls, l1)
}

// raceFence opens a write through view (fenced by old) and, while it is open, grants old's name
// again to old's holder through acquirer. If the backend lets the grant complete while the write
// is open, the write must be refused with ErrFenced and keep nothing; if the grant waits for the
// write, the write either commits whole before it or is refused whole. Afterwards the view is
// fenced. It returns the new grant.
func raceFence(t *testing.T, st, view store.Store, acquirer store.Leases, old store.Lease) store.Lease {
	t.Helper()
	r := raceGrant(t, view, acquirer, old, "race")
	require.Greater(t, r.grant.Token, old.Token)

	evs, meta := streamLines(t, st, "race", 0), metaOf(t, st, "race")
	switch {
	case r.grantFirst:
		require.ErrorIs(t, r.err, store.ErrFenced, "a write still open when a newer grant was made")
		require.Equal(t, []string{}, evs, "nothing of the refused write")
		require.Equal(t, "<none>", meta, "nothing of the refused write")
	case r.err == nil:
		t.Log("the grant waited for the write in progress")
		require.Equal(t, []string{"1 raced"}, evs, "the write committed whole before the grant")
		require.Equal(t, "raced", meta, "the write committed whole before the grant")
	default:
		require.ErrorIs(t, r.err, store.ErrFenced)
		require.Equal(t, []string{}, evs, "nothing of the refused write")
		require.Equal(t, "<none>", meta, "nothing of the refused write")
	}
	requireFenced(t, st, view, "after-race")
	return r.grant
}

func testLapsedGrantNobodyTookStillWrites(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l := acquire(t, ls, "engine", "node-1", "", shortTTL)
	waitLapse(t, l)

	// The token, not the clock, decides who may write.
	require.NoError(t, fencedWrite(ls.Fence(l), "lapsed"))
	requireAllOf(t, st, "lapsed")
	requireHolder(t, ls, l)

	// The lapsed grant may still be renewed: it is the newest.
	before := time.Now()
	r, err := ls.Renew(bg, l, time.Minute)
	after := time.Now()
	require.NoError(t, err)
	require.Equal(t, l.Token, r.Token)
	requireExpires(t, r, before, after, time.Minute)
	got, err := ls.Acquire(bg, "engine", "node-2", "", time.Minute)
	requireHeld(t, got, err, r)
}

func testLeaseCallsAfterCloseAreErrClosed(t *testing.T, e *env) {
	st := e.handle(t)
	ls := leasesOf(t, st)
	l := acquire(t, ls, "engine", "node-1", "", time.Minute)
	view := ls.Fence(l)
	require.NoError(t, st.Close())
	_, err := ls.Acquire(bg, "other", "node-1", "", time.Minute)
	require.ErrorIs(t, err, store.ErrClosed, "Acquire")
	_, err = ls.Renew(bg, l, time.Minute)
	require.ErrorIs(t, err, store.ErrClosed, "Renew")
	require.ErrorIs(t, ls.Release(bg, l), store.ErrClosed, "Release")
	_, _, err = ls.Holder(bg, "engine")
	require.ErrorIs(t, err, store.ErrClosed, "Holder")
	_, err = ls.Grants(bg, "")
	require.ErrorIs(t, err, store.ErrClosed, "Grants")
	requireAllClosed(t, view)
	requireAllClosed(t, ls.Fence(l))

	// What was granted survives a reopen: the name is still held, and the next grant's token is
	// greater.
	re := e.handle(t)
	rls := leasesOf(t, re)
	requireHolder(t, rls, l)
	requireGrants(t, rls, "", l)
	got, err := rls.Acquire(bg, "engine", "node-2", "", time.Minute)
	requireHeld(t, got, err, l)
	l2 := acquire(t, rls, "engine", "node-1", "", time.Minute)
	require.Greater(t, l2.Token, l.Token)
}
