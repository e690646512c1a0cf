package kernel_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// A consumed event stores only the inbox position it took; the log a caller reads gives it the
// message itself, as received, and a replay after a crash takes the same message again.
func TestConsumedEventStoresThePositionAndReadsAsTheMessage(t *testing.T) {
	var calls atomic.Int64
	r := newRig(t, map[string]kernel.Flow{"echo": echo(&calls)})
	ctx := context.Background()
	_, err := r.k.Start(ctx, kernel.StartRequest{ID: "c1", Flow: "echo", Principal: alice})
	require.NoError(t, err)
	require.True(t, send(t, r.k, "c1", "m1", "hello"))
	require.True(t, send(t, r.k, "c1", "m2", "again"))
	waitFor(t, "both replies recorded", func() bool {
		tr := r.transcript("c1", 0)
		return len(tr) > 0 && tr[len(tr)-1] == `decision o2:reply = "re: again"`
	})
	stored, err := r.st.ReadForward(ctx, kernel.LogStream("c1"), 0, 0, 0)
	require.NoError(t, err)
	var consumed []string
	for _, ev := range stored {
		if ev.Kind == "consumed" {
			consumed = append(consumed, string(ev.Data))
		}
	}
	require.Equal(t, []string{`{"seq":1}`, `{"seq":2}`}, consumed, "the log stores positions, not copies")

	evs, _, done, err := r.k.LogPage(ctx, "c1", loomtype.Cursor{}, 100)
	require.NoError(t, err)
	require.True(t, done)
	var read []kernel.Message
	for _, e := range evs {
		if e.Kind == "consumed" {
			var m kernel.Message
			require.NoError(t, json.Unmarshal(e.Data, &m))
			read = append(read, m)
		}
	}
	require.Len(t, read, 2)
	for i, want := range []struct{ id, payload string }{{"m1", `"hello"`}, {"m2", `"again"`}} {
		require.Equal(t, int64(i+1), read[i].Seq)
		require.Equal(t, want.id, read[i].MessageID)
		require.Equal(t, alice, read[i].Sender)
		require.Equal(t, kernel.SenderKey(alice, want.id), read[i].Key)
		require.JSONEq(t, want.payload, string(read[i].Payload))
		require.Positive(t, read[i].Time)
	}

	// The replay after a crash serves both messages from the inbox and replies to nothing again.
	r.crash()
	r.open()
	require.True(t, send(t, r.k, "c1", "m3", "third"))
	waitFor(t, "the third reply recorded", func() bool {
		tr := r.transcript("c1", 0)
		return len(tr) > 0 && tr[len(tr)-1] == `decision o3:reply = "re: third"`
	})
	require.Equal(t, int64(3), calls.Load(), "each message answered once")
}
