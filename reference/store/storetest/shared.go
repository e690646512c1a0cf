package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

func init() {
	sharedCases = append(sharedCases,
		testCase{"SharedWakeUpsCrossHandles", testSharedWakeUpsCrossHandles},
		testCase{"SharedWritesAreGapless", testSharedWritesAreGapless},
		testCase{"SharedReadsSeeWholeTransactions", testSharedReadsSeeWholeTransactions},
		testCase{"SharedCloseLeavesTheOtherHandle", testSharedCloseLeavesTheOtherHandle},
		testCase{"SharedFencingCrossesHandles", testSharedFencingCrossesHandles},
	)
}

func testSharedWakeUpsCrossHandles(t *testing.T, e *env) {
	a, b := e.handle(t), e.handle(t)
	chB, cancelB := b.Subscribe("s")
	defer cancelB()
	markB, cancelMark := b.Subscribe("marker")
	defer cancelMark()

	appendKinds(t, a, "s", 0, "a")
	// A read through another handle sees every commit made before it began.
	require.Equal(t, []string{"1 a"}, streamLines(t, b, "s", 0))
	woken(t, chB, "a commit through one handle wakes a subscriber on another")

	// What appends nothing to s wakes nobody on the other handle: a rolled-back append, metadata,
	// an empty append. Wake-ups reach a handle in commit order, so once the marker's has come,
	// any for s would have come before it.
	rollback := errors.New("rollback")
	require.ErrorIs(t, a.Update(bg, func(tx store.Tx) error {
		if _, err := tx.Append("s", 0, -1, store.NewEvent{Kind: "lost"}); err != nil {
			return err
		}
		return rollback
	}), rollback)
	require.NoError(t, a.Update(bg, func(tx store.Tx) error {
		if err := tx.PutMeta("s", []byte("x")); err != nil {
			return err
		}
		_, err := tx.Append("s", 0, -1)
		return err
	}))
	appendKinds(t, a, "marker", 0, "m")
	woken(t, markB, "the marker's commit")
	require.False(t, received(chB), "nothing appended to s, nobody on the other handle woken")
	require.Equal(t, "x", metaOf(t, b, "s"), "metadata written through one handle reads through the other")

	// And the other way round.
	chA, cancelA := a.Subscribe("s")
	defer cancelA()
	appendKinds(t, b, "s", 0, "b")
	woken(t, chA, "a commit through the second handle wakes a subscriber on the first")
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, a, "s", 0))

	// A reader on one handle, woken by commits on the other, never misses the last, and reads
	// the commit that woke it.
	wakeAndReadAll(t, a, b, 200)
	wokenReaderSeesTheCommit(t, a, b)
}

func testSharedWritesAreGapless(t *testing.T, e *env) {
	a, b := e.handle(t), e.handle(t)
	concurrentAppends(t, []store.Store{a, b}, 8, 40)
}

func testSharedReadsSeeWholeTransactions(t *testing.T, e *env) {
	a, b := e.handle(t), e.handle(t)
	wholeTransactions(t, a, []store.Store{a, b})
}

func testSharedCloseLeavesTheOtherHandle(t *testing.T, e *env) {
	a, b := e.handle(t), e.handle(t)
	appendKinds(t, a, "s", 0, "a")
	require.NoError(t, a.Close())
	requireAllClosed(t, a)
	appendKinds(t, b, "s", 0, "b")
	require.Equal(t, []string{"1 a", "2 b"}, streamLines(t, b, "s", 0))
}

func testSharedFencingCrossesHandles(t *testing.T, e *env) {
	node1, node2 := e.handle(t), e.handle(t)
	ls1, ls2 := leasesOf(t, node1), leasesOf(t, node2)

	l1 := acquire(t, ls1, "engine", "node-1", "10.0.0.1:8080", time.Minute)
	// Node 2 is refused while node 1's grant is in force, and told where node 1 is.
	got, err := ls2.Acquire(bg, "engine", "node-2", "10.0.0.2:8080", time.Minute)
	requireHeld(t, got, err, l1)
	requireHolder(t, ls2, l1)

	view1 := ls1.Fence(l1)
	require.NoError(t, fencedWrite(view1, "one"))
	requireAllOf(t, node2, "one")

	// Node 1 stops renewing (its last renewal is short); node 2 takes over once it lapses.
	r1, err := ls1.Renew(bg, l1, shortTTL)
	require.NoError(t, err)
	l2 := acquireAfterLapse(t, ls2, r1, "node-2", "10.0.0.2:8080", time.Minute)
	requireHolder(t, ls1, l2)

	// Node 1's view is fenced by node 2's grant: nothing of its write, seen from either node.
	requireFenced(t, node2, view1, "two")
	require.Equal(t, []string{}, streamLines(t, node1, "f/two", 0), "no event of write two through node 1")
	require.Equal(t, "<none>", metaOf(t, node1, "f/two"), "no metadata of write two through node 1")
	_, err = ls1.Renew(bg, l1, time.Minute)
	require.ErrorIs(t, err, store.ErrFenced, "node 1 cannot renew what node 2 holds")

	view2 := ls2.Fence(l2)
	require.NoError(t, fencedWrite(view2, "three"))
	requireAllOf(t, node1, "three")

	// Node 2 restarts on the other handle while its old incarnation's write is open.
	l3 := raceFence(t, node1, view2, ls1, l2)
	requireHolder(t, ls2, l3)
	requireFenced(t, node1, view2, "four")
}
