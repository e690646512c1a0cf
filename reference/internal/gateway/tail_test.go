package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/conversation/live"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/kernel"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/sqlite"
)

// servedKey marks the context of every request the rig's server serves.
type servedKey struct{}

// servedReads is a store that records every read made while serving a request (its context
// carries servedKey), and nothing the engine reads on its own.
type servedReads struct {
	store.Store
	mu    sync.Mutex
	reads []string
}

func (s *servedReads) note(ctx context.Context, op, key string) {
	if ctx.Value(servedKey{}) == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads = append(s.reads, op+" "+key)
}

func (s *servedReads) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reads
	s.reads = nil
	return r
}

func (s *servedReads) ReadForward(ctx context.Context, stream string, gen, after int64, limit int) ([]store.Event, error) {
	s.note(ctx, "ReadForward", stream)
	return s.Store.ReadForward(ctx, stream, gen, after, limit)
}

func (s *servedReads) ReadBackward(ctx context.Context, stream string, gen, before int64, limit int) ([]store.Event, error) {
	s.note(ctx, "ReadBackward", stream)
	return s.Store.ReadBackward(ctx, stream, gen, before, limit)
}

func (s *servedReads) Head(ctx context.Context, stream string, gen int64) (int64, error) {
	s.note(ctx, "Head", stream)
	return s.Store.Head(ctx, stream, gen)
}

func (s *servedReads) Meta(ctx context.Context, key string) ([]byte, bool, error) {
	s.note(ctx, "Meta", key)
	return s.Store.Meta(ctx, key)
}

func (s *servedReads) MetaPrefix(ctx context.Context, prefix string) ([]store.KV, error) {
	s.note(ctx, "MetaPrefix", prefix)
	return s.Store.MetaPrefix(ctx, prefix)
}

// tailRig is a gateway over a conversation layer whose store reads are recorded, with the
// hub's tails bounded as the test says and no poll of the log within a test's time.
type tailRig struct {
	t   *testing.T
	st  *servedReads
	cv  *conversation.Conversations
	hub *live.Hub
	srv *httptest.Server
	gw  *gateway.Gateway
	id  string
}

func newTailRig(t *testing.T, lim live.TailLimits) *tailRig {
	ctx := context.Background()
	raw, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "loom.db"), sqlite.Options{})
	require.NoError(t, err)
	st := &servedReads{Store: raw}
	hub := live.NewHub(0)
	hub.SetTailLimits(lim)
	dl, err := conversation.New(conversation.Config{Keys: [][]byte{bytes.Repeat([]byte{0x42}, 32)}}, conversation.Deps{}, hub)
	require.NoError(t, err)
	k, err := kernel.Open(ctx, st, kernel.Options{Flows: dl.Flows()})
	require.NoError(t, err)
	cv := dl.Client(k)
	gw, err := gateway.New(cv, gateway.Config{Poll: time.Hour, PostsPerMinute: 1 << 30,
		Authenticate: func(r *http.Request) (loomtype.Identity, error) {
			if r.Header.Get("Authorization") != "Bearer alice" {
				return loomtype.Identity{}, gateway.ErrUnauthenticated
			}
			return fuzzAlice, nil
		}})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(gw)
	srv.Config.BaseContext = func(net.Listener) context.Context { return context.WithValue(context.Background(), servedKey{}, true) }
	srv.Start()
	t.Cleanup(func() {
		gw.Shutdown()
		srv.Close()
		k.Close()
		raw.Close()
	})
	started, _, err := cv.Start(ctx, fuzzAlice, conversation.StartOptions{})
	require.NoError(t, err)
	return &tailRig{t: t, st: st, cv: cv, hub: hub, srv: srv, gw: gw, id: started.ID}
}

// tailEvent is one event of an event stream as it came.
type tailEvent struct{ name, id, data string }

// open opens the conversation's event stream after cursor (none: from the start) and returns
// its events as they come.
func (r *tailRig) open(cursor string) <-chan tailEvent {
	evs, _ := r.openCancel(cursor)
	return evs
}

