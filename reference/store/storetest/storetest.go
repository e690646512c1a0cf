// Package storetest is the conformance suite of store backends: every backend of
// reference/store runs it from a test of its own package, and passes it whole.
//
// The suite checks the contract of store.Store, and of each optional capability the backend
// offers (store.Killer, store.WriteCrasher, store.Leases), found with a type assertion on the
// stores the backend opens. A backend whose storage several handles may share at once
// (Backend.Shared) is also checked across handles: wake-ups, gapless appends and fencing between
// two engine nodes on one database.
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
	"testing"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Backend tells the suite how to open stores of one backend.
type Backend struct {
	// Fresh makes new, empty storage for one test and returns an opener; each call of the opener
	// opens that same storage through a new handle. The suite closes every handle it opens.
	Fresh func(t *testing.T) (open func(t *testing.T) store.Store)
	// Shared: two handles on the same storage may be open at once (several engine nodes on one
	// database). false for a backend that allows one open handle at a time (SQLite).
	Shared bool
}

// Run runs every test of the suite against b as subtests of t. Each subtest makes fresh storage
// with b.Fresh, so the subtests are independent of each other; they do not run in parallel.
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
	t.Cleanup(func() { _ = st.Close() })
	return st
}
