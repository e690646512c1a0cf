package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// A database that held anything when the schema learnt partitions is at one partition, whatever
// is proposed after; one that held nothing records the first count proposed.
func TestMigrationRecordsOnePartitionForADatabaseInUse(t *testing.T) {
	ctx := context.Background()
	url := tempDatabase(t)
	for _, c := range []struct {
		name    string
		written func(*Postgres)
		want    int
	}{
		{"a metadata record", func(s *Postgres) {
			require.NoError(t, s.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("exec/c_1", []byte("x")) }))
		}, 1},
		{"an event", func(s *Postgres) {
			require.NoError(t, s.Update(ctx, func(tx store.Tx) error {
				_, err := tx.Append("x/c_1", 1, 0, store.NewEvent{Kind: "k"})
				return err
			}))
		}, 1},
		{"a lease", func(s *Postgres) {
			_, err := s.Acquire(ctx, "engine", "n1", "", 10*time.Second)
			require.NoError(t, err)
		}, 1},
		{"nothing", func(*Postgres) {}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(ctx, url, Options{Schema: "m"})
			require.NoError(t, err)
			defer s.Close()
			_, err = s.pool.Exec(ctx, `DROP SCHEMA m CASCADE`)
			require.NoError(t, err)
			require.NoError(t, s.migrate(ctx, migrations[:3]))
			c.written(s)
			require.NoError(t, s.migrate(ctx, migrations))
			p, err := s.Partitions(ctx, 4)
			require.NoError(t, err)
			require.Equal(t, c.want, p)
		})
	}
}
