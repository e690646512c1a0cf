package postgres_test

import (
	"context"
	"testing"

	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/reference/store/storetest"
)

var bg = context.Background()

// TestStore runs the backends' conformance suite: every subtest on a database of its own, opened
// through as many handles as the subtest asks for (two engine nodes on one database).
func TestStore(t *testing.T) {
	pgtest.Require(t)
	storetest.Run(t, storetest.Backend{
		Fresh: func(t *testing.T) func(t *testing.T) store.Store {
			url := pgtest.TempDatabase(t)
			return func(t *testing.T) store.Store {
				st, err := postgres.Open(bg, url, postgres.Options{})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
		},
		Shared: true,
	})
}
