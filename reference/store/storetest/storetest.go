// Package storetest is the conformance suite of store backends: every backend of
// reference/store runs it from a test of its own package, and passes it whole.
//
// The suite checks the contract of store.Store, and of each optional capability the backend
// offers (store.Killer, store.WriteCrasher, store.Leases, store.Relaxed), found with a type
// assertion on the stores the backend opens; a test of a capability the backend does not offer
// is skipped. A
// backend whose storage several handles may share at once (Backend.Shared) is also checked
// across handles: wake-ups, gapless appends, whole transactions and fencing between two engine
// nodes on one database.
//
// What the suite holds a backend to, beyond the method comments of reference/store:
//
//   - A handle tells its own subscribers of its own commits before Update returns, and once: a
//     backend that also hears its own commits back from the database (LISTEN/NOTIFY) does not
//     wake them a second time. Subscriptions are checked right after an Update, not waited for.
//   - Wake-ups from other handles arrive within a bounded wait, in commit order.
//   - Event.Time and lease expiries are taken from a clock that agrees with the test's
//     (time.Now) to the millisecond; lease expiries compare to the millisecond.
//   - Metadata keys are byte strings: any byte, 0x00 and 0xff included, in byte order.
//   - A cancelled context makes Update return its error without running fn.
//   - Concurrent Updates (the suite queues them behind a write held open, so that a backend that
//     shares commits among them has a queue to share) are each whole and apart: each caller is
//     told its own outcome, a failing or panicking fn keeps nothing and costs the others nothing,
//     each Update that wrote counts one durable write, and a crash armed for one of them lets
//     the writes before it and it commit and nothing after it.
//   - An Append with an expected head is judged exactly on a handle that has not seen the
//     stream yet.
//   - Closing a fenced view (Leases.Fence) leaves the store open.
//
// Waits are bounded (10s for what must come; 300ms for what must not, such as a Kill returning
// while a write is in progress); leases whose lapse a test waits for live 300ms.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Backend{
//			Fresh: func(t *testing.T) func(t *testing.T) store.Store {
//				path := filepath.Join(t.TempDir(), "loom.db")
//				return func(t *testing.T) store.Store {
//					st, err := sqlite.Open(context.Background(), path, sqlite.Options{})
//					if err != nil {
//						t.Fatal(err)
//					}
//					return st
//				}
//			},
//		})
//	}
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Backend tells the suite how to open stores of one backend.
//
//	b := storetest.Backend{
//		Fresh: func(t *testing.T) func(t *testing.T) store.Store {
//			url := createDatabase(t) // dropped when t ends
//			return func(t *testing.T) store.Store { return openOrFail(t, url) }
//		},
//		Shared: true,
//	}
type Backend struct {
	// Fresh makes new, empty storage for one test and returns an opener; each call of the opener
	// opens that same storage through a new handle. The suite closes every handle it opens.
	Fresh func(t *testing.T) (open func(t *testing.T) store.Store)
	// Shared: two handles on the same storage may be open at once (several engine nodes on one
	// database). false for a backend that allows one open handle at a time (SQLite).
	Shared bool
}

// Run runs every test of the suite against b as subtests of t, from t's goroutine. Each subtest
// makes fresh storage with b.Fresh, so the subtests are independent of each other; they run one
// after another. A failure is reported through t like any test's (require); a subtest of a
// capability b does not offer is skipped.
//
//	storetest.Run(t, storetest.Backend{Fresh: fresh, Shared: true})
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.Fresh == nil {
		t.Fatal("storetest: Backend.Fresh is nil")
	}
	for _, c := range cases(b) {
		t.Run(c.name, func(t *testing.T) { c.run(t, newEnv(t, b)) })
	}
}

// testCase is one test of the suite.
type testCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// cases lists the suite's tests for b, in the order they run.
func cases(b Backend) []testCase {
	var cs []testCase
	cs = append(cs, storeCases...)
	if b.Shared {
		cs = append(cs, sharedCases...)
	}
	return cs
}

// storeCases are the tests of store.Store and of the optional capabilities.
var storeCases []testCase

// sharedCases are the tests of two handles on one storage (Backend.Shared).
var sharedCases []testCase

