package perf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
)

// The session stream's figures (ADR 0052, "Numbers"): a frame's emit to a WebSocket client,
// idle and beside a job that writes and syncs the disk without pause, and a kill of the engine to
// the first frame a resuming client receives. Each beside a bare WebSocket server doing the same
// network work in the same round.

// streamUser is the user (token index) who owns the figures' conversations.
const streamUser = 0

// streamWho is the principal of streamUser (engineConfig).
var streamWho = loomtype.Identity{Tenant: "perf", Actor: "user-0"}

// arrival is one WebSocket message a client read, with its cursor and the instant it was read.
type arrival struct {
	at  time.Time
	cur int64
	raw []byte
}

// readWS reads every message of c into out until c fails, then closes out.
func readWS(ctx context.Context, c *websocket.Conn, out chan<- arrival) {
	defer close(out)
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
		case out <- arrival{at: at, cur: f.Cur, raw: b}:
		case <-ctx.Done():
			return
		}
	}
}

// dialSession opens session id's stream on t over WebSocket after cursor from (-1: after its
// head), as user.
func dialSession(ctx context.Context, t *target, user int, id string, from int64) (*websocket.Conn, error) {
	code, b, _, err := t.do(ctx, user, http.MethodPost, "/sessions/"+id+"/stream/open", "{}")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK && code != http.StatusCreated {
		return nil, fmt.Errorf("stream open: status %d: %s", code, b)
	}
	var op struct {
		Ticket string `json:"ticket"`
		Head   int64  `json:"head"`
	}
	if err := json.Unmarshal(b, &op); err != nil {
		return nil, fmt.Errorf("stream open: %q: %w", b, err)
	}
	if from < 0 {
		from = op.Head
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token(user))
	url := "ws" + t.base[len("http"):] + "/sessions/" + id + "/stream?ticket=" + op.Ticket + "&from=" + strconv.FormatInt(from, 10)
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h, HTTPClient: t.hc})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	return c, nil
}

// bareWS is a bare WebSocket server: each connection is sent what send hands over, and first
// the greeting when one is set.
type bareWS struct {
	send     chan []byte
	mu       sync.Mutex
	greeting []byte
	conns    map[*websocket.Conn]struct{}
}

