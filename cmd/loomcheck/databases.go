package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomcheck/loomcheck/reference/store/postgres"
)

// serverDatabases gives each scenario a database of its own on one PostgreSQL server (run
// --store): made before the scenario from the admin URL, dropped after it.
type serverDatabases struct{ admin string }

// Create implements harness.Databases.
func (d serverDatabases) Create(ctx context.Context, name string) (string, error) {
	return postgres.CreateDatabase(ctx, d.admin, name)
}

// Drop implements harness.Databases.
func (d serverDatabases) Drop(ctx context.Context, name string) error {
	return postgres.DropDatabase(ctx, d.admin, name)
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
