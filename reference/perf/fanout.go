package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// fanoutViewers is how many people watch the fan-out figure's session: the owner and 99
// participants, the most a shared conversation holds (record.DefaultMaxParticipants).
const fanoutViewers = 100

// sighting is one frame one viewer read: which viewer, the frame's cursor, when, and its bytes.
type sighting struct {
	viewer int
	cur    int64
	at     time.Time
	raw    []byte
}

// watchWS reads every message of viewer's connection c into out until c fails.
func watchWS(ctx context.Context, viewer int, c *websocket.Conn, out chan<- sighting) {
	for {
		_, b, err := c.Read(ctx)
		at := time.Now()
		if err != nil {
			return
		}
		var f struct {
			Cur int64 `json:"cur"`
		}
		_ = json.Unmarshal(b, &f)
		select {
		case out <- sighting{viewer: viewer, cur: f.Cur, at: at, raw: b}:
		case <-ctx.Done():
			return
		}
	}
}

// awaitAll reads got until every one of viewers saw the frame at cur (a viewer's older frames
// and heartbeats are passed over) and returns each viewer's sighting of it.
func awaitAll(got <-chan sighting, cur int64, viewers int) ([]sighting, error) {
	out := make([]sighting, viewers)
	seen := 0
	timeout := time.After(stallGuard)
	for seen < viewers {
		select {
		case s := <-got:
			switch {
			case s.cur == cur && out[s.viewer].raw == nil:
				out[s.viewer] = s
				seen++
			case s.cur > cur:
				return nil, fmt.Errorf("viewer %d: frame %d arrived before frame %d", s.viewer, s.cur, cur)
			}
		case <-timeout:
			return nil, fmt.Errorf("frame %d reached %d of %d viewers within %v", cur, seen, viewers, stallGuard)
		}
	}
	return out, nil
}

// cpuTime is the CPU time this process has used so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fanoutRun is one run's samples: each frame's time to each viewer, and the CPU time per frame
// per viewer.
type fanoutRun struct {
	lat []time.Duration
	cpu time.Duration
}

// broadcaster is the fan-out's baseline: a bare WebSocket server that writes each payload it is
// handed to every connection, each from the connection's own goroutine.
type broadcaster struct {
	mu    sync.Mutex
	conns map[chan []byte]struct{}
}

