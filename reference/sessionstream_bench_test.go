package reference_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/loomcheck/loomcheck/harness/resume"
	"github.com/loomcheck/loomcheck/reference/internal/reftest"
	"github.com/loomcheck/loomcheck/reference/internal/stream"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/server"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// The session stream's figures (ADR 0052, "Numbers"): the time from a frame's append to its
// receipt by a client over a loopback WebSocket, beside a bare WebSocket sending the same bytes,
// and the time from a crash of the server to the first frame a resuming client receives. Run
// them with `go test -run '^$' -bench Stream -benchtime 1x ./reference/`; they report figures and assert nothing about time.

// emitFrames is how many frames the emit benchmark logs per iteration.
const emitFrames = 3000

// killRounds is how many times the resume benchmark kills the server per iteration.
const killRounds = 30

// anonymous is the caller of an insecure engine (every request is this identity).
var anonymous = loomtype.Identity{Actor: "anonymous"}

func benchConfig(dir, listen string) sutconfig.SUTConfig {
	return sutconfig.SUTConfig{Listen: listen, DataDir: dir, Identity: sutconfig.IdentityConfig{Insecure: true},
		Signing: sutconfig.SigningConfig{Key: base64.StdEncoding.EncodeToString(make([]byte, 32))}}
}

// servedEngine opens an engine on cfg, served on a loopback port, and returns it with its address.
func servedEngine(tb testing.TB, cfg sutconfig.SUTConfig) (*reftest.Engine, string) {
	tb.Helper()
	eng := reftest.Open(tb, reftest.Config(cfg), reftest.Served())
	return eng, strings.TrimPrefix(eng.URL, "http://")
}

// postJSON posts body to url with hc and decodes a 2xx answer into out.
func postJSON(ctx context.Context, hc *http.Client, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func newConversation(tb testing.TB, addr string) string {
	tb.Helper()
	var c struct {
		ID string `json:"id"`
	}
	if err := postJSON(context.Background(), http.DefaultClient, "http://"+addr+"/conversations", `{}`, &c); err != nil {
		tb.Fatal(err)
	}
	return c.ID
}

// arrival is one message a client read, with the instant it was read.
type arrival struct {
	at  time.Time
	cur int64
	raw []byte
}

// readAll reads every message of c into out until c fails.
func readAll(ctx context.Context, c *websocket.Conn, out chan<- arrival) {
	for {
		_, b, err := c.Read(ctx)
		at := time.Now()
		if err != nil {
			close(out)
			return
		}
		var f struct {
			Cur int64 `json:"cur"`
		}
		_ = json.Unmarshal(b, &f)
		out <- arrival{at: at, cur: f.Cur, raw: b}
	}
}

// quantiles returns the p50, p95, p99 and max of ds, in milliseconds (nearest rank).
func quantiles(ds []time.Duration) (p50, p95, p99, maxMs float64) {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return ms(s[min(max(i, 0), len(s)-1)])
	}
	return at(0.50), at(0.95), at(0.99), ms(s[len(s)-1])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkStreamEmit logs emitFrames status frames in one session through the engine's own
// path (Sessions().Append: a durable commit, then the subscriber and the stream route) and times
// each from just before its append to its receipt by a client on a loopback WebSocket; one frame
// at a time, the next appended once the previous arrived. In the same run a bare coder/websocket
// server sends the very bytes the client received, timed the same way from the instant the
// payload is handed to the server's writer. Metrics in milliseconds; p99/base_p99 is the ratio.
func BenchmarkStreamEmit(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eng, addr := servedEngine(b, benchConfig(filepath.Join(b.TempDir(), "data"), ""))
	id := newConversation(b, addr)

	// The bare baseline: one WebSocket, the payloads sent as the channel hands them over.
	send := make(chan []byte)
	base := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for p := range send {
			if c.Write(r.Context(), websocket.MessageText, p) != nil {
				return
			}
		}
	})}
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = base.Serve(bln) }()
	defer base.Close()

	var lat, baseLat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		var op struct {
			Ticket string `json:"ticket"`
			Head   int64  `json:"head"`
		}
		if err := postJSON(ctx, http.DefaultClient, "http://"+addr+"/sessions/"+id+"/stream/open", `{}`, &op); err != nil {
			b.Fatal(err)
		}
		c, _, err := websocket.Dial(ctx, "ws://"+addr+"/sessions/"+id+"/stream?ticket="+op.Ticket+"&from="+strconv.FormatInt(op.Head, 10), nil)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(1 << 20)
		got := make(chan arrival, 16)
		go readAll(ctx, c, got)
		payloads := make([][]byte, 0, emitFrames)
		for i := range emitFrames {
			spec := stream.Spec{Kind: stream.KindStatus, Data: map[string]any{"state": "working", "n": i}}
			t0 := time.Now()
			fs, err := eng.Sessions().Append(ctx, anonymous, id, spec)
			if err != nil {
				b.Fatal(err)
			}
			for a := range got {
				if a.cur == fs[0].Cur {
					lat = append(lat, a.at.Sub(t0))
					payloads = append(payloads, a.raw)
					break
				}
				if a.cur > fs[0].Cur {
					b.Fatalf("frame %d arrived before frame %d", a.cur, fs[0].Cur)
				}
			}
			if len(lat) == 0 || len(payloads) != i+1 {
				b.Fatalf("the stream ended before frame %d", fs[0].Cur)
			}
		}
		c.CloseNow()

		bc, _, err := websocket.Dial(ctx, "ws://"+bln.Addr().String()+"/", nil)
		if err != nil {
			b.Fatal(err)
		}
		bgot := make(chan arrival, 16)
		go readAll(ctx, bc, bgot)
		for _, p := range payloads {
			t0 := time.Now()
			send <- p
			a, ok := <-bgot
			if !ok || !bytes.Equal(a.raw, p) {
				b.Fatal("the baseline socket lost a payload")
			}
			baseLat = append(baseLat, a.at.Sub(t0))
		}
		bc.CloseNow()
	}
	b.StopTimer()
	p50, p95, p99, mx := quantiles(lat)
	b50, b95, b99, bmx := quantiles(baseLat)
	b.ReportMetric(p50, "p50_ms")
	b.ReportMetric(p95, "p95_ms")
	b.ReportMetric(p99, "p99_ms")
	b.ReportMetric(mx, "max_ms")
	b.ReportMetric(b50, "base_p50_ms")
	b.ReportMetric(b95, "base_p95_ms")
	b.ReportMetric(b99, "base_p99_ms")
	b.ReportMetric(bmx, "base_max_ms")
	b.ReportMetric(p99/b99, "p99/base_p99")
	b.ReportMetric(float64(len(lat)), "frames")
}

