package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

func init() {
	storeCases = append(storeCases,
		testCase{"ConcurrentRemembersKeepTheWindow", testConcurrentRemembersKeepTheWindow},
	)
}

// errProbe rolls back the transaction that looked a key up.
var errProbe = errors.New("storetest: probe, rolled back")

// Keys remembered in one scope by writers at once (one commit each, through two handles when the
// backend is shared) are numbered one after another, each once. In each round every writer
// remembers one new key, all starting together, and the window is as many keys as there are
// writers: after the round the scope holds exactly that round's keys, and none of the round
// before (two keys numbered alike would leave a key of the round before inside the window).
func testConcurrentRemembersKeepTheWindow(t *testing.T, e *env) {
	stores := []store.Store{e.handle(t)}
	if e.b.Shared {
		stores = append(stores, e.handle(t))
	}
	const writers, rounds = 8, 10
	key := func(round, w int) string { return fmt.Sprintf("r%d-w%d", round, w) }
	known := func(k string) bool {
		t.Helper()
		var fresh bool
		err := stores[0].Update(bg, func(tx store.Tx) error {
			var err error
			if fresh, err = tx.Remember("window", k, writers); err != nil {
				return err
			}
			return errProbe
		})
		require.ErrorIs(t, err, errProbe)
		return !fresh
	}
	for r := range rounds {
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			st := stores[w%len(stores)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var fresh bool
				if err := st.Update(bg, func(tx store.Tx) error {
					var err error
					fresh, err = tx.Remember("window", key(r, w), writers)
					return err
				}); err != nil {
					errs <- fmt.Errorf("key %s: %w", key(r, w), err)
					return
				}
				if !fresh {
					errs <- fmt.Errorf("key %s, never remembered before, was taken as known", key(r, w))
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		// Each lookup is rolled back, so the lookups forget nothing.
		for w := range writers {
			require.True(t, known(key(r, w)), "round %d: key %s is one of the newest %d", r, key(r, w), writers)
			if r > 0 {
				require.False(t, known(key(r-1, w)), "round %d: key %s of the round before is forgotten", r, key(r-1, w))
			}
		}
	}
}
