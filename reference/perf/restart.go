package perf

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/reference/server"
)

// bareMain is the bare Go HTTP binary the restart figure starts beside `loomcheck serve`: it
// answers GET /.well-known/loom on the address of --listen, and nothing else, and prints the
// address it listens on as the engine's servers do ("serving http://ADDR").
const bareMain = `package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "")
	flag.Parse()
	http.HandleFunc("GET /.well-known/loom", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		panic(err)
	}
	fmt.Printf("serving http://%s\n", ln.Addr())
	if err := http.Serve(ln, nil); err != nil {
		panic(err)
	}
}
`

// restart: the time from exec to ready (GET /.well-known/loom answers) of a `loomcheck serve`
// process on an existing data directory, after a SIGKILL as the kit's process driver crashes it,
// beside a bare Go HTTP binary started and killed the same way; and of the engine's own binary
// (cmd/loom) the same way when the module has one. The binaries are built once, with go build,
// into the figure's directory.
func restart(e *env) ([]Row, error) {
	goBin, mod, err := moduleDir(e)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(mod, "cmd", "loomcheck")); err != nil {
		return nil, &skipError{fmt.Sprintf("no cmd/loomcheck in %s to build loomcheck serve from", mod)}
	}
	start := time.Now()
	bareArgs, err := buildBareHTTP(e, goBin)
	if err != nil {
		return nil, err
	}
	per := e.size(5, 1)
	servers, err := buildRestartServers(e, goBin, mod, per)
	if err != nil {
		return nil, err
	}
	e.logf("built the binaries in %v", time.Since(start).Round(time.Millisecond))
	// The first start makes the data directory; the measured ones are restarts.
	for _, s := range servers {
		if _, err := execToReady(e.ctx, s.args); err != nil {
			return nil, err
		}
	}
	for r := range e.rounds() {
		var bs []float64
		meas := make([][]float64, len(servers))
		for range per {
			b, err := execToReady(e.ctx, bareArgs)
			if err != nil {
				return nil, err
			}
			bs = append(bs, ms(b))
			for i, s := range servers {
				m, err := execToReady(e.ctx, s.args)
				if err != nil {
					return nil, err
				}
				meas[i] = append(meas[i], ms(m))
			}
		}
		line := fmt.Sprintf("round %d: bare %.1f ms", r+1, Median(bs))
		for i, s := range servers {
			s.row.Baseline = append(s.row.Baseline, Median(bs))
			s.row.Measured = append(s.row.Measured, Median(meas[i]))
			line += fmt.Sprintf(", %s %.1f ms", s.name, Median(meas[i]))
		}
		e.logf("%s", line)
	}
	var rows []Row
	for _, s := range servers {
		rows = append(rows, s.row)
	}
	return rows, nil
}

// restartServer is one binary the restart figure starts again and again, with its row.
type restartServer struct {
	name string
	args func(addr string) []string
	row  Row
}

// buildBareHTTP builds the bare Go HTTP binary, the restart figure's baseline, and returns its
// command line for an address.
func buildBareHTTP(e *env, goBin string) (func(addr string) []string, error) {
	bareDir := filepath.Join(e.dir, "bare")
	if err := os.MkdirAll(bareDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bareDir, "main.go"), []byte(bareMain), 0o600); err != nil {
		return nil, err
	}
	bareBin := filepath.Join(e.dir, "bare-http")
	if err := build(e.ctx, goBin, bareDir, bareBin, "main.go"); err != nil {
		return nil, err
	}
	return func(addr string) []string { return []string{bareBin, "--listen", addr} }, nil
}

// buildRestartServers builds loomcheck serve and loom (those the module has), each with a data
// directory of its own, and the rows they are measured in.
func buildRestartServers(e *env, goBin, mod string, per int) ([]*restartServer, error) {
	note := fmt.Sprintf("each round's value is the median of %d starts of each, alternating, on a data directory the binary made", per)
	var servers []*restartServer
	for _, s := range []struct{ pkg, name string }{{"./cmd/loomcheck", "loomcheck serve"}, {"./cmd/loom", "loom"}} {
		if _, err := os.Stat(filepath.Join(mod, filepath.FromSlash(s.pkg))); err != nil {
			continue
		}
		bin := filepath.Join(e.dir, filepath.Base(s.pkg))
		if err := build(e.ctx, goBin, mod, bin, s.pkg); err != nil {
			return nil, err
		}
		data := filepath.Join(e.dir, "data-"+filepath.Base(s.pkg))
		args := []string{bin}
		if s.name == "loomcheck serve" {
			args = append(args, "serve")
		}
		servers = append(servers, &restartServer{name: s.name,
			args: func(addr string) []string {
				return append(args[:len(args):len(args)], "--listen", addr, "--data", data)
			},
			row: Row{Measure: s.name + ": exec to ready (GET /.well-known/loom answers) after a SIGKILL", Unit: "ms",
				BaselineName: "bare Go HTTP binary", Goal: Goal{Text: "<= 2x", Of: "ratio", AtMost: true, Bound: 2}, Note: note}})
		note = ""
	}
	return servers, nil
}

// moduleDir finds the go command and the loomcheck module to build binaries from (a *skipError
// when there is none).
func moduleDir(e *env) (goBin, mod string, err error) {
	goBin, err = exec.LookPath("go")
	if err != nil {
		return "", "", &skipError{"needs the go command to build the binaries"}
	}
	mod = e.cfg.Module
	if mod == "" {
		out, err := exec.CommandContext(e.ctx, goBin, "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(out))
		if err != nil || gomod == "" || gomod == os.DevNull {
			return "", "", &skipError{"needs the loomcheck module (run it from the repository) to build the binaries"}
		}
		mod = filepath.Dir(gomod)
	}
	return goBin, mod, nil
}

// build runs go build -o out pkg in dir.
func build(ctx context.Context, goBin, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// execToReady starts the command args makes for the loopback address 127.0.0.1:0 (the server
// binds a port of the kernel's choosing and prints it on a line "... serving http://ADDR ..."),
// times it from the start until GET /.well-known/loom answers 200 at that address, then SIGKILLs
// it and waits for it. No port is picked here and handed on, so no other program can take it in
// between.
func execToReady(ctx context.Context, args func(addr string) []string) (time.Duration, error) {
	argv := args("127.0.0.1:0")
	cmd := exec.Command(argv[0], argv[1:]...)
	var out syncBuffer
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	addrs := make(chan string, 1)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			out.WriteString(line + "\n")
			if addr, ok := server.ServingAddr(line); ok {
				select {
				case addrs <- addr:
				default:
				}
			}
		}
	}()
	exited := make(chan struct{})
	go func() { <-read; _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}()
	deadline := time.NewTimer(stallGuard)
	defer deadline.Stop()
	var url string
	select {
	case addr := <-addrs:
		url = "http://" + addr + "/.well-known/loom"
	case <-exited:
		return 0, fmt.Errorf("%s ended before it was ready: %s", filepath.Base(argv[0]), out.String())
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-deadline.C:
		return 0, fmt.Errorf("%s printed no serving line in %v: %s", filepath.Base(argv[0]), stallGuard, out.String())
	}
	for {
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start), nil
			}
		}
		select {
		case <-exited:
			return 0, fmt.Errorf("%s ended before it was ready: %s", filepath.Base(argv[0]), out.String())
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-deadline.C:
			return 0, errors.Join(fmt.Errorf("%s not ready after %v", filepath.Base(argv[0]), stallGuard), err)
		default:
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// syncBuffer is a bytes.Buffer that a reading goroutine and the caller may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) WriteString(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
