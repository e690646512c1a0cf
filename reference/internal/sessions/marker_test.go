package sessions_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/scriptmodel"
	"github.com/loomcheck/loomcheck/reference/internal/sessions"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// readerMarkers is what one reader of who is sent of its read markers, the way the gateway
// sends them: the marker the subscription started with (after the replay), then the live ones
// queued for who, each through the reader's gate.
func readerMarkers(sub *sessions.Sub, who loomtype.Identity) []int64 {
	var gate sessions.MarkerGate
	var got []int64
	take := func(f stream.Frame) {
		if f.Kind() != stream.KindReadMarker || !gate.Pass(f) {
			return
		}
		var d struct{ Upto int64 }
		_ = json.Unmarshal(f.Data, &d)
		got = append(got, d.Upto)
	}
	if f, ok := sub.ReadMarker(); ok {
		take(f)
	}
	for {
		select {
		case it := <-sub.Frames():
			if it.For(who) {
				take(it.Frame)
			}
		default:
			return got
		}
	}
}

// TestReadMarkersReachAReaderInOrder: a reader subscribed before marks are made, whose stored
// marker is looked at only after them, is sent each move once, in order (2, 3), never the
// newer stored marker before the older live one (3, 2, 3).
func TestReadMarkersReachAReaderInOrder(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	for _, line := range []string{"make test", "make lint", "make vet"} {
		_, _, err := ss.Command(ctx, alice, st.ID, line, false)
		require.NoError(t, err)
	}
	sub, _, _, _, _, err := ss.SubscribeAs(ctx, alice, st.ID, 0)
	require.NoError(t, err)
	defer sub.Close()
	for _, n := range []int64{2, 1, 3} {
		_, err := ss.MarkRead(ctx, alice, st.ID, n)
		require.NoError(t, err)
	}
	require.Equal(t, []int64{2, 3}, readerMarkers(sub, alice))
}

// TestConcurrentReadMarksReachEveryReaderInOrder: marks made at once by many callers, with
// readers subscribing meanwhile, reach each reader as a rising sequence that ends at the
// highest mark.
func TestConcurrentReadMarksReachEveryReaderInOrder(t *testing.T) {
	alice := loomtype.Identity{Tenant: "t", Actor: "alice"}
	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
	ctx := context.Background()
	ss := eng.Sessions()
	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
	require.NoError(t, err)
	const n = 12
	for range n {
		_, _, err := ss.Command(ctx, alice, st.ID, "make", false)
		require.NoError(t, err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		subs []*sessions.Sub
	)
	for i := range int64(n) {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := ss.MarkRead(ctx, alice, st.ID, n-i)
			require.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			sub, _, _, _, _, err := ss.SubscribeAs(ctx, alice, st.ID, 0)
			require.NoError(t, err)
			mu.Lock()
			subs = append(subs, sub)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, sub := range subs {
		got := readerMarkers(sub, alice)
		sub.Close()
		require.NotEmpty(t, got)
		require.IsIncreasing(t, got)
		require.EqualValues(t, n, got[len(got)-1])
	}
}
