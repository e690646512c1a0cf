package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Reset empties the database of a store's data and keeps the store's schema, when the database
// holds the schema this package makes in public (layout) and nothing else: every row of the
// store's tables is deleted, its schema version kept, over the kept connection, with no table
// made or dropped. A new store opens on it as on a new database, with nothing to migrate: making
// the tables again for every scenario cost the server more than the scenario itself (its
// catalogue changes, and every server process started after them reading the catalogue anew).
// A database that holds anything else (another schema, another table, a trigger of someone
// else's, a large object, an older or newer schema version) is emptied as Empty does. The other
// sessions on the database are ended first in either case.
//
// The append-only and growing-token triggers stay: they are turned off inside the deleting
// transaction alone, by the tables' owner, and on again before it commits.
func (e *Emptier) Reset(ctx context.Context) error {
	kept := e.conn != nil
	err := e.reset(ctx)
	if err != nil && kept && ctx.Err() == nil {
		e.Close(ctx)
		err = e.reset(ctx)
	}
	if err != nil {
		return fmt.Errorf("store: reset database %s: %w", e.name, err)
	}
	return nil
}

func (e *Emptier) reset(ctx context.Context) error {
	if e.conn == nil {
		conn, err := pgx.Connect(ctx, e.url)
		if err != nil {
			return err
		}
		e.conn = conn
	}
	if _, err := e.conn.Exec(ctx, terminateOthers); err != nil {
		return err
	}
	have, err := layoutOf(ctx, e.conn)
	if err != nil {
		return err
	}
	if have != layout {
		return e.empty(ctx)
	}
	tx, err := e.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for _, q := range []string{
		`ALTER TABLE public.events DISABLE TRIGGER events_append_only`,
		`ALTER TABLE public.leases DISABLE TRIGGER leases_tokens_grow`,
		`DELETE FROM public.events`,
		`DELETE FROM public.meta`,
		`DELETE FROM public.remembered`,
		`DELETE FROM public.leases`,
		`DELETE FROM public.loss`,
		`DELETE FROM public.layout`,
		`ALTER TABLE public.events ENABLE TRIGGER events_append_only`,
		`ALTER TABLE public.leases ENABLE TRIGGER leases_tokens_grow`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// terminateOthers ends every other session on the connection's database.
const terminateOthers = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE datname = current_database() AND pid <> pg_backend_pid()`

// layoutOf describes what the connection's database holds beside the server's own schemas, one
// line per thing, sorted: each schema, each relation with its kind, each trigger with its table,
// whether it is on and when it fires, each constraint with its kind, each function with a digest
// of its body (names and the server's codes, not its rendering of a definition, which may change
// between its versions), each type, the
// schema versions a store recorded in public, and the number of large objects. Reset compares it
// with the layout a store of this package makes on an empty database.
func layoutOf(ctx context.Context, conn *pgx.Conn) (string, error) {
	var versions bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('public.schema_version') IS NOT NULL`).Scan(&versions); err != nil {
		return "", err
	}
	q := layoutQuery
	if versions {
		q += ` UNION ALL SELECT 'version ' || version FROM public.schema_version`
	}
	rows, err := conn.Query(ctx, q+` ORDER BY 1`)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	return strings.Join(lines, "\n"), nil
}

const layoutQuery = `WITH ns AS (
	SELECT oid, nspname FROM pg_namespace
	WHERE nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
	AND nspname NOT LIKE 'pg\_temp\_%' AND nspname NOT LIKE 'pg\_toast\_temp\_%'
)
SELECT 'schema ' || nspname FROM ns
UNION ALL SELECT 'relation ' || ns.nspname || '.' || c.relname || ' ' || c.relkind::text || CASE WHEN c.relrowsecurity THEN ' rls' ELSE '' END
	FROM pg_class c JOIN ns ON ns.oid = c.relnamespace
UNION ALL SELECT 'trigger ' || ns.nspname || '.' || c.relname || ' ' || t.tgname || ' ' || t.tgenabled::text || ' ' || t.tgtype
	FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN ns ON ns.oid = c.relnamespace WHERE NOT t.tgisinternal
UNION ALL SELECT 'constraint ' || ns.nspname || '.' || k.conname || ' ' || k.contype::text
	FROM pg_constraint k JOIN ns ON ns.oid = k.connamespace
UNION ALL SELECT 'function ' || ns.nspname || '.' || p.proname || ' ' || md5(p.prosrc)
	FROM pg_proc p JOIN ns ON ns.oid = p.pronamespace
UNION ALL SELECT 'type ' || ns.nspname || '.' || y.typname
	FROM pg_type y JOIN ns ON ns.oid = y.typnamespace
UNION ALL SELECT 'large objects ' || count(*) FROM pg_largeobject_metadata`

// layout is what layoutOf finds in a database a store of this package made at schema version 5
// and nothing else touched (TestResetKnowsTheStoresLayout holds it to the migrations).
const layout = `constraint public.events_pkey p
constraint public.events_seq_check c
constraint public.layout_one_check c
constraint public.layout_partitions_check c
constraint public.layout_pkey p
constraint public.leases_name_token u
constraint public.leases_pkey p
constraint public.leases_token_check c
constraint public.loss_epoch_check c
constraint public.loss_one_check c
constraint public.loss_pkey p
constraint public.meta_pkey p
constraint public.remembered_pkey p
constraint public.schema_version_pkey p
function public.events_append_only 6f02239caf96456350d1175ad8d58b12
function public.leases_tokens_grow b2311440d03697f57c3b61f8a1512f18
large objects 0
relation public.events r
relation public.events_pkey i
relation public.layout r
relation public.layout_pkey i
relation public.leases r
relation public.leases_name_token i
relation public.leases_pkey i
relation public.loss r
relation public.loss_pkey i
relation public.meta r
relation public.meta_pkey i
relation public.remembered r
relation public.remembered_n i
relation public.remembered_pkey i
relation public.schema_version r
relation public.schema_version_pkey i
schema public
trigger public.events events_append_only O 58
trigger public.leases leases_no_truncate O 34
trigger public.leases leases_tokens_grow O 27
type public._events
type public._layout
type public._leases
type public._loss
type public._meta
type public._remembered
type public._schema_version
type public.events
type public.layout
type public.leases
type public.loss
type public.meta
type public.remembered
type public.schema_version
version 1
version 2
version 3
version 4
version 5`
