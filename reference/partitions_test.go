package reference_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// recordedPartitions is the partition count the database url recorded (proposing one, which a
// database that recorded another ignores).
func recordedPartitions(t *testing.T, url string) int {
	t.Helper()
	st, err := postgres.Open(context.Background(), url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	p, err := st.Partitions(context.Background(), 1)
	require.NoError(t, err)
	return p
}

// TestAnotherPartitionCountIsRefused: the partition count is the database's, fixed when it is
// made; an engine or a node configured with another refuses to start, and the count stays.
func TestAnotherPartitionCountIsRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name             string
		made, configured int // 0: the default
	}{
		{"made at 4, configured by default", 4, 0},
		{"made at 4, configured 1", 4, 1},
		{"made at 2, configured by default", 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := pgtest.TempDatabase(t)
			st, err := postgres.Open(ctx, url, postgres.Options{})
			require.NoError(t, err)
			_, err = st.Partitions(ctx, c.made)
			require.NoError(t, err)
			require.NoError(t, st.Close())

			opt := nodeOptions(t, url, "n1", time.Second)
			opt.Node.Partitions = c.configured
			opt.Node.Advertise = "http://127.0.0.1:1"
			n, err := reference.OpenNode(ctx, opt)
			if err == nil {
				n.Close()
			}
			require.ErrorIs(t, err, reference.ErrPartitionsDiffer)
			require.ErrorIs(t, err, loomtype.ErrConfig)
			opt.DataDir = filepath.Join(t.TempDir(), "alone")
			e, err := reference.Open(ctx, opt)
			if err == nil {
				e.Close()
			}
			require.ErrorIs(t, err, reference.ErrPartitionsDiffer)
			require.Equal(t, c.made, recordedPartitions(t, url))
		})
	}
}

// TestWhatIsNotSharedAcrossPartitionsIsRefused: a standalone engine of more than one partition
// refuses to start and records nothing: the database's count is still the first one an engine
// that starts proposes. A node of more than one starts, with the runs' response cache too (kept
// in the store, shared by every partition).
func TestWhatIsNotSharedAcrossPartitionsIsRefused(t *testing.T) {
	ctx := context.Background()
	url := pgtest.TempDatabase(t)
	opt := nodeOptions(t, url, "n1", time.Second)
	opt.Node.Partitions = 4
	opt.Node.Advertise = "http://127.0.0.1:1"
	e, err := reference.Open(ctx, opt)
	if err == nil {
		e.Close()
	}
	require.ErrorIs(t, err, reference.ErrPartitionRouting)

	st, err := postgres.Open(ctx, url, postgres.Options{})
	require.NoError(t, err)
	defer st.Close()
	p, err := st.Partitions(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 3, p, "the refused start recorded nothing")

	url = pgtest.TempDatabase(t)
	opt = nodeOptions(t, url, "n2", time.Second)
	opt.Node.Partitions = 4
	opt.Node.Advertise = "http://127.0.0.1:1"
	opt.ResponseCache = true
	n, err := reference.OpenNode(ctx, opt)
	require.NoError(t, err)
	require.NoError(t, n.Close())
}

// TestANewDatabaseRecordsTheDefaultCount: the first engine on a new database records the default
// count, one partition.
func TestANewDatabaseRecordsTheDefaultCount(t *testing.T) {
	url := pgtest.TempDatabase(t)
	e, err := reference.Open(context.Background(), nodeOptions(t, url, "n1", time.Second))
	require.NoError(t, err)
	require.NoError(t, e.Close())
	require.Equal(t, reference.DefaultPartitions, recordedPartitions(t, url))
	require.Equal(t, 1, reference.DefaultPartitions)
}

// TestPartitionsConfiguration: node.partitions maps onto NodeOptions.Partitions; out of range is
// a configuration error at start.
func TestPartitionsConfiguration(t *testing.T) {
	c := sutconfig.SUTConfig{Listen: "127.0.0.1:9000", DataDir: t.TempDir(), Signing: sutconfig.SigningConfig{Key: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="},
		Identity: sutconfig.IdentityConfig{Insecure: true}}
	c.Storage.URL = "postgres://db/loom"
	c.Node = sutconfig.NodeConfig{ID: "n1", Partitions: 12}
	opt, err := reference.FromConfig(c)
	require.NoError(t, err)
	require.Equal(t, 12, opt.Node.Partitions)

	for _, bad := range []int{-1, 4097} {
		opt := nodeOptions(t, "", "n1", time.Second)
		opt.Node.Partitions = bad
		e, err := reference.Open(context.Background(), opt)
		if err == nil {
			e.Close()
		}
		require.ErrorIs(t, err, loomtype.ErrConfig, "partitions %d", bad)
	}
}