func (b *bareWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	b.mu.Lock()
	g := b.greeting
	if b.conns == nil {
		b.conns = map[*websocket.Conn]struct{}{}
	}
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()
	if g != nil && c.Write(r.Context(), websocket.MessageText, g) != nil {
		return
	}
	for {
		select {
		case p := <-b.send:
			if c.Write(r.Context(), websocket.MessageText, p) != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

// syncJob writes and syncs a file in dir without pause until it is stopped: a neighbour that
// keeps the disk's queue full, as `dd conv=fsync` in a loop does.
func syncJob(dir string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1<<20)
		path := filepath.Join(dir, "sync-job")
		defer os.Remove(path)
		for {
			f, err := os.Create(path)
			if err != nil {
				return
			}
			for range 16 {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			_ = f.Sync()
			f.Close()
			select {
			case <-quit:
				return
			default:
			}
		}
	}()
	return func() { close(quit); <-done }
}

// streamEmit: the time from a frame's append (Sessions().Append, the engine's own logging
// path) to its receipt by a WebSocket client on loopback, one frame at a time, beside a bare
// WebSocket server sending the same bytes; idle, and beside a job syncing the disk.
func streamEmit(e *env) ([]Row, error) {
	n := e.size(500, 20)
	t, eng, err := e.openEngine(filepath.Join(e.dir, "data"), "", nil)
	if err != nil {
		return nil, err
	}
	defer t.close()
	c, err := t.newConv(e.ctx, streamUser)
	if err != nil {
		return nil, err
	}
	ws, err := dialSession(e.ctx, t, streamUser, c.id, -1)
	if err != nil {
		return nil, err
	}
	defer ws.CloseNow()
	got := make(chan arrival, 16)
	go readWS(e.ctx, ws, got)

	bw := &bareWS{send: make(chan []byte)}
	bt, err := serveHandler(bw)
	if err != nil {
		return nil, err
	}
	defer bt.close()
	bc, _, err := websocket.Dial(e.ctx, "ws"+bt.base[len("http"):]+"/", &websocket.DialOptions{HTTPClient: bt.hc})
	if err != nil {
		return nil, err
	}
	defer bc.CloseNow()
	bgot := make(chan arrival, 16)
	go readWS(e.ctx, bc, bgot)

	note := fmt.Sprintf("%d status frames per run, one at a time; from just before Sessions().Append to the client's read; the baseline sends the same bytes; the busy rows run beside a loop writing 16 MiB and syncing it", n)
	rows := make([]Row, 0, 4)
	for _, busy := range []bool{false, true} {
		where := "idle"
		if busy {
			where = "beside a disk-syncing job"
		}
		rows = append(rows,
			Row{Measure: "session frame emit to WebSocket client, p50, " + where, Unit: "ms", BaselineName: "bare WebSocket", Note: note},
			Row{Measure: "session frame emit to WebSocket client, p99, " + where, Unit: "ms", BaselineName: "bare WebSocket",
				Goal: Goal{Text: "<= 1.85 ms (ADR 0052)", Of: "measured", AtMost: true, Bound: 1.85}})
	}
	for r := range e.rounds() {
		for i, busy := range []bool{false, true} {
			var stop func()
			if busy {
				stop = syncJob(e.dir)
			}
			m, payloads, err := engineEmit(e.ctx, eng, c.id, got, n)
			var b []time.Duration
			if err == nil {
				b, err = bareEmit(bw, bgot, payloads)
			}
			if stop != nil {
				stop()
			}
			if err != nil {
				return nil, err
			}
			p50, p99 := &rows[2*i], &rows[2*i+1]
			p50.Baseline, p50.Measured = append(p50.Baseline, ms(Percentile(b, 0.5))), append(p50.Measured, ms(Percentile(m, 0.5)))
			p99.Baseline, p99.Measured = append(p99.Baseline, ms(Percentile(b, 0.99))), append(p99.Measured, ms(Percentile(m, 0.99)))
			e.logf("round %d (busy %v): bare p50 %v p99 %v, engine p50 %v p99 %v", r+1, busy,
				Percentile(b, 0.5), Percentile(b, 0.99), Percentile(m, 0.5), Percentile(m, 0.99))
		}
	}
	return rows, nil
}

// engineEmit appends n status frames to session id one at a time and returns each one's time to
// the client (got), and the bytes the client received.
func engineEmit(ctx context.Context, eng *reference.Engine, id string, got <-chan arrival, n int) ([]time.Duration, [][]byte, error) {
	lat := make([]time.Duration, 0, n)
	payloads := make([][]byte, 0, n)
	for i := range n {
		spec := stream.Spec{Kind: stream.KindStatus, Data: map[string]any{"state": "working", "n": i}}
		t0 := time.Now()
		fs, err := eng.Sessions().Append(ctx, streamWho, id, spec)
		if err != nil {
			return nil, nil, err
		}
		a, err := awaitCursor(got, fs[0].Cur)
		if err != nil {
			return nil, nil, err
		}
		lat = append(lat, a.at.Sub(t0))
		payloads = append(payloads, a.raw)
	}
	return lat, payloads, nil
}

// awaitCursor reads got until the frame at cur.
func awaitCursor(got <-chan arrival, cur int64) (arrival, error) {
	timeout := time.After(stallGuard)
	for {
		select {
		case a, ok := <-got:
			if !ok {
				return arrival{}, fmt.Errorf("the stream ended before frame %d", cur)
			}
			if a.cur == cur {
				return a, nil
			}
			if a.cur > cur {
				return arrival{}, fmt.Errorf("frame %d arrived before frame %d", a.cur, cur)
			}
		case <-timeout:
			return arrival{}, fmt.Errorf("frame %d did not arrive within %v", cur, stallGuard)
		}
	}
}

// bareEmit hands each payload to the bare server and returns each one's time to its client.
func bareEmit(bw *bareWS, got <-chan arrival, payloads [][]byte) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, len(payloads))
	for _, p := range payloads {
		t0 := time.Now()
		bw.send <- p
		a, ok := <-got
		if !ok || string(a.raw) != string(p) {
			return nil, errors.New("the bare WebSocket lost a payload")
		}
		lat = append(lat, a.at.Sub(t0))
	}
	return lat, nil
}
