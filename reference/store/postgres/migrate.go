package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/loomcheck/loomcheck/reference/store"
)

// migration is one step of the store's schema: its statements run in the migration
// transaction, with {s} standing for the quoted schema name.
type migration struct {
	// Version is the schema version the step brings the store to: 1, 2, 3...
	Version int64
	What    string
	SQL     string
}

// migrations is the store's schema, step by step. A step, once released, never changes: a new
// need is a new step at the end.
//
// Strings of the contract (stream, kind, keys, lease names and holders) are stored as bytea:
// every Go string round-trips byte for byte (NUL and invalid UTF-8 included) and sorts in byte
// order, as in SQLite. Event times are Unix milliseconds.
var migrations = []migration{{
	Version: 1,
	What:    "events, meta, remembered keys and leases; events append-only, lease tokens only grow",
	SQL: `
CREATE TABLE {s}.events (
	stream bytea  NOT NULL,
	gen    bigint NOT NULL,
	seq    bigint NOT NULL CHECK (seq >= 1),
	kind   bytea  NOT NULL,
	data   bytea,
	time   bigint NOT NULL,
	PRIMARY KEY (stream, gen, seq)
);
CREATE FUNCTION {s}.events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'events are append-only: % of %.% refused', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
		USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON {s}.events
	FOR EACH STATEMENT EXECUTE FUNCTION {s}.events_append_only();

CREATE TABLE {s}.meta (
	key bytea PRIMARY KEY,
	val bytea NOT NULL
);

CREATE TABLE {s}.remembered (
	scope bytea  NOT NULL,
	key   bytea  NOT NULL,
	n     bigint NOT NULL,
	PRIMARY KEY (scope, key)
);
CREATE INDEX remembered_n ON {s}.remembered (scope, n);

CREATE TABLE {s}.leases (
	name    bytea       PRIMARY KEY,
	holder  bytea       NOT NULL,
	note    bytea       NOT NULL,
	token   bigint      NOT NULL CHECK (token >= 1),
	expires timestamptz NOT NULL
);
CREATE FUNCTION {s}.leases_tokens_grow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' AND NEW.name = OLD.name AND NEW.token >= OLD.token THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION 'lease tokens only grow: % of %.% refused', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
		USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER leases_tokens_grow BEFORE UPDATE OR DELETE ON {s}.leases
	FOR EACH ROW EXECUTE FUNCTION {s}.leases_tokens_grow();
CREATE TRIGGER leases_no_truncate BEFORE TRUNCATE ON {s}.leases
	FOR EACH STATEMENT EXECUTE FUNCTION {s}.leases_tokens_grow();
`,
}, {
	Version: 2,
	What:    "lease tokens are key columns: a fenced write's key-share lock holds grants, not renewals",
	// A unique index makes token a key column for row locking: an UPDATE that changes it (a
	// grant) needs the row's exclusive lock and waits for the FOR KEY SHARE a fenced write holds,
	// while an UPDATE of the expiry alone (a renewal, a release) does not.
	SQL: `ALTER TABLE {s}.leases ADD CONSTRAINT leases_name_token UNIQUE (name, token);`,
}, {
	Version: 3,
	What:    "the loss epoch of relaxed commits, and the server start it was counted at",
	SQL: `CREATE TABLE {s}.loss (
	one     int         PRIMARY KEY CHECK (one = 1),
	epoch   bigint      NOT NULL CHECK (epoch >= 0),
	started timestamptz NOT NULL
);`,
}, {
	Version: 4,
	What:    "the partition count the executions are shared out in; a database holding anything already is at 1",
	// The count is recorded once, by the first store that asks with the table empty
	// (Postgres.Partitions); a database written before partitions existed holds its executions
	// at the root, which is one partition, and says so here. Raising the version makes an engine
	// from before partitions refuse the database rather than run beside partitioned nodes.
	SQL: `CREATE TABLE {s}.layout (
	one        int PRIMARY KEY CHECK (one = 1),
	partitions int NOT NULL CHECK (partitions >= 1)
);
INSERT INTO {s}.layout (one, partitions) SELECT 1, 1
	WHERE EXISTS (SELECT 1 FROM {s}.events) OR EXISTS (SELECT 1 FROM {s}.meta) OR EXISTS (SELECT 1 FROM {s}.leases);`,
}, {
	Version: 5,
	What:    "writers lock only what they touch, with no store-wide write lock beside",
	// Nothing of the tables changes. Engines of versions 1 to 4 take a store-wide write lock (some
	// of their writes take it alone, in place of the locks of what they touch), which writers of
	// this version no longer take: recording the step makes those engines refuse the store
	// rather than write beside writers that would not wait for them.
	SQL: `SELECT 1`,
}}

