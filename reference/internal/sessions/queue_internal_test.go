package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// logReads is a store that records the range reads of conversation logs ("x/..."), whoever
// makes them: every read of a conversation's records makes one (a head alone is read by the
// dialogue for its own purposes, and is not counted).
type logReads struct {
	store.Store
	mu    sync.Mutex
	reads []string
}

func (s *logReads) note(op, stream string) {
	if !strings.HasPrefix(stream, "x/") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads = append(s.reads, op+" "+stream)
}

func (s *logReads) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reads
	s.reads = nil
	return r
}

func (s *logReads) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	s.note("ReadForward", stream)
	return s.Store.ReadForward(ctx, stream, gen, after, limit)
}

func (s *logReads) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	s.note("ReadBackward", stream)
	return s.Store.ReadBackward(ctx, stream, gen, before, limit)
}

var qAlice = loomtype.Identity{Tenant: "acme", Actor: "alice"}

// queueRig is a session service over a conversation whose log reads are recorded, on a fixed
// clock (so that frames of one shape have one size), with no poll of the log within a test.
type queueRig struct {
	t   *testing.T
	st  *logReads
	cv  *conversation.Conversations
	hub *live.Hub
	svc *Service
	id  string
}

func newQueueRig(t *testing.T, cfg Config) *queueRig {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	st := &logReads{Store: raw}
	hub := live.NewHub(0)
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{[]byte(strings.Repeat("k", 32))}}, conversation.Deps{}, hub)
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	cv := dl.Client(k)
	cfg.Poll = time.Hour
	cfg.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	svc := New(k, cv, cfg)
	t.Cleanup(func() {
		svc.Close()
		k.Close()
		raw.Close()
	})
	started, _, err := cv.Start(ctx, qAlice, conversation.StartOptions{})
	require.NoError(t, err)
	_, err = svc.Open(ctx, qAlice, started.ID, 0, "")
	require.NoError(t, err)
	return &queueRig{t: t, st: st, cv: cv, hub: hub, svc: svc, id: started.ID}
}

// status logs one status frame in the session (every one of the same size).
func (r *queueRig) status() stream.Frame {
	fs, err := r.svc.Append(context.Background(), qAlice, r.id, stream.Spec{Kind: stream.KindStatus, Data: map[string]string{"state": "x"}})
	require.NoError(r.t, err)
	require.Len(r.t, fs, 1)
	return fs[0]
}

func (r *queueRig) subscribe(from int64) (*Sub, []stream.Frame) {
	sub, replay, reset, _, _, err := r.svc.Subscribe(context.Background(), r.id, from)
	require.NoError(r.t, err)
	require.False(r.t, reset)
	r.t.Cleanup(sub.Close)
	return sub, replay
}

func cutOff(s *Sub) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

// drain takes what the queue holds and returns the frames.
func drain(s *Sub) []stream.Frame {
	var out []stream.Frame
	for {
		select {
		case it := <-s.Frames():
			out = append(out, it.Frame)
		default:
			return out
		}
	}
}

func encode(t *testing.T, fs []stream.Frame) string {
	b, err := json.Marshal(fs)
	require.NoError(t, err)
	return string(b)
}

// TestSubscriberQueueFrameBound: a reader that lets N frames (SubQueue) wait is not cut off; the
// frame N+1 cuts it off without being queued, and the reader, resuming from the cursor of the
// last frame it got, is replayed exactly the rest: nothing lost, nothing twice.
func TestSubscriberQueueFrameBound(t *testing.T) {
	const n = 4
	r := newQueueRig(t, Config{SubQueue: n})
	head, _, err := r.svc.Bounds(context.Background(), qAlice, r.id)
	require.NoError(t, err)
	sub, _ := r.subscribe(head)
	var logged []stream.Frame
	for range n {
		logged = append(logged, r.status())
	}
	require.False(t, cutOff(sub), "a queue of N frames cut its reader off")
	m := r.svc.Memory()
	require.Equal(t, 1, m.Subscribers)
	require.Equal(t, n, m.QueuedFrames)
	logged = append(logged, r.status())
	require.True(t, cutOff(sub), "the frame N+1 did not cut the reader off")
	got := drain(sub)
	require.Equal(t, encode(t, logged[:n]), encode(t, got), "the reader gets what its queue held")

	_, replay := r.subscribe(got[len(got)-1].Cur)
	require.Equal(t, encode(t, logged[n:]), encode(t, replay), "resumed from its cursor, it gets the rest")
}

