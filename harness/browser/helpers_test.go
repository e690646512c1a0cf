package browser

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness/world"
	loomserver "github.com/loomcheck/loomcheck/reference/server"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// chromiumPath is Debian's chromium; the node scripts launch exactly this binary.
const chromiumPath = "/usr/bin/chromium"

// requireBrowser skips the test when chromium, node or the npm packages are missing, so that
// `go test ./...` passes on a machine without them. Under CI (CI set) a missing piece is a failure
// instead: .ci/run installs all three, and a silent skip there would hide a broken install.
func requireBrowser(t *testing.T) {
	t.Helper()
	var missing []string
	if _, err := os.Stat(chromiumPath); err != nil {
		missing = append(missing, chromiumPath+" (apt-get install chromium)")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node on PATH")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "harness/browser/node_modules (cd harness/browser && npm ci)")
	}
	if len(missing) == 0 {
		return
	}
	msg := "browser test needs " + strings.Join(missing, ", ")
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; .ci/run is expected to install them")
	}
	t.Skip(msg)
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// server is `loomcheck serve` run as a child process from one configuration document. Its listen
// is 127.0.0.1:0: every run binds a port of the kernel's choosing and start reads the address from
// the line the server prints once it listens ("serving http://ADDR"), so no port is picked here
// and left free for another process to take before the server binds it. start may be called
// again after kill to restart it on the same data directory; it then listens on another port
// (a test that needs one address across restarts puts a relay in front of it).
type server struct {
	t      *testing.T
	bin    string
	config string
	logs   *syncBuffer // stdout and stderr of every run, in order

	cmd    *exec.Cmd
	addr   string // where the current run listens, from its serving line
	exited chan struct{}
	err    error // cmd.Wait's answer, set before exited closes
}

func newServer(t *testing.T, bin, config string) *server {
	s := &server{t: t, bin: bin, config: config, logs: &syncBuffer{}}
	t.Cleanup(func() {
		if s.running() {
			s.kill()
		}
		if strings.Contains(s.logs.String(), "WARNING: DATA RACE") {
			t.Errorf("the server reported a data race:\n%s", s.logs)
		}
		if t.Failed() {
			t.Logf("server output:\n%s", s.logs)
		}
	})
	return s
}

func (s *server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start launches the server and waits until it says where it is serving (it prints that line
// once its listener is open) or ctx ends; url then answers that address.
func (s *server) start(ctx context.Context) {
	s.t.Helper()
	cmd := exec.Command(s.bin, "serve")
	cmd.Env = append(os.Environ(), "LOOM_CONFIG="+s.config)
	cmd.Stderr = s.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s serve: %v", s.bin, err)
	}
	fmt.Fprintf(s.logs, "--- started pid %d\n", cmd.Process.Pid)
	s.cmd, s.exited, s.addr = cmd, make(chan struct{}), ""
	serving := make(chan string, 1)
	go func(exited chan struct{}) {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.logs, line)
			if addr, ok := loomserver.ServingAddr(line); ok {
				select {
				case serving <- addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		s.err = cmd.Wait()
		fmt.Fprintf(s.logs, "--- pid %d ended: %v\n", cmd.Process.Pid, s.err)
		close(exited)
	}(s.exited)
	select {
	case s.addr = <-serving:
	case <-s.exited:
		s.t.Fatalf("loomcheck serve ended before serving: %v", s.err)
	case <-ctx.Done():
		s.t.Fatalf("loomcheck serve did not start serving: %v", ctx.Err())
	}
}

// url is the address the running server listens on, as http://host:port.
func (s *server) url() string { return "http://" + s.addr }

// kill ends the server with SIGKILL, as a crash would, and waits until it is gone.
func (s *server) kill() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop asks the server to shut down (SIGTERM) and waits for it, at most until ctx ends.
func (s *server) stop(ctx context.Context) error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.err
	case <-ctx.Done():
		s.kill()
		return fmt.Errorf("loomcheck serve did not stop on SIGTERM: %w", ctx.Err())
	}
}

// api is a small JSON client of the server under test.
type api struct {
	base  string
	token string
	hc    *http.Client
}

// do sends a request with a JSON body (when body is not nil) and decodes a JSON answer into out
// (when out is not nil). It returns the status code.
func (a *api) do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decoding %q: %w", method, path, b, err)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}

// nodeScript is one run of a node script of this directory that talks in JSON lines: it prints
// one object per line on stdout and, for the interactive ones, reads commands on stdin.
type nodeScript struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *syncBuffer
	done   chan struct{}
	err    error // cmd.Wait's answer, set before done closes
}

