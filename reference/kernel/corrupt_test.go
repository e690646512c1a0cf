package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// damagedLog is a store whose reads of one execution's log find damage.
type damagedLog struct {
	store.Store
	stream string
}

func (d damagedLog) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	if stream == d.stream {
		return nil, &store.CorruptError{Path: "test", Table: "events", Stream: stream, Gen: gen, Seq: after + 1, Reason: "checksum does not match"}
	}
	return d.Store.ReadForward(ctx, stream, gen, after, limit)
}

// An execution whose log reads as damaged at recovery is refused: it does not run, nothing is
// recorded for it (it is not failed, its inbox takes nothing), every call on it answers the
// damage, and it is reported once. The other execution recovers.
func TestADamagedExecutionIsRefusedNotFailed(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	for _, id := range []string{"bad", "good"} {
		_, err := r.k.Start(context.Background(), kernel.StartRequest{ID: id, Flow: "echo", Principal: alice})
		require.NoError(t, err)
		require.True(t, send(t, r.k, id, "m1", "hello"))
	}
	waitFor(t, "both replies", func() bool { return calls.Load() == 2 })
	// A decision is committed with the execution's next wait: the crash comes once both are on
	// disk, so that recovery makes none of them again.
	waitFor(t, "both replies recorded", func() bool {
		for _, id := range []string{"bad", "good"} {
			tr := r.transcript(id, 0)
			if len(tr) == 0 || tr[len(tr)-1] != `decision o1:reply = "re: hello"` {
				return false
			}
		}
		return true
	})
	r.crash()
	st, err := sqlite.Open(context.Background(), r.path, sqlite.Options{})
	require.NoError(t, err)
	defer st.Close()
	var mu sync.Mutex
	reported := map[string]int{}
	k, err := kernel.Open(context.Background(), damagedLog{Store: st, stream: kernel.LogStream("bad")}, kernel.Options{
		Flows: map[string]kernel.Flow{"echo": echo(&calls)},
		OnCorrupt: func(id string, err error) {
			require.ErrorIs(t, err, loomtype.ErrCorrupt)
			mu.Lock()
			reported[id]++
			mu.Unlock()
		}})
	require.NoError(t, err)
	defer k.Close()
	waitFor(t, "the refusal", func() bool {
		_, err := k.Info(context.Background(), "bad")
		return errors.Is(err, loomtype.ErrCorrupt)
	})
	b, _ := json.Marshal("again")
	_, err = k.Send(context.Background(), "bad", alice, "m2", b)
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
	_, err = k.Await(context.Background(), "bad")
	require.ErrorIs(t, err, loomtype.ErrCorrupt)
	inbox, err := st.Head(context.Background(), kernel.InboxStream("bad"), 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), inbox, "the refused execution's inbox took nothing")
	v, ok, err := st.Meta(context.Background(), "exec/bad")
	require.NoError(t, err)
	require.True(t, ok)
	var in kernel.Info
	require.NoError(t, json.Unmarshal(v, &in))
	require.Equal(t, kernel.StateOpen, in.State, "a refusal is not a failure: nothing is recorded")
	mu.Lock()
	require.Equal(t, map[string]int{"bad": 1}, reported)
	mu.Unlock()
	require.True(t, send(t, k, "good", "m2", "more"))
	waitFor(t, "the good one answers", func() bool { return calls.Load() >= 3 })
	require.EqualValues(t, 3, calls.Load(), "the good one answered m2 once, and made no decision of m1 again")
}
