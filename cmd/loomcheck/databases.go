package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

// serverDatabases gives each scenario a database of its own on one PostgreSQL server (run
// --store). A database a scenario is done with is emptied and kept for the next scenario, since
// making a database costs the server far more than emptying one; one that cannot be emptied is
// dropped, and Close drops the rest when the run ends. Each database is emptied over a connection
// kept for it (postgres.Emptier), since a new connection per emptying costs the server a process.
type serverDatabases struct {
	admin string

	mu       sync.Mutex
	free     []string                     // emptied databases, ready for a scenario
	given    map[string]string            // the harness's name for a database -> the database it was given
	made     map[string]bool              // every database this run made and has not dropped
	emptiers map[string]*postgres.Emptier // by database, made at its first emptying
}

func newServerDatabases(admin string) *serverDatabases {
	return &serverDatabases{admin: admin, given: map[string]string{}, made: map[string]bool{},
		emptiers: map[string]*postgres.Emptier{}}
}

// Create implements harness.Databases: an emptied database when one is free, else a new one
// named after the first scenario that asked for it.
func (d *serverDatabases) Create(ctx context.Context, name string) (string, error) {
	d.mu.Lock()
	if _, dup := d.given[name]; dup {
		d.mu.Unlock()
		return "", fmt.Errorf("database %s was given already", name)
	}
	if n := len(d.free); n > 0 {
		db := d.free[n-1]
		d.free = d.free[:n-1]
		d.given[name] = db
		d.mu.Unlock()
		return postgres.DatabaseURL(d.admin, db)
	}
	d.mu.Unlock()
	u, err := postgres.CreateDatabase(ctx, d.admin, name)
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.given[name], d.made[name] = name, true
	d.mu.Unlock()
	return u, nil
}

// Drop implements harness.Databases: the database given under name is reset and kept, or
// dropped when it cannot be emptied.
func (d *serverDatabases) Drop(ctx context.Context, name string) error {
	d.mu.Lock()
	db, ok := d.given[name]
	delete(d.given, name)
	d.mu.Unlock()
	if !ok {
		return postgres.DropDatabase(ctx, d.admin, name)
	}
	d.mu.Lock()
	e := d.emptiers[db]
	d.mu.Unlock()
	if e == nil {
		var err error
		if e, err = postgres.NewEmptier(d.admin, db); err != nil {
			return err
		}
	}
	// The database is given to no scenario now, so e is this goroutine's alone.
	if err := e.Reset(ctx); err == nil {
		d.mu.Lock()
		d.emptiers[db] = e
		d.free = append(d.free, db)
		d.mu.Unlock()
		return nil
	}
	e.Close(ctx)
	d.mu.Lock()
	delete(d.made, db)
	delete(d.emptiers, db)
	d.mu.Unlock()
	return postgres.DropDatabase(ctx, d.admin, db)
}

// Close drops every database the run made and still has.
func (d *serverDatabases) Close(ctx context.Context) error {
	d.mu.Lock()
	var names []string
	for db := range d.made {
		names = append(names, db)
	}
	emptiers := d.emptiers
	d.made, d.free, d.emptiers = map[string]bool{}, nil, map[string]*postgres.Emptier{}
	d.mu.Unlock()
	for _, e := range emptiers {
		e.Close(ctx)
	}
	var errs []error
	for _, db := range names {
		errs = append(errs, postgres.DropDatabase(ctx, d.admin, db))
	}
	return errors.Join(errs...)
}

// storeServer reads --store: "postgres" names the server of the standard PG* environment
// variables (an empty URL to the driver); a postgres:// URL names one itself.
func storeServer(v string) (string, error) {
	switch {
	case v == "postgres":
		return "", nil
	case strings.HasPrefix(v, "postgres://"), strings.HasPrefix(v, "postgresql://"):
		return v, nil
	}
	return "", fmt.Errorf("--store %q: want postgres (the server of PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE) or a postgres:// URL", v)
}
