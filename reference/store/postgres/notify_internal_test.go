package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/store"
)

// Commits that finish while another commit is sending wake-ups hand theirs to it: they are
// visible at once, their Updates return only once the sender has sent them, in one notification,
// and another node's subscribers of each stream are woken by it.
func TestCommitsHandTheirWakeUpsToTheSender(t *testing.T) {
	ctx := context.Background()
	url := tempDatabase(t)
	a, err := Open(ctx, url, Options{})
	require.NoError(t, err)
	defer a.Close()
	b, err := Open(ctx, url, Options{})
	require.NoError(t, err)
	defer b.Close()
	streams := []string{"x/one", "x/two"}
	var subs []<-chan struct{}
	for _, st := range streams {
		ch, cancel := b.Subscribe(st)
		defer cancel()
		subs = append(subs, ch)
	}
	require.Eventually(t, func() bool { return b.listenPID.Load() != 0 }, 10*time.Second, time.Millisecond)

	// A sender at work (this test plays it).
	a.notes.mu.Lock()
	a.notes.sending = true
	a.notes.mu.Unlock()
	done := make(chan error, len(streams))
	for _, st := range streams {
		go func() {
			done <- a.Update(ctx, func(tx store.Tx) error {
				_, err := tx.Append(st, 0, 0, store.NewEvent{Kind: "k"})
				return err
			})
		}()
	}
	require.Eventually(t, func() bool {
		a.notes.mu.Lock()
		defer a.notes.mu.Unlock()
		return len(a.notes.waiters) == len(streams)
	}, 10*time.Second, time.Millisecond, "both commits hand their wake-ups over")
	for _, st := range streams {
		h, err := b.Head(ctx, st, 0)
		require.NoError(t, err)
		require.Equal(t, int64(1), h, "%s committed before its wake-up was sent", st)
	}
	require.Empty(t, done, "an Update returned before its wake-up was sent")
	for i, ch := range subs {
		select {
		case <-ch:
			t.Fatalf("%s woken before its wake-up was sent", streams[i])
		default:
		}
	}

	conn, err := a.pool.Acquire(ctx)
	require.NoError(t, err)
	a.sendHandedOver(ctx, conn)
	conn.Release()
	for range streams {
		require.NoError(t, <-done)
	}
	for i, ch := range subs {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("the other node's subscriber of %s was not woken", streams[i])
		}
	}
	a.notes.mu.Lock()
	defer a.notes.mu.Unlock()
	require.False(t, a.notes.sending, "the sender stops once nothing is left")
	require.Empty(t, a.notes.pending)
}
