package kernel_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// readHook is a store that runs hook once, right after the first read of stream that finds
// nothing, before that read answers: a commit lands between a reader's read and whatever it
// does next.
type readHook struct {
	store.Store
	stream string
	once   sync.Once
	hook   func()
}

func (s *readHook) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	evs, err := s.Store.ReadForward(ctx, stream, gen, after, limit)
	if err == nil && len(evs) == 0 && stream == s.stream {
		s.once.Do(s.hook)
	}
	return evs, err
}

// A message delivered just after an execution read its empty inbox, before it waits, is taken:
// the execution watches its inbox from before its first read, so that commit wakes it (one that
// watched only from after the read would wait for ever, or for the next message).
func TestAMessageDeliveredAfterAnEmptyReadIsTaken(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var k *kernel.Kernel
	hooked := &readHook{Store: st, stream: kernel.InboxStream("c1")}
	sent := make(chan error, 1)
	hooked.hook = func() {
		_, err := k.Send(context.Background(), "c1", alice, "m1", json.RawMessage(`"hello"`))
		sent <- err
	}
	var calls atomic.Int64
	k, err = kernel.Open(context.Background(), hooked, kernel.Options{Flows: map[string]kernel.Flow{"echo": echo(&calls)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = k.Close() })

	_, err = k.Start(context.Background(), kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice, Input: json.RawMessage(`0`)})
	require.NoError(t, err)
	require.NoError(t, <-sent, "the message was delivered after the inbox was read empty")
	waitFor(t, "the message delivered after the empty read to be answered", func() bool { return calls.Load() == 1 })
}
