package storetest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Writers at once, as a backend that commits them together meets them: each to a stream of its
// own, all reading and rewriting one metadata value, and fenced writers racing a newer grant. A
// backend that serialises its writes passes them too; one that runs them at once must keep each
// whole and apart, whoever ran first.

func init() {
	storeCases = append(storeCases,
		testCase{"ConcurrentWritersToTheirOwnStreams", func(t *testing.T, e *env) {
			ownStreams(t, []store.Store{e.handle(t)})
		}},
		testCase{"ConcurrentReadModifyWritesLoseNothing", func(t *testing.T, e *env) {
			readModifyWrites(t, []store.Store{e.handle(t)})
		}},
		testCase{"ConcurrentFencedWritersRaceAGrant", func(t *testing.T, e *env) {
			st := e.handle(t)
			fencedWritersRaceAGrant(t, []store.Store{st}, leasesOf(t, st))
		}},
	)
	sharedCases = append(sharedCases,
		testCase{"SharedConcurrentWritersToTheirOwnStreams", func(t *testing.T, e *env) {
			ownStreams(t, []store.Store{e.handle(t), e.handle(t)})
		}},
		testCase{"SharedConcurrentReadModifyWritesLoseNothing", func(t *testing.T, e *env) {
			readModifyWrites(t, []store.Store{e.handle(t), e.handle(t)})
		}},
		testCase{"SharedConcurrentFencedWritersRaceAGrant", func(t *testing.T, e *env) {
			a, b := e.handle(t), e.handle(t)
			// The writers are node 1's (a); node 1 restarts on b and takes its name back.
			fencedWritersRaceAGrant(t, []store.Store{a}, leasesOf(t, b))
		}},
	)
}

// concurrentWriters is how many writers the tests of this file run at once, and writerRounds how
// many Updates each makes.
const concurrentWriters, writerRounds = 8, 25

// runWriters runs fn(w) for each of n writers at once and fails the test with the first error any
// returned, once all have returned (within the bound).
func runWriters(t *testing.T, n int, fn func(w int) error) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() { errs[w] = fn(w) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "the writers returned")
	for w, err := range errs {
		require.NoError(t, err, "writer %d", w)
	}
}

// ownStreams: writers at once, writer w through stores[w%len] to stream own/w with the expected
// head and to the metadata key own/w: none conflicts with another (each expectation holds), every
// Update is told the head it made, and each stream holds exactly its writer's events, in order,
// with no gap, through every handle.
func ownStreams(t *testing.T, stores []store.Store) {
	runWriters(t, concurrentWriters, func(w int) error {
		st := stores[w%len(stores)]
		stream := fmt.Sprintf("own/%d", w)
		for i := range writerRounds {
			var head int64
			err := st.Update(bg, func(tx store.Tx) error {
				var err error
				if head, err = tx.Append(stream, 0, int64(i), store.NewEvent{Kind: fmt.Sprintf("w%d-%d", w, i)}); err != nil {
					return err
				}
				return tx.PutMeta(stream, []byte(strconv.Itoa(i)))
			})
			if err != nil {
				return fmt.Errorf("append %d: %w", i, err)
			}
			if head != int64(i+1) {
				return fmt.Errorf("append %d made head %d", i, head)
			}
		}
		return nil
	})
	for w := range concurrentWriters {
		stream := fmt.Sprintf("own/%d", w)
		want := make([]string, writerRounds)
		for i := range want {
			want[i] = fmt.Sprintf("%d w%d-%d", i+1, w, i)
		}
		for h, st := range stores {
			require.Equal(t, want, streamLines(t, st, stream, 0), "writer %d's stream through handle %d", w, h)
			require.Equal(t, strconv.Itoa(writerRounds-1), metaOf(t, st, stream), "writer %d's metadata through handle %d", w, h)
		}
	}
}

// readModifyWrites: writers at once, each Update reading the metadata value "counter", writing
// it back one greater, appending the new value to the stream "counted" and remembering its round
// in the scope "rounds". Nothing is lost or doubled: the counter ends at the number of Updates,
// the stream holds 1, 2, 3... at seqs 1, 2, 3... (each Update read what the one before it wrote),
// and each round was fresh for exactly one writer.
func readModifyWrites(t *testing.T, stores []store.Store) {
	var freshMu sync.Mutex
	fresh := map[int]int{}
	runWriters(t, concurrentWriters, func(w int) error {
		st := stores[w%len(stores)]
		for i := range writerRounds {
			var wasFresh bool
			err := st.Update(bg, func(tx store.Tx) error {
				v, _, err := tx.Meta("counter")
				if err != nil {
					return err
				}
				n := 0
				if len(v) > 0 {
					if n, err = strconv.Atoi(string(v)); err != nil {
						return err
					}
				}
				next := strconv.Itoa(n + 1)
				if err := tx.PutMeta("counter", []byte(next)); err != nil {
					return err
				}
				if _, err := tx.Append("counted", 0, int64(n), store.NewEvent{Kind: next}); err != nil {
					return err
				}
				// A store may run fn again: only the run that committed counts.
				wasFresh, err = tx.Remember("rounds", strconv.Itoa(i), 0)
				return err
			})
			if err != nil {
				return fmt.Errorf("round %d: %w", i, err)
			}
			if wasFresh {
				freshMu.Lock()
				fresh[i]++
				freshMu.Unlock()
			}
		}
		return nil
	})
	total := concurrentWriters * writerRounds
	want := make([]string, total)
	for i := range want {
		want[i] = fmt.Sprintf("%d %d", i+1, i+1)
	}
	for h, st := range stores {
		require.Equal(t, strconv.Itoa(total), metaOf(t, st, "counter"), "the counter through handle %d", h)
		require.Equal(t, want, streamLines(t, st, "counted", 0), "the counted values through handle %d", h)
	}
	for i := range writerRounds {
		require.Equal(t, 1, fresh[i], "round %d was fresh for exactly one writer", i)
	}
}