// startNode runs `node script args...` in this directory. The process is ended when the test
// ends (SIGTERM, which lets playwright close the browser, then SIGKILL after a grace period).
func startNode(t *testing.T, script string, args ...string) *nodeScript {
	t.Helper()
	cmd := exec.Command("node", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	n := &nodeScript{t: t, name: script, cmd: cmd, lines: make(chan []byte, 64), stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = n.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("node %s: %v", script, err)
	}
	n.stdin = stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
		for sc.Scan() {
			n.lines <- bytes.Clone(sc.Bytes())
		}
		_, _ = io.Copy(io.Discard, stdout)
		n.err = cmd.Wait()
		close(n.lines)
		close(n.done)
	}()
	t.Cleanup(func() {
		_ = n.stdin.Close()
		select {
		case <-n.done:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		grace := time.NewTimer(10 * time.Second)
		defer grace.Stop()
		select {
		case <-n.done:
		case <-grace.C:
			_ = cmd.Process.Kill()
			<-n.done
		}
	})
	return n
}

// next returns the script's next line decoded into a map, failing the test on a fatal line, an
// early exit or ctx's end.
func (n *nodeScript) next(ctx context.Context) map[string]json.RawMessage {
	n.t.Helper()
	select {
	case line, ok := <-n.lines:
		if !ok {
			<-n.done
			n.t.Fatalf("node %s ended without an answer (%v); stderr:\n%s", n.name, n.err, n.stderr)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			n.t.Fatalf("node %s printed a line that is not a JSON object: %q", n.name, line)
		}
		if f, ok := m["fatal"]; ok {
			n.t.Fatalf("node %s failed: %s\nstderr:\n%s", n.name, unquote(f), n.stderr)
		}
		return m
	case <-ctx.Done():
		n.t.Fatalf("node %s: no answer before the deadline (%v); stderr:\n%s", n.name, ctx.Err(), n.stderr)
		return nil
	}
}

// send writes one command line.
func (n *nodeScript) send(cmd any) {
	n.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		n.t.Fatal(err)
	}
	if _, err := n.stdin.Write(append(b, '\n')); err != nil {
		n.t.Fatalf("node %s: writing a command: %v; stderr:\n%s", n.name, err, n.stderr)
	}
}

// waitFor asks the page to wait until the JavaScript expression expr is true, within timeout,
// and fails the test (with the page's own summary) when it does not become true in time.
func (n *nodeScript) waitFor(ctx context.Context, what, expr string, timeout time.Duration) {
	n.t.Helper()
	n.send(map[string]any{"op": "wait", "expr": expr, "timeoutMs": timeout.Milliseconds()})
	m := n.next(ctx)
	if string(m["ok"]) != "true" {
		n.t.Fatalf("page: waiting for %s (%s): %s\npage state: %s", what, expr, unquote(m["error"]), m["state"])
	}
}

// result waits for the {"result": ...} line and decodes it into out.
func (n *nodeScript) result(ctx context.Context, out any) {
	n.t.Helper()
	for {
		m := n.next(ctx)
		raw, ok := m["result"]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, out); err != nil {
			n.t.Fatalf("node %s: decoding the result: %v", n.name, err)
		}
		return
	}
}

func unquote(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return string(raw)
	}
	return s
}

// consoleMessage, pageRequest and pageRecord are what lib.mjs's watchPage records.
type consoleMessage struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Location struct {
		URL        string `json:"url"`
		LineNumber int    `json:"lineNumber"`
	} `json:"location"`
}

type pageRequest struct {
	URL          string   `json:"url"`
	Method       string   `json:"method"`
	ResourceType string   `json:"resourceType"`
	Status       int      `json:"status"` // 0 when no response came (a refused connection)
	LastEventID  *string  `json:"lastEventId"`
	Cookies      []string `json:"cookies"`
	HeadersKnown bool     `json:"headersKnown"`
}

type pageRecord struct {
	Console        []consoleMessage `json:"console"`
	PageErrors     []string         `json:"pageErrors"`
	Requests       []pageRequest    `json:"requests"`
	FailedRequests []struct {
		URL   string `json:"url"`
		Error string `json:"error"`
	} `json:"failedRequests"`
}

// consoleErrors returns the console messages of type "error".
func (p pageRecord) consoleErrors() []consoleMessage {
	var out []consoleMessage
	for _, m := range p.Console {
		if m.Type == "error" {
			out = append(out, m)
		}
	}
	return out
}