// TestSubscriberQueueByteBound: a queue holding exactly SubQueueBytes is not cut off; one frame
// more cuts it off; an empty queue takes a frame of any size.
func TestSubscriberQueueByteBound(t *testing.T) {
	r := newQueueRig(t, Config{})
	head, _, err := r.svc.Bounds(context.Background(), qAlice, r.id)
	require.NoError(t, err)
	probe, _ := r.subscribe(head)
	r.status()
	one := r.svc.Memory().QueuedBytes
	require.Positive(t, one)
	drain(probe)
	require.Zero(t, r.svc.Memory().QueuedBytes, "a drained queue counts nothing once the next push settles it")
	probe.Close()

	sub, _ := r.subscribe(head + 1)
	sub.maxBytes = 3 * one
	for range 3 {
		r.status()
	}
	require.False(t, cutOff(sub), "a queue of exactly its bytes cut its reader off")
	m := r.svc.Memory()
	require.Equal(t, 3*one, m.QueuedBytes)
	require.Equal(t, 3*one, m.MaxQueuedBytes)
	r.status()
	require.True(t, cutOff(sub), "one frame past its bytes did not cut the reader off")
	require.Len(t, drain(sub), 3)

	big, _ := r.subscribe(head + 5)
	big.maxBytes = 1
	r.status()
	require.False(t, cutOff(big), "an empty queue refused a frame bigger than its bound")
	r.status()
	require.True(t, cutOff(big))
}

// TestPumpProjectsCommitsFromTheTail: once a session is resident and its pump has read up to the
// head (the tail starts empty, so the first reads are the log's), each turn's records reach the
// pump from the conversation's tail, with no read of the conversation's log, and the frames it
// logs are what a service loading the session afresh from the store holds.
func TestPumpProjectsCommitsFromTheTail(t *testing.T) {
	r := newQueueRig(t, Config{})
	ctx := context.Background()
	head, _, err := r.svc.Bounds(ctx, qAlice, r.id)
	require.NoError(t, err)
	sub, _ := r.subscribe(head)
	var got []stream.Frame
	turn := func(n int) {
		_, err := r.cv.SendTurn(ctx, qAlice, r.id, fmt.Sprintf("question %d", n), conversation.SendOptions{MessageID: fmt.Sprintf("m%d", n)})
		require.NoError(t, err)
		for done := false; !done; {
			select {
			case it := <-sub.Frames():
				got = append(got, it.Frame)
				done = it.Frame.Kind() == stream.KindTextDone && it.Frame.Turn == int64(n)
			case <-time.After(10 * time.Second):
				t.Fatalf("turn %d: no text-done within 10 s", n)
			}
		}
	}
	turn(1) // by its end the pump has read what the log held before the tail began
	r.st.take()
	for n := 2; n <= 4; n++ {
		turn(n)
	}
	require.Empty(t, r.st.take(), "the pump read the conversation's log while its position was within the tail")
	fig, ok := r.hub.Tail(r.id)
	require.True(t, ok)
	require.Equal(t, 1, fig.Followers, "the resident session follows the conversation")

	// What was logged is what the store holds.
	loaded, err := r.svc.load(ctx, r.id)
	require.NoError(t, err)
	replay, _ := loaded.log.Replay(head)
	require.Equal(t, encode(t, stream.Merge(got)), encode(t, replay))
}
