// Package pgtest gives tests a PostgreSQL database of their own: TempDatabase creates one with a
// unique name and drops it when the test ends. The server is the one the standard PostgreSQL
// environment variables name (PGHOST, PGPORT, PGUSER, PGPASSWORD; the role must be allowed to
// create databases).
//
// Without a server (PGHOST unset) the tests that need one are skipped, unless the environment
// variable CI is set: a CI run always provides a server (.ci/postgres starts one), so there the
// missing server fails the test instead of hiding it.
//
//	func TestSomething(t *testing.T) {
//		url := pgtest.TempDatabase(t)
//		st, err := postgres.Open(context.Background(), url, postgres.Options{})
//		...
//	}
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

// AdminURL is the connection string TempDatabase creates and drops databases through: empty, so
// the PG* environment variables name the server and the role.
const AdminURL = ""

// Require skips t when no server is configured (PGHOST unset), or fails it when the environment
// variable CI is set, since CI always provides one.
//
//	pgtest.Require(t)
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv("PGHOST") != "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("PGHOST is unset: CI must provide a PostgreSQL server (eval \"$(.ci/postgres)\")")
	}
	t.Skip("PGHOST is unset: no PostgreSQL server to test against (eval \"$(.ci/postgres)\" starts one)")
}

var seq atomic.Int64

// TempDatabase creates an empty database with a name no other test or process uses
// (loomtest_<pid>_<n>_<random>) and returns its connection string; the database is dropped, with
// whatever sessions are still on it, when t and its subtests end. It calls Require first.
//
//	url := pgtest.TempDatabase(t)
func TempDatabase(t testing.TB) string {
	t.Helper()
	Require(t)
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("loomtest_%d_%d_%s", os.Getpid(), seq.Add(1), hex.EncodeToString(rnd[:]))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := postgres.CreateDatabase(ctx, AdminURL, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := postgres.DropDatabase(ctx, AdminURL, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return url
}