// openCancel is open, with the function that closes the stream.
func (r *tailRig) openCancel(cursor string) (<-chan tailEvent, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	r.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/conversations/"+r.id+"/events", nil)
	require.NoError(r.t, err)
	req.Header.Set("Authorization", "Bearer alice")
	if cursor != "" {
		req.Header.Set("Last-Event-ID", cursor)
	}
	resp, err := r.srv.Client().Do(req)
	require.NoError(r.t, err)
	require.Equal(r.t, http.StatusOK, resp.StatusCode)
	out := make(chan tailEvent, 1024)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		var ev tailEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					out <- ev
				}
				ev = tailEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	ev := r.next(out)
	require.Equal(r.t, "status", ev.name)
	return out, cancel
}

func (r *tailRig) next(evs <-chan tailEvent) tailEvent {
	r.t.Helper()
	select {
	case ev, ok := <-evs:
		require.True(r.t, ok, "the stream ended")
		require.NotContains(r.t, []string{"reconnect", "error", "closed"}, ev.name, "%s: %s", ev.name, ev.data)
		return ev
	case <-time.After(10 * time.Second):
		r.t.Fatal("no event within 10 s")
	}
	panic("unreachable")
}

// turn sends turn n and returns the message events each stream in evs shows until its reply.
func (r *tailRig) turn(n int, evs ...<-chan tailEvent) [][]tailEvent {
	_, err := r.cv.SendTurn(context.Background(), fuzzAlice, r.id, fmt.Sprintf("question %d", n),
		conversation.SendOptions{MessageID: fmt.Sprintf("m%d", n)})
	require.NoError(r.t, err)
	out := make([][]tailEvent, len(evs))
	for i, ch := range evs {
		for {
			ev := r.next(ch)
			if ev.name != "message" {
				continue
			}
			out[i] = append(out[i], ev)
			var e loomtype.Entry
			require.NoError(r.t, json.Unmarshal([]byte(ev.data), &e))
			if e.Role == loomtype.RoleAssistant && e.Turn == int64(n) {
				break
			}
		}
	}
	return out
}

// history is the conversation's transcript as message events: the cursor and the entry's JSON.
func (r *tailRig) history() []tailEvent {
	page, err := r.cv.History(context.Background(), fuzzAlice, r.id, conversation.HistoryOptions{Limit: 500})
	require.NoError(r.t, err)
	var out []tailEvent
	for _, e := range page.Entries {
		b, err := json.Marshal(e)
		require.NoError(r.t, err)
		out = append(out, tailEvent{name: "message", id: e.Cursor, data: string(b)})
	}
	return out
}

// TestEventStreamIsFedFromTheTail: once an open stream has sent what the log held (the tail
// starts empty, so its first reads are the log's), each turn's records reach it from the
// conversation's tail with no read of the store at all while serving it, and what it sent is the
// transcript, cursor for cursor and byte for byte.
func TestEventStreamIsFedFromTheTail(t *testing.T) {
	r := newTailRig(t, live.TailLimits{})
	evs := r.open("")
	got := r.turn(1, evs)[0] // by its end the stream has read the status and what the log held
	r.st.take()
	for n := 2; n <= 5; n++ {
		got = append(got, r.turn(n, evs)[0]...)
	}
	require.Empty(t, r.st.take(), "the stream read the store while its cursor was within the tail")
	require.Equal(t, r.history(), got)
	fig, ok := r.hub.Tail(r.id)
	require.True(t, ok)
	require.Equal(t, 1, fig.Followers)
}