// follower is a resumable client of one session over the WebSocket: it holds resume.Reader's
// Last, opens every attempt with POST .../stream/open {from: Last} and dials with from=Last,
// reconnects at once after a drop and then by resume.Backoff. Each delivered frame goes to got.
type follower struct {
	addr, id string
	bo       resume.Backoff
	got      chan arrival

	mu         sync.Mutex
	rd         resume.Reader
	attempts   int
	gaps       int
	repeats    int
	delivered  []int64
	lastFailed error
}

func (f *follower) run(ctx context.Context) {
	// A fresh connection for every open: a pooled one may belong to the server that was killed.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for ctx.Err() == nil {
		err := f.once(ctx, hc)
		f.mu.Lock()
		f.lastFailed = err
		f.mu.Unlock()
		t := time.NewTimer(f.bo.Next())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (f *follower) once(ctx context.Context, hc *http.Client) error {
	f.mu.Lock()
	f.attempts++
	last := f.rd.Last
	f.mu.Unlock()
	var op struct {
		Ticket string `json:"ticket"`
	}
	base := "http://" + f.addr + "/sessions/" + f.id + "/stream"
	if err := postJSON(ctx, hc, base+"/open", fmt.Sprintf(`{"from":%d}`, last), &op); err != nil {
		return err
	}
	c, _, err := websocket.Dial(ctx, "ws://"+f.addr+"/sessions/"+f.id+"/stream?ticket="+op.Ticket+"&from="+strconv.FormatInt(last, 10),
		&websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	for {
		_, b, err := c.Read(ctx)
		at := time.Now()
		if err != nil {
			return err
		}
		var fr resume.Frame
		if err := json.Unmarshal(b, &fr); err != nil {
			return err
		}
		f.mu.Lock()
		out, v := f.rd.Take(fr)
		switch v {
		case resume.Deliver, resume.Trim:
			f.bo.Reset()
			f.delivered = append(f.delivered, out.Cur)
		case resume.Gap:
			f.gaps++
		case resume.Drop:
			f.repeats++
		}
		f.mu.Unlock()
		switch v {
		case resume.Deliver, resume.Trim:
			f.got <- arrival{at: at, cur: out.Cur, raw: b}
		case resume.Gap:
			return errors.New("gap: asking again")
		}
	}
}

// check fails b unless the follower delivered every cursor from 1 exactly once, in order.
func (f *follower) check(b *testing.B) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.delivered {
		if c != int64(i+1) {
			b.Fatalf("delivered cursors %v: not 1, 2, 3, ... (gaps %d, repeats %d)", f.delivered, f.gaps, f.repeats)
		}
	}
}

// killInstance is one server the resume benchmark kills and starts again on the same data
// directory and port.
type killInstance interface {
	start(b *testing.B)
	kill()
	// frame makes the server log one new frame in the session (after a restart, at once).
	frame(b *testing.B, id string)
	// settled reports whether a is the last frame the session logs for a frame (nothing
	// follows it until the next frame).
	settled(a arrival) bool
	close()
}

// inProcess is an engine in this process: kill is Engine.Kill, start opens it again (reftest's
// Restart, served at the same address).
type inProcess struct {
	cfg sutconfig.SUTConfig
	eng *reftest.Engine
}

func (p *inProcess) start(b *testing.B) {
	if p.eng == nil {
		p.eng, _ = servedEngine(b, p.cfg)
		return
	}
	p.eng.Restart()
}
func (p *inProcess) kill() { p.eng.Kill() }
func (p *inProcess) frame(b *testing.B, id string) {
	if _, err := p.eng.Sessions().Append(context.Background(), anonymous, id,
		stream.Spec{Kind: stream.KindStatus, Data: map[string]string{"state": "working"}}); err != nil {
		b.Fatal(err)
	}
}
func (p *inProcess) close() { _ = p.eng.Close() }

// settled: the status frame is all the session logs.
func (p *inProcess) settled(arrival) bool { return true }

// process is `loomcheck serve` as a child process: kill is SIGKILL. Its frame is a user turn
// (POST /conversations/{id}/turns), which the session logs as a user-message frame; the frame
// for the next round waits until the turn's reply is done, so that nothing is in flight at a kill.
// Its first start listens on 127.0.0.1:0 and addr is read from the line it prints ("serving
// http://ADDR"); a restart listens on addr again (--listen), as the benchmark measures.
type process struct {
	bin, config, addr string
	cmd               *exec.Cmd
	exited            chan struct{}
	turns             int
}

func (p *process) start(b *testing.B) {
	cmd := exec.Command(p.bin, "serve")
	if p.addr != "" {
		cmd.Args = append(cmd.Args, "--listen", p.addr)
	}
	cmd.Env = append(os.Environ(), "LOOM_CONFIG="+p.config)
	var errs bytes.Buffer
	cmd.Stderr = &errs
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	serving, exited := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := server.ServingAddr(sc.Text()); ok {
				select {
				case serving <- addr:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case p.addr = <-serving:
	case <-exited:
		b.Fatalf("loomcheck serve ended before serving: %s", errs.String())
	case <-time.After(30 * time.Second):
		b.Fatal("loomcheck serve did not start serving")
	}
	p.cmd, p.exited = cmd, exited
}
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}
func (p *process) frame(b *testing.B, id string) {
	p.turns++
	if err := postJSON(context.Background(), http.DefaultClient, "http://"+p.addr+"/conversations/"+id+"/turns",
		fmt.Sprintf(`{"text":"question %d","messageId":"m-%d"}`, p.turns, p.turns), nil); err != nil {
		b.Fatal(err)
	}
}

// settled: the turn's reply ends with its text-done.
func (p *process) settled(a arrival) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(a.raw, &f) == nil && f.Type == "session.text-done"
}