// fencedWritersRaceAGrant: writers at once through stores (node 1's handles), each fenced by
// node 1's grant, append to the stream "fenced" and store metadata until refused; once some have
// committed, acquirer grants the name again (node 1 restarted) and writes a marker through the
// new grant. Every write is either kept whole, before the marker, or refused whole with
// ErrFenced; every writer is refused in the end; the stream has no gap.
func fencedWritersRaceAGrant(t *testing.T, stores []store.Store, acquirer store.Leases) {
	l1 := acquire(t, acquirer, "engine", "node-1", "", time.Minute)
	views := make([]store.Store, len(stores))
	for i, st := range stores {
		views[i] = leasesOf(t, st).Fence(l1)
	}
	var committed atomic.Int64
	someCommitted := make(chan struct{})
	var someOnce sync.Once
	granted := make(chan struct{})
	var grantOnce sync.Once
	grant := func() { grantOnce.Do(func() { close(granted) }) }
	t.Cleanup(grant) // a failing test lets the writers end
	outcomes := make([][]fencedOutcome, concurrentWriters)
	var wg sync.WaitGroup
	for w := range concurrentWriters {
		view := views[w%len(views)]
		wg.Go(func() {
			for i := 0; ; i++ {
				tag := fmt.Sprintf("w%d-%d", w, i)
				err := view.Update(bg, func(tx store.Tx) error {
					if _, err := tx.Append("fenced", 0, -1, store.NewEvent{Kind: tag}); err != nil {
						return err
					}
					return tx.PutMeta("fenced/"+tag, []byte("v"))
				})
				outcomes[w] = append(outcomes[w], fencedOutcome{tag, err})
				if err != nil {
					return
				}
				if committed.Add(1) >= concurrentWriters {
					someOnce.Do(func() { close(someCommitted) })
				}
				if i >= 10*writerRounds {
					<-granted // enough before the grant: wait for it, then write until refused
				}
			}
		})
	}
	within(t, someCommitted, "some fenced writes committed")
	l2, err := acquirer.Acquire(bg, "engine", "node-1", "", time.Minute)
	grant()
	require.NoError(t, err, "the new grant")
	require.Greater(t, l2.Token, l1.Token)
	require.NoError(t, acquirer.Fence(l2).Update(bg, func(tx store.Tx) error {
		_, err := tx.Append("fenced", 0, -1, store.NewEvent{Kind: "marker"})
		return err
	}), "the new grant's write")
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "every fenced writer was refused")

	checkFencedOutcomes(t, stores[0], outcomes)
}

// fencedOutcome is what one write of fencedWritersRaceAGrant was told: its tag, and its error.
type fencedOutcome struct {
	tag string
	err error
}

// checkFencedOutcomes checks what st holds after fencedWritersRaceAGrant against what each writer
// was told (outcomes[w]: writer w's writes in order): no gap, no event twice, the new grant's
// marker last, every write told it committed kept, every refused one absent.
func checkFencedOutcomes(t *testing.T, st store.Store, outcomes [][]fencedOutcome) {
	evs := readAll(t, st, "fenced", 0)
	at := map[string]int{}
	for i, ev := range evs {
		require.EqualValues(t, i+1, ev.Seq, "no gap")
		_, twice := at[ev.Kind]
		require.False(t, twice, "%s appended once", ev.Kind)
		at[ev.Kind] = i
	}
	marker, ok := at["marker"]
	require.True(t, ok, "the new grant's marker")
	require.Equal(t, len(evs)-1, marker, "nothing of the old grant after the new grant's write")
	kept := 0
	for w, outs := range outcomes {
		require.NotEmpty(t, outs, "writer %d", w)
		require.ErrorIs(t, outs[len(outs)-1].err, store.ErrFenced, "writer %d ends refused", w)
		for _, o := range outs {
			_, in := at[o.tag]
			if o.err == nil {
				kept++
				require.True(t, in, "%s committed: its event is kept", o.tag)
				require.Equal(t, "v", metaOf(t, st, "fenced/"+o.tag), "%s committed: its metadata is kept", o.tag)
				continue
			}
			require.True(t, errors.Is(o.err, store.ErrFenced), "%s: %v", o.tag, o.err)
			require.False(t, in, "%s was refused: no event of it", o.tag)
			require.Equal(t, "<none>", metaOf(t, st, "fenced/"+o.tag), "%s was refused: no metadata of it", o.tag)
		}
	}
	require.Equal(t, kept, marker, "every event before the marker is a write its writer was told committed")
}