// SchemaVersion is the newest schema version this package knows: a store whose schema is newer
// is refused with a *store.SchemaError.
//
//	var se *store.SchemaError
//	if errors.As(err, &se) { log.Printf("schema %d, this engine knows %d", se.Have, postgres.SchemaVersion()) }
func SchemaVersion() int64 { return migrations[len(migrations)-1].Version }

// migrate brings the store's schema to the newest version of list: in one transaction, under an
// advisory lock of the schema (a second node opening at once waits, then finds nothing to do),
// it creates the schema and the version table if missing, refuses a schema newer than list
// knows, and applies each step not yet applied, recording it.
func (s *Postgres) migrate(ctx context.Context, list []migration) error {
	know := int64(0)
	if n := len(list); n > 0 {
		know = list[n-1].Version
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.where, err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.migrateKey); err != nil {
		return fmt.Errorf("store: migrate %s: lock: %w", s.where, err)
	}
	// What exists is looked up first: creating it "if not exists" would need privileges a role
	// running on a prepared database may not have.
	var hasSchema, hasVersions bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1), to_regclass($2) IS NOT NULL`,
		s.opt.Schema, quoteIdent(s.opt.Schema)+".schema_version").Scan(&hasSchema, &hasVersions); err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.where, err)
	}
	if !hasSchema {
		if _, err := tx.Exec(ctx, sqlFor(s.opt.Schema, `CREATE SCHEMA {s}`)); err != nil {
			return fmt.Errorf("store: migrate %s: create the schema: %w", s.where, err)
		}
	}
	if !hasVersions {
		if _, err := tx.Exec(ctx, sqlFor(s.opt.Schema, `CREATE TABLE {s}.schema_version (
	version bigint PRIMARY KEY,
	what    text NOT NULL,
	applied timestamptz NOT NULL DEFAULT now()
)`)); err != nil {
			return fmt.Errorf("store: migrate %s: %w", s.where, err)
		}
	}
	var have int64
	if err := tx.QueryRow(ctx, sqlFor(s.opt.Schema, `SELECT COALESCE(MAX(version), 0) FROM {s}.schema_version`)).Scan(&have); err != nil {
		return fmt.Errorf("store: migrate %s: %w", s.where, err)
	}
	if have > know {
		return &store.SchemaError{Where: s.where, Have: have, Know: know}
	}
	if have == know {
		return nil // nothing to do; the transaction only read
	}
	for _, m := range list {
		if m.Version <= have {
			continue
		}
		if _, err := tx.Exec(ctx, sqlFor(s.opt.Schema, m.SQL)); err != nil {
			return fmt.Errorf("store: migrate %s to version %d (%s): %w", s.where, m.Version, m.What, err)
		}
		if _, err := tx.Exec(ctx, sqlFor(s.opt.Schema, `INSERT INTO {s}.schema_version (version, what) VALUES ($1, $2)`), m.Version, m.What); err != nil {
			return fmt.Errorf("store: migrate %s to version %d: %w", s.where, m.Version, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("store: migrate %s: commit: %w", s.where, err)
	}
	return nil
}

// queries are the store's statements, with its schema in them.
type queries struct {
	begin                                 string // the write transaction's start
	readForward, readBackward, head       string
	meta, metaFrom, metaRange             string
	appendEvents, notify, putMeta         string
	remember                              string
	delMeta                               string
	fence                                 string
	leaseGet, leaseInsert, leaseGrant     string
	leaseRenew, leaseRelease, leaseHolder string
	grantsFrom, grantsRange               string
	layoutPut, layoutGet                  string
}

func newQueries(schema string) queries {
	q := func(s string) string { return sqlFor(schema, s) }
	return queries{
		// Writers run at once, each locking what it touches and nothing else (tx.go). The start
		// goes to the server with the transaction's first statement, in the same round trip.
		begin:        `BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE`,
		readForward:  q(`SELECT seq, kind, data, time FROM {s}.events WHERE stream = $1 AND gen = $2 AND seq > $3 ORDER BY seq ASC LIMIT $4`),
		readBackward: q(`SELECT seq, kind, data, time FROM {s}.events WHERE stream = $1 AND gen = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4`),
		// A stream's head is its newest event's number, read as the first entry of a backward walk
		// of the primary key: a few pages whatever the stream's length. (MAX(seq) is planned as a
		// walk of the whole stream while the table has no statistics, as a new store's has not:
		// the cost of every append then grows with its stream.)
		head:      q(`SELECT COALESCE((SELECT seq FROM {s}.events WHERE stream = $1 AND gen = $2 ORDER BY seq DESC LIMIT 1), 0)`),
		meta:      q(`SELECT val FROM {s}.meta WHERE key = $1`),
		metaFrom:  q(`SELECT key, val FROM {s}.meta WHERE key >= $1 ORDER BY key`),
		metaRange: q(`SELECT key, val FROM {s}.meta WHERE key >= $1 AND key < $2 ORDER BY key`),
		// One round trip: the head, and the events numbered after it when the expected head
		// holds. The stream's notification is sent after the commit (notify): a transaction that
		// notifies holds a lock of the whole database through its commit, which would commit
		// every append one at a time.
		appendEvents: q(`WITH h AS (
	SELECT COALESCE((SELECT seq FROM {s}.events WHERE stream = $1 AND gen = $2 ORDER BY seq DESC LIMIT 1), 0) AS head
), ins AS (
	INSERT INTO {s}.events (stream, gen, seq, kind, data, time)
	SELECT $1, $2, h.head + e.n, e.kind, e.data, $6
	FROM h, unnest($4::bytea[], $5::bytea[]) WITH ORDINALITY AS e(kind, data, n)
	WHERE $3::bigint < 0 OR h.head = $3::bigint
	RETURNING seq
)
SELECT h.head, (SELECT count(*) FROM ins) FROM h`),
		// The wake-up of the streams a commit appended to, sent right after it, in the same round
		// trip (and so before the Update returns).
		notify:  `SELECT count(pg_notify($1, p)) FROM unnest($2::text[]) AS p`,
		putMeta: q(`INSERT INTO {s}.meta (key, val) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET val = excluded.val`),
		delMeta: q(`DELETE FROM {s}.meta WHERE key = $1`),
		// One round trip: the key numbered after the scope's newest unless it is there, and the
		// keys older than the newest keep forgotten.
		remember: q(`WITH top AS (
	SELECT COALESCE((SELECT n FROM {s}.remembered WHERE scope = $1 ORDER BY n DESC LIMIT 1), 0) + 1 AS n
), ins AS (
	INSERT INTO {s}.remembered (scope, key, n) SELECT $1, $2, top.n FROM top
	ON CONFLICT (scope, key) DO NOTHING
	RETURNING n
), forgot AS (
	DELETE FROM {s}.remembered r USING ins WHERE $3::bigint > 0 AND r.scope = $1 AND r.n <= ins.n - $3::bigint
)
SELECT count(*) FROM ins`),
		fence:        q(`SELECT token FROM {s}.leases WHERE name = $1 FOR KEY SHARE`),
		leaseGet:     q(`SELECT holder, note, token, expires, expires <= clock_timestamp() FROM {s}.leases WHERE name = $1 FOR NO KEY UPDATE`),
		leaseInsert:  q(`INSERT INTO {s}.leases (name, holder, note, token, expires) VALUES ($1, $2, $3, 1, clock_timestamp() + $4::bigint * interval '1 microsecond') ON CONFLICT (name) DO NOTHING RETURNING token, expires`),
		leaseGrant:   q(`UPDATE {s}.leases SET holder = $2, note = $3, token = token + 1, expires = clock_timestamp() + $4::bigint * interval '1 microsecond' WHERE name = $1 RETURNING token, expires`),
		leaseRenew:   q(`UPDATE {s}.leases SET expires = clock_timestamp() + $3::bigint * interval '1 microsecond' WHERE name = $1 AND token = $2 RETURNING holder, note, expires`),
		leaseRelease: q(`UPDATE {s}.leases SET expires = clock_timestamp() WHERE name = $1 AND token = $2 AND expires > clock_timestamp()`),
		leaseHolder:  q(`SELECT holder, note, token, expires FROM {s}.leases WHERE name = $1`),
		// The grants of a prefix: from the prefix to the first name past every name it starts
		// (prefixEnd), or to the end when no such name exists.
		grantsFrom:  q(`SELECT name, holder, note, token, expires FROM {s}.leases WHERE name >= $1 ORDER BY name`),
		grantsRange: q(`SELECT name, holder, note, token, expires FROM {s}.leases WHERE name >= $1 AND name < $2 ORDER BY name`),
		layoutPut:   q(`INSERT INTO {s}.layout (one, partitions) VALUES (1, $1) ON CONFLICT (one) DO NOTHING`),
		layoutGet:   q(`SELECT partitions FROM {s}.layout WHERE one = 1`),
	}
}