func (p *process) close() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// BenchmarkStreamKillResume kills the server killRounds times while a resumable client follows a
// session over the WebSocket, and times each from the instant of the kill to the first frame the
// client delivers after it reconnected: the server is started again on the same data directory
// and port and logs a frame at once; the client reconnects at once after the drop, then after
// resume.Backoff{Base: 10ms, Max: 1s, Jitter: 0.2}. "inprocess" kills with Engine.Kill and opens
// again on the same configuration; "process" SIGKILLs `loomcheck serve` and runs it again.
// restart_* is the share of the time the server took to serve again. The client must have
// delivered every cursor exactly once.
func BenchmarkStreamKillResume(b *testing.B) {
	b.Run("inprocess", func(b *testing.B) {
		benchKillResume(b, func(dir string) killInstance { return &inProcess{cfg: benchConfig(filepath.Join(dir, "data"), "")} })
	})
	b.Run("process", func(b *testing.B) {
		bin := filepath.Join(b.TempDir(), "loomcheck")
		build := exec.Command("go", "build", "-o", bin, "./cmd/loomcheck")
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build ./cmd/loomcheck: %v\n%s", err, out)
		}
		benchKillResume(b, func(dir string) killInstance {
			cfg, err := json.Marshal(benchConfig(filepath.Join(dir, "data"), "127.0.0.1:0"))
			if err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(dir, "loom-config.json")
			if err := os.WriteFile(path, cfg, 0o600); err != nil {
				b.Fatal(err)
			}
			return &process{bin: bin, config: path}
		})
	})
}