// TestEventStreamBehindTheTailReadsTheLog: a stream that resumes from a cursor before the tail's
// start (the tail began with the first stream, after the first turns) reads the log and sends
// exactly what the history holds after that cursor; from the head on, it too is fed from the
// tail, and both streams send the same.
func TestEventStreamBehindTheTailReadsTheLog(t *testing.T) {
	r := newTailRig(t, live.TailLimits{})
	for n := 1; n <= 3; n++ {
		r.turn(n)
		require.Eventually(t, func() bool { h := r.history(); return len(h) == 2*n }, 10*time.Second, 10*time.Millisecond)
	}
	first := r.open("")
	r.turn(4, first)
	before := r.history()
	fig, ok := r.hub.Tail(r.id)
	require.True(t, ok)
	start, err := loomtype.ParseCursor(before[0].id)
	require.NoError(t, err)
	require.Greater(t, fig.First.Seq, start.Seq, "the first message lies before the tail's start")
	r.st.take()

	resumed := r.open(before[0].id)
	var replay []tailEvent
	for len(replay) < len(before)-1 {
		if ev := r.next(resumed); ev.name == "message" {
			replay = append(replay, ev)
		}
	}
	require.Contains(t, r.st.take(), "ReadForward x/"+r.id, "a cursor before the tail's start was served without the log")
	require.Equal(t, before[1:], replay, "the resumed stream sent what the history holds after its cursor")

	both := r.turn(5, first, resumed)
	require.Equal(t, both[0], both[1])
	require.Empty(t, r.st.take(), "at the head, the resumed stream is fed from the tail too")
	require.Equal(t, r.history(), append(before, both[0]...))
}

// TestMemoryFollowsTheStreams: the gateway's figures count the open streams, their live queues'
// bound and the conversation's one tail, which two streams of it share, and let go of the tail
// with the last of them.
func TestMemoryFollowsTheStreams(t *testing.T) {
	r := newTailRig(t, live.TailLimits{})
	require.Equal(t, gateway.Memory{MaxQueueBytes: gateway.DefaultMaxPendingBytes}, r.gw.Memory())
	a, closeA := r.openCancel("")
	b, closeB := r.openCancel("")
	r.turn(1, a, b)
	m := r.gw.Memory()
	require.Equal(t, 2, m.Streams)
	require.Equal(t, 1, m.Live.Tails, "the conversation's streams share one tail")
	require.Equal(t, 2, m.Live.Followers)
	require.Equal(t, 2, m.Live.Subscribers)
	require.Positive(t, m.Live.TailRecords)
	require.Positive(t, m.Live.TailBytes)
	require.LessOrEqual(t, m.Live.TailBytes, live.DefaultTailBytes)
	closeA()
	closeB()
	require.Eventually(t, func() bool { m = r.gw.Memory(); return m.Streams == 0 && m.Live.Tails == 0 },
		5*time.Second, 10*time.Millisecond, "%+v", m)
	require.Zero(t, m.Live.TailBytes)
	require.Zero(t, m.Live.Subscribers)
}

// flushCounter counts the flushes of the response it wraps.
type flushCounter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (f flushCounter) Flush() {
	f.n.Add(1)
	f.ResponseWriter.(http.Flusher).Flush()
}

func (f flushCounter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// TestADeliveryIsFlushedOnce: the records one delivery reads go out together, in one flush
// after the last of them: a stream opened on a conversation that holds three turns sends the
// status (one flush) and then its six records (one more), not a flush per record. A turn sent
// after that still reaches it whole.
func TestADeliveryIsFlushedOnce(t *testing.T) {
	r := newTailRig(t, live.TailLimits{})
	for n := 1; n <= 3; n++ {
		r.turn(n)
		require.Eventually(t, func() bool { return len(r.history()) == 2*n }, 10*time.Second, 10*time.Millisecond)
	}
	var flushes atomic.Int64
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.gw.ServeHTTP(flushCounter{ResponseWriter: w, n: &flushes}, req)
	}))
	t.Cleanup(counted.Close) // after the stream is cancelled (cleanups run last first)
	r.srv = counted
	evs := r.open("")
	var got []tailEvent
	for len(got) < 6 {
		got = append(got, r.next(evs))
	}
	require.Equal(t, r.history(), got)
	require.EqualValues(t, 2, flushes.Load(), "the status, then the six records at once")
	got = r.turn(4, evs)[0]
	require.Equal(t, r.history()[6:], got)
}
