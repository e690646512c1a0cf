package reference_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// The crash torture test runs the engine as a separate process (this test binary, re-executed
// with crashChildEnv naming a configuration file), talks to it over HTTP, kills it with SIGKILL
// at varied moments and restarts it on the same data directory. After the last restart the
// transcript must hold every acknowledged turn exactly once, each answered exactly once.
const (
	crashChildEnv      = "LOOMCHECK_CRASH_CHILD"
	crashSeedEnv       = "LOOMCHECK_CRASH_SEED"
	crashIterationsEnv = "LOOMCHECK_CRASH_ITERATIONS"
	crashReadyPrefix   = "crash-child listening on "
	crashToken         = "tok-crash-alice"
	crashChosenID      = "crash-1"
)

// TestCrashChild is the engine process of TestCrashTorture. It does nothing unless
// crashChildEnv names a configuration file.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("only runs as the child process of TestCrashTorture")
	}
	os.Exit(runCrashChild(path))
}

// runCrashChild serves the engine the way `loomcheck serve` does: open from the configuration
// document, listen on its address, serve until killed. It also exits when its standard input
// closes, so that it never outlives the test that started it.
func runCrashChild(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 2
	}
	var cfg sutconfig.SUTConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		fmt.Fprintln(os.Stderr, "crash child: configuration:", err)
		return 2
	}
	eng, err := reference.OpenConfig(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child: open:", err)
		return 2
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child: listen:", err)
		return 2
	}
	srv := &http.Server{Handler: eng.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintln(os.Stdout, crashReadyPrefix+ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// childProc is one run of the child process.
type childProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	base   string
	exited chan struct{}
}

// readyWriter is the child's standard output: it reports the address from the ready line.
type readyWriter struct {
	mu    sync.Mutex
	buf   []byte
	ready chan string
	sent  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for !w.sent {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		if addr, ok := strings.CutPrefix(line, crashReadyPrefix); ok {
			w.sent = true
			w.ready <- addr
		}
	}
	if w.sent {
		w.buf = nil
	}
	return len(p), nil
}

// logBuffer keeps everything every child wrote to standard error, up to a bound.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() < 8<<20 {
		l.buf.Write(p)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) mark(format string, args ...any) {
	fmt.Fprintf(l, "---- "+format+"\n", args...)
}

func (x *torture) base() string {
	if x.child == nil {
		return "http://127.0.0.1:1" // nothing listens there
	}
	return x.child.base
}

func (x *torture) startChild() {
	t := x.t
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+x.cfgPath)
	rw := &readyWriter{ready: make(chan string, 1)}
	cmd.Stdout = rw
	cmd.Stderr = x.logs
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &childProc{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	x.child = c
	x.logs.mark("child %d started", cmd.Process.Pid)
	select {
	case addr := <-rw.ready:
		c.base = "http://" + addr
	case <-c.exited:
		t.Fatalf("the child exited before serving: %v", cmd.ProcessState)
	case <-time.After(30 * time.Second):
		t.Fatal("the child did not start serving within 30s")
	}
}

// kill sends SIGKILL to the child and waits until it is gone.
func (x *torture) kill() {
	c := x.child
	if c == nil {
		return
	}
	from := time.Now()
	_ = c.cmd.Process.Kill()
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		x.t.Fatal("the killed child did not exit")
	}
	x.killed = append(x.killed, window{from: from, to: time.Now()})
	x.logs.mark("child %d killed", c.cmd.Process.Pid)
	x.child = nil
	x.tr.CloseIdleConnections()
}

func (x *torture) stopChild() {
	if c := x.child; c != nil {
		_ = c.stdin.Close()
		x.kill()
	}
}