func (b *broadcaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	in := make(chan []byte, 64)
	b.mu.Lock()
	b.conns[in] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.conns, in)
		b.mu.Unlock()
	}()
	for {
		select {
		case p := <-in:
			if c.Write(r.Context(), websocket.MessageText, p) != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// send hands p to every connection.
func (b *broadcaster) send(p []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for in := range b.conns {
		in <- p
	}
}

// fanout: one session watched by fanoutViewers people of a shared conversation, each on a
// WebSocket of their own, every frame drawn for its viewer (ADR 0052: forViewer before send);
// the time from a frame's append to each viewer's receipt, and the process's CPU time per frame
// per viewer, beside a bare broadcaster writing the same bytes to as many connections read by
// the same client.
func fanout(e *env) ([]Row, error) {
	n := e.size(500, 10)
	viewers := e.size(fanoutViewers, 8)
	t, eng, err := e.openEngine(filepath.Join(e.dir, "data"), "", nil, func(o *reference.Options) {
		o.Stream.MaxSubscribers = max(o.Stream.MaxSubscribers, viewers)
		o.Conversation.Shared.Service = &loomtype.Identity{Tenant: "perf", Actor: "coordinator"} // shared mode on
	})
	if err != nil {
		return nil, err
	}
	defer t.close()
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	id, err := sharedSession(ctx, t, viewers)
	if err != nil {
		return nil, err
	}
	got := make(chan sighting, 4*viewers)
	for v := range viewers {
		c, err := dialSession(ctx, t, v, id, -1)
		if err != nil {
			return nil, fmt.Errorf("viewer %d: %w", v, err)
		}
		defer c.CloseNow()
		go watchWS(ctx, v, c, got)
	}

	bb := &broadcaster{conns: map[chan []byte]struct{}{}}
	bt, err := serveHandler(bb)
	if err != nil {
		return nil, err
	}
	defer bt.close()
	bgot := make(chan sighting, 4*viewers)
	for v := range viewers {
		c, _, err := websocket.Dial(ctx, "ws"+bt.base[len("http"):]+"/", &websocket.DialOptions{HTTPClient: bt.hc})
		if err != nil {
			return nil, err
		}
		c.SetReadLimit(1 << 20)
		defer c.CloseNow()
		go watchWS(ctx, v, c, bgot)
	}
	if err := awaitConns(ctx, bb, viewers); err != nil {
		return nil, err
	}

	note := fmt.Sprintf("%d viewers (the owner and %d participants of a shared conversation, a WebSocket each; the session's subscriber bound raised to %d); %d status frames per run, one at a time, each awaited by every viewer; from just before Sessions().Append to each viewer's read; the baseline writes the bytes viewer 0 received to as many connections, read by the same client",
		viewers, viewers-1, viewers, n)
	cpuNote := "the process's CPU time (getrusage, user and system, client side included for both) over the run, over frames x viewers"
	p50 := Row{Measure: fmt.Sprintf("session frame to each of %d viewers, p50", viewers), Unit: "ms", BaselineName: "bare broadcaster", Note: note}
	p99 := Row{Measure: fmt.Sprintf("session frame to each of %d viewers, p99", viewers), Unit: "ms", BaselineName: "bare broadcaster",
		Goal: Goal{Text: "<= 2x", Of: "ratio", AtMost: true, Bound: 2}}
	cpu := Row{Measure: "CPU time per frame per viewer", Unit: "µs", BaselineName: "bare broadcaster", Note: cpuNote,
		Goal: Goal{Text: "<= 1.2x", Of: "ratio", AtMost: true, Bound: 1.2}}
	for r := range e.rounds() {
		m, payloads, err := engineFanout(ctx, eng, id, got, n, viewers)
		if err != nil {
			return nil, err
		}
		b, err := bareFanout(bb, bgot, payloads, viewers)
		if err != nil {
			return nil, err
		}
		p50.Measured, p50.Baseline = append(p50.Measured, ms(Percentile(m.lat, 0.5))), append(p50.Baseline, ms(Percentile(b.lat, 0.5)))
		p99.Measured, p99.Baseline = append(p99.Measured, ms(Percentile(m.lat, 0.99))), append(p99.Baseline, ms(Percentile(b.lat, 0.99)))
		cpu.Measured, cpu.Baseline = append(cpu.Measured, us(m.cpu)), append(cpu.Baseline, us(b.cpu))
		e.logf("round %d: bare p50 %v p99 %v cpu %v, engine p50 %v p99 %v cpu %v", r+1,
			Percentile(b.lat, 0.5), Percentile(b.lat, 0.99), b.cpu, Percentile(m.lat, 0.5), Percentile(m.lat, 0.99), m.cpu)
	}
	return []Row{p50, p99, cpu}, nil
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// sharedSession starts a shared conversation of user 0 with users 1 to viewers-1 as its
// participants, and returns its id.
func sharedSession(ctx context.Context, t *target, viewers int) (string, error) {
	code, b, _, err := t.do(ctx, 0, http.MethodPost, "/conversations", `{"mode":"shared"}`)
	if err != nil {
		return "", err
	}
	var st struct {
		ID string `json:"id"`
	}
	if code != http.StatusCreated || json.Unmarshal(b, &st) != nil || st.ID == "" {
		return "", fmt.Errorf("POST /conversations: status %d: %s", code, b)
	}
	for v := 1; v < viewers; v++ {
		body, _ := json.Marshal(map[string]any{"op": "add", "identity": loomtype.Identity{Tenant: "perf", Actor: fmt.Sprintf("user-%d", v)}})
		code, b, _, err := t.do(ctx, 0, http.MethodPost, "/conversations/"+st.ID+"/participants", string(body))
		if err != nil {
			return "", err
		}
		if code != http.StatusOK {
			return "", fmt.Errorf("add participant %d: status %d: %s", v, code, b)
		}
	}
	return st.ID, nil
}

// awaitConns waits until the broadcaster holds n connections.
func awaitConns(ctx context.Context, bb *broadcaster, n int) error {
	deadline := time.Now().Add(stallGuard)
	for {
		bb.mu.Lock()
		k := len(bb.conns)
		bb.mu.Unlock()
		if k >= n {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the bare broadcaster holds %d of %d connections", k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// engineFanout appends n status frames to session id one at a time, each awaited by every
// viewer, and returns the run's samples and the bytes viewer 0 received of each frame.
func engineFanout(ctx context.Context, eng *reference.Engine, id string, got <-chan sighting, n, viewers int) (fanoutRun, [][]byte, error) {
	run := fanoutRun{lat: make([]time.Duration, 0, n*viewers)}
	payloads := make([][]byte, 0, n)
	cpu0 := cpuTime()
	for i := range n {
		spec := stream.Spec{Kind: stream.KindStatus, Data: map[string]any{"state": "working", "n": i}}
		t0 := time.Now()
		fs, err := eng.Sessions().Append(ctx, streamWho, id, spec)
		if err != nil {
			return run, nil, err
		}
		seen, err := awaitAll(got, fs[0].Cur, viewers)
		if err != nil {
			return run, nil, err
		}
		for _, s := range seen {
			run.lat = append(run.lat, s.at.Sub(t0))
		}
		payloads = append(payloads, seen[0].raw)
	}
	run.cpu = (cpuTime() - cpu0) / time.Duration(n*viewers)
	return run, payloads, nil
}

// bareFanout hands each payload to the broadcaster and returns the run's samples.
func bareFanout(bb *broadcaster, got <-chan sighting, payloads [][]byte, viewers int) (fanoutRun, error) {
	run := fanoutRun{lat: make([]time.Duration, 0, len(payloads)*viewers)}
	cpu0 := cpuTime()
	for _, p := range payloads {
		t0 := time.Now()
		bb.send(p)
		for range viewers {
			s, ok := <-got
			if !ok || string(s.raw) != string(p) {
				return run, errors.New("the bare broadcaster lost a payload")
			}
			run.lat = append(run.lat, s.at.Sub(t0))
		}
	}
	run.cpu = (cpuTime() - cpu0) / time.Duration(len(payloads)*viewers)
	return run, nil
}