// env is one test's storage: open opens a new handle on it, closed by the test's cleanup.
type env struct {
	b    Backend
	open func(t *testing.T) store.Store
}

func newEnv(t *testing.T, b Backend) *env {
	return &env{b: b, open: b.Fresh(t)}
}

// handle opens a handle on the test's storage and closes it when the test ends (closing twice
// is harmless by the contract).
func (e *env) handle(t *testing.T) store.Store {
	t.Helper()
	st := e.open(t)
	if st == nil {
		t.Fatal("storetest: the opener returned no store")
	}
	t.Cleanup(func() { closeBounded(t, st) })
	return st
}

// closeBounded closes st, failing the test (and leaving st behind) if Close does not return
// within the bound: a backend whose writer hangs must fail the suite, not hang it.
func closeBounded(t *testing.T, st store.Store) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.Close()
	}()
	select {
	case <-done:
	case <-time.After(waitBound):
		t.Errorf("Close did not return within %s", waitBound)
	}
}

// bg is the context of the suite's calls.
var bg = context.Background()

// waitBound bounds every wait for an event (a wake-up, a lapse, a goroutine's end): a backend
// that never delivers it fails the test instead of hanging it.
const waitBound = 10 * time.Second

// notYet is how long the suite gives a backend to do what it must not (return from a Kill while a
// write is in progress, grant a lease while a fenced write is open) before taking it that it
// waits: a bounded wait for an event that should not come.
const notYet = 300 * time.Millisecond

// appendKinds appends one event per kind to (stream, gen) in one transaction, each with the kind
// quoted as its data, and returns the new head. The Update must return within the bound (a
// writer that blocks on its subscribers fails here).
func appendKinds(t *testing.T, st store.Store, stream string, gen int64, kinds ...string) int64 {
	t.Helper()
	evs := make([]store.NewEvent, len(kinds))
	for i, k := range kinds {
		evs[i] = store.NewEvent{Kind: k, Data: []byte(`"` + k + `"`)}
	}
	var head int64
	done := make(chan error, 1)
	go func() {
		done <- st.Update(bg, func(tx store.Tx) error {
			var err error
			head, err = tx.Append(stream, gen, -1, evs...)
			return err
		})
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitBound):
		t.Fatalf("an append to %s/%d did not return within %s", stream, gen, waitBound)
	}
	return head
}

// lines renders events as "seq kind", so that whole reads compare at once.
func lines(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d %s", e.Seq, e.Kind)
	}
	return out
}

// kvLines renders metadata pairs as "key=val".
func kvLines(kvs []store.KV) []string {
	out := make([]string, len(kvs))
	for i, kv := range kvs {
		out[i] = kv.Key + "=" + string(kv.Val)
	}
	return out
}

func kindsN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i+1)
	}
	return out
}

// readAll reads the whole of (stream, gen) forward, page by page, through st.
func readAll(t *testing.T, st store.Store, stream string, gen int64) []store.Event {
	t.Helper()
	var all []store.Event
	var after int64
	for {
		evs, err := st.ReadForward(bg, stream, gen, after, 0)
		require.NoError(t, err)
		if len(evs) == 0 {
			return all
		}
		all = append(all, evs...)
		after = evs[len(evs)-1].Seq
	}
}

// streamLines is the whole of (stream, gen) as lines.
func streamLines(t *testing.T, st store.Store, stream string, gen int64) []string {
	t.Helper()
	return lines(readAll(t, st, stream, gen))
}

// received reports whether ch holds a wake-up right now. A handle tells its subscribers of its
// own commits before Update returns, so after an Update through the same handle this is a
// deterministic check, not a race.
func received(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// woken waits (bounded) for a wake-up on ch.
func woken(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitBound):
		t.Fatalf("no wake-up within %s: %s", waitBound, what)
	}
}

// within waits (bounded) for done to be closed.
func within(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(waitBound):
		t.Fatalf("not within %s: %s", waitBound, what)
	}
}

// metaOf reads key through st: its value, or "<none>".
func metaOf(t *testing.T, st store.Store, key string) string {
	t.Helper()
	v, ok, err := st.Meta(bg, key)
	require.NoError(t, err)
	if !ok {
		return "<none>"
	}
	return string(v)
}