// page is one file a test serves to the browser.
type page struct {
	contentType string
	body        []byte
}

// htmlPage and scriptPage are a page of HTML and one of JavaScript.
func htmlPage(s string) page   { return page{"text/html; charset=utf-8", []byte(s)} }
func scriptPage(b []byte) page { return page{"text/javascript; charset=utf-8", b} }

// servePages serves the pages by path (anything else is 404, or goes to other when it is not
// nil) on a loopback server closed when the test ends.
func servePages(t *testing.T, pages map[string]page, other http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		p, ok := pages[r.URL.Path]
		switch {
		case ok:
			rw.Header().Set("Content-Type", p.contentType)
			_, _ = rw.Write(p.body)
		case other != nil:
			other.ServeHTTP(rw, r)
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// streamClientPage is streamclient.js, read from this directory.
func streamClientPage(t *testing.T) page {
	t.Helper()
	b, err := os.ReadFile("streamclient.js")
	if err != nil {
		t.Fatal(err)
	}
	return scriptPage(b)
}

// serverConfig writes the configuration document of a `loomcheck serve` for the world w: listen
// 127.0.0.1:0 (the server reports the port it got), a fresh data directory and signing key, token
// as alice of tenant acme, and pages from origin allowed with credentials. It returns the
// document's path.
func serverConfig(t *testing.T, w *world.World, token, origin string) string {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	dir := t.TempDir()
	cfg := w.Config(sutconfig.SUTConfig{
		Listen:   "127.0.0.1:0",
		DataDir:  filepath.Join(dir, "data"),
		Signing:  sutconfig.SigningConfig{Key: base64.StdEncoding.EncodeToString(key)},
		Identity: sutconfig.IdentityConfig{Principals: map[string]sutconfig.Principal{token: {Tenant: "acme", Actor: "alice"}}},
		Gateway:  sutconfig.GatewayConfig{AllowedOrigins: []string{origin}, AllowCredentials: true},
	})
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "loom-config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// relay is a loopback address of the test's own that stays the same while the server behind it
// is killed and started again on another port: the browser reconnects to the address it knows,
// as it would to a server restarted on the same port. The relay's listener is open for the whole
// test, so no other process can take its port. Each connection it accepts goes to the address
// set last; when nothing listens there (the server is down), the connection is reset, as a client
// of a server that is down sees its connection fail. Bytes are copied both ways until each side
// has closed; a side that ends with an error (a reset) is reset on the other side too.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	to    string
	conns map[net.Conn]struct{} // nil once closed
	wg    sync.WaitGroup
}

// newRelay opens a relay on a loopback port of the kernel's choosing, closed when the test ends.
func newRelay(t *testing.T) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.accept)
	t.Cleanup(r.close)
	return r
}

// addr is the relay's own address, host:port; url is it as http://host:port.
func (r *relay) addr() string { return r.ln.Addr().String() }
func (r *relay) url() string  { return "http://" + r.addr() }

// point sends the connections accepted from now on to addr (host:port).
func (r *relay) point(addr string) {
	r.mu.Lock()
	r.to = addr
	r.mu.Unlock()
}

func (r *relay) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Go(func() { r.pipe(c.(*net.TCPConn)) })
	}
}

func (r *relay) pipe(c *net.TCPConn) {
	r.mu.Lock()
	to := r.to
	r.mu.Unlock()
	u, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		reset(c)
		return
	}
	up := u.(*net.TCPConn)
	if !r.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { copyHalf(up, c); done <- struct{}{} }()
	go func() { copyHalf(c, up); done <- struct{}{} }()
	<-done
	<-done
	r.untrack(c, up)
}

// copyHalf copies from src to dst until src ends: at its end of stream dst's writing side is
// closed, and after an error of either (a reset) dst is reset and src closed.
func copyHalf(dst, src *net.TCPConn) {
	if _, err := io.Copy(dst, src); err != nil {
		reset(dst)
		_ = src.Close()
		return
	}
	_ = dst.CloseWrite()
}

// reset closes c with a reset instead of an orderly end of stream.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

// track records an open pair, unless the relay is closed (then it closes them).
func (r *relay) track(cs ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		r.conns[c] = struct{}{}
	}
	return true
}

func (r *relay) untrack(cs ...net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(r.conns, c)
	}
}

// close stops accepting, ends every connection and waits for the copies to return.
func (r *relay) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}