func benchKillResume(b *testing.B, newServer func(dir string) killInstance) {
	var lat, restart []time.Duration
	reconnects := 0
	for range b.N {
		b.StopTimer()
		srv := newServer(b.TempDir())
		srv.start(b)
		var addr string
		switch s := srv.(type) {
		case *inProcess:
			addr = strings.TrimPrefix(s.eng.URL, "http://")
		case *process:
			addr = s.addr
		}
		id := newConversation(b, addr)
		ctx, cancel := context.WithCancel(context.Background())
		f := &follower{addr: addr, id: id, got: make(chan arrival, 64),
			bo: resume.Backoff{Base: 10 * time.Millisecond, Max: time.Second, Jitter: 0.2}}
		done := make(chan struct{})
		go func() { defer close(done); f.run(ctx) }()
		// next is the next frame the client delivers.
		next := func(what string) arrival {
			select {
			case a := <-f.got:
				return a
			case <-time.After(30 * time.Second):
				f.mu.Lock()
				defer f.mu.Unlock()
				b.Fatalf("%s: no frame in 30 s (last %d, attempts %d, last error %v)", what, f.rd.Last, f.attempts, f.lastFailed)
				return arrival{}
			}
		}
		drain := func(a arrival) {
			// Whatever the session logs after a frame (a turn's reply) arrives before the kill.
			for !srv.settled(a) {
				a = next("the rest of what the frame logged")
			}
		}
		srv.frame(b, id)
		drain(next("the first frame"))
		b.StartTimer()
		for range killRounds {
			f.mu.Lock()
			before := f.attempts
			f.mu.Unlock()
			t0 := time.Now()
			srv.kill()
			srv.start(b)
			up := time.Since(t0)
			srv.frame(b, id)
			a := next("the first frame after the restart")
			lat = append(lat, a.at.Sub(t0))
			restart = append(restart, up)
			b.StopTimer()
			f.mu.Lock()
			reconnects += f.attempts - before
			f.mu.Unlock()
			drain(a)
			b.StartTimer()
		}
		b.StopTimer()
		cancel()
		srv.close()
		<-done
		f.check(b)
		b.StartTimer()
	}
	p50, p95, _, mx := quantiles(lat)
	r50, r95, _, rmx := quantiles(restart)
	b.ReportMetric(p50, "p50_ms")
	b.ReportMetric(p95, "p95_ms")
	b.ReportMetric(mx, "max_ms")
	b.ReportMetric(r50, "restart_p50_ms")
	b.ReportMetric(r95, "restart_p95_ms")
	b.ReportMetric(rmx, "restart_max_ms")
	b.ReportMetric(float64(len(lat)), "kills")
	b.ReportMetric(float64(reconnects)/float64(len(lat)), "attempts/kill")
}
