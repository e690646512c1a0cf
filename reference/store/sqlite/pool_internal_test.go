package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/reference/store"

	"github.com/stretchr/testify/require"
)

// The writer is one connection (SQLite has one writer; a second connection would only wait on the
// busy lock and break the order Update promises), and the reader pool has the documented default
// size, or the configured one.
func TestConnectionPools(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		readers, want int
	}{{0, 4}, {-1, 4}, {1, 1}, {7, 7}} {
		st, err := Open(ctx, filepath.Join(t.TempDir(), "loom.db"), Options{Readers: c.readers})
		require.NoError(t, err)
		require.Equal(t, 1, st.w.Stats().MaxOpenConnections, "the writer is a single connection")
		require.Equal(t, c.want, st.r.Stats().MaxOpenConnections, "readers for Options.Readers=%d", c.readers)
		// The idle pools keep what they may open: a read or a write after a pause needs no new
		// connection. database/sql reports no idle limit; it shows in the connections kept open.
		require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("v")) }))
		require.NoError(t, st.Update(ctx, func(tx store.Tx) error { return tx.PutMeta("k", []byte("w")) }))
		require.Equal(t, 1, st.w.Stats().OpenConnections, "the writer's connection is kept, and only one")
		require.NoError(t, st.Close())
	}
}

// A read refused because its context ended returns the context's error itself, not wrapped in a
// "store: read" error: callers compare it with == in places, and it is no fault of the store.
func TestReadErrorsPassCancellationThrough(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "loom.db"), Options{})
	require.NoError(t, err)
	defer st.Close()

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		_, err := st.Head(c.ctx, "s", 0)
		require.Equal(t, c.want, err, "Head")
		_, _, err = st.Meta(c.ctx, "k")
		require.Equal(t, c.want, err, "Meta")
		_, err = st.ReadForward(c.ctx, "s", 0, 0, 0)
		require.Equal(t, c.want, err, "ReadForward")
	}
	// Any other failure is wrapped, and says it was a read.
	require.Equal(t, "store: read: boom", st.readErr(errors.New("boom")).Error())
	require.Equal(t, context.DeadlineExceeded, st.readErr(context.DeadlineExceeded))
	require.Equal(t, context.Canceled, st.readErr(context.Canceled))
}

// prefixEnd finds the smallest key above every key with the prefix, carrying over 0xff bytes.
func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"ab", "ac", true},
		{"a\xff", "b", true},
		{"a\xff\xff", "b", true},
		{"\xfe", "\xff", true},
		{"\xff", "", false},
		{"\xff\xff", "", false},
		{"", "", false},
	} {
		got, ok := prefixEnd(c.in)
		require.Equal(t, c.want, got, "prefixEnd(%q)", c.in)
		require.Equal(t, c.ok, ok, "prefixEnd(%q)", c.in)
	}
}
