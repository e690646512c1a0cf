package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/harness/sut"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// driver runs one SUT for one scenario.
type driver interface {
	// Start launches the SUT on cfg and waits until it answers.
	Start(ctx context.Context, cfg sutconfig.SUTConfig) error
	// URL is where the SUT answers now.
	URL() string
	// Crash kills the SUT as SIGKILL would.
	Crash() error
	// Restart launches it again on the same configuration and data directory.
	Restart(ctx context.Context) error
	// Stop ends it cleanly.
	Stop() error
	// Logs returns what the SUT printed (process driver), bounded.
	Logs() string
	// Reconfigure changes the configuration the next Restart uses.
	Reconfigure(cfg sutconfig.SUTConfig)
}

// DriverKind is how a run's scenarios run their systems, and what that lets them do. InProcess,
// Process, Nodes and Remote make one.
type DriverKind struct {
	// Name is the driver's name in the report ("in-process", "process", "nodes", "remote");
	// Describe names the target there.
	Name     string
	Describe string
	// CanCrash: the scenarios may crash the system; Configurable: they may choose its
	// configuration.
	CanCrash     bool
	Configurable bool
	// Shared: one system serves every scenario of the run (and of other runs), so what it keeps
	// once for all callers is not the scenario's alone (@fresh-system).
	Shared    bool
	newDriver func() driver
}

// InProcess runs each scenario's system in the kit's process, opened by factory.
func InProcess(factory sut.Factory) DriverKind {
	return DriverKind{Name: "in-process", Describe: "in-process", CanCrash: true, Configurable: true,
		newDriver: func() driver { return &inProcess{factory: factory} }}
}

// Process runs each scenario's system as `sh -c command`.
func Process(command string) DriverKind {
	return DriverKind{Name: "process", Describe: command, CanCrash: true, Configurable: true,
		newDriver: func() driver { return &process{command: command} }}
}

// Nodes runs each scenario's system as n processes of command sharing its database, configured
// with lease and partitions (node.partitions; 0: not set), behind one address.
func Nodes(command string, n int, lease time.Duration, partitions int) DriverKind {
	describe := fmt.Sprintf("%d nodes of %s", n, command)
	if partitions > 0 {
		describe = fmt.Sprintf("%d nodes of %d partitions of %s", n, partitions, command)
	}
	return DriverKind{Name: "nodes", Describe: describe, CanCrash: true, Configurable: true,
		newDriver: func() driver { return &nodes{command: command, n: n, lease: lease, partitions: partitions} }}
}

// Remote judges the running system at url, which every scenario shares.
func Remote(url string) DriverKind {
	return DriverKind{Name: "remote", Describe: url, Shared: true,
		newDriver: func() driver { return &remote{url: url} }}
}

// inProcess serves a sut.Factory's instance on a loopback listener.
type inProcess struct {
	factory sut.Factory
	cfg     sutconfig.SUTConfig
	inst    sut.Instance
	srv     *http.Server
	// addr is where the instance listens; addrMu guards it, since readers of a stream ask for
	// the URL while a step restarts the instance.
	addrMu sync.Mutex
	addr   string
	done   chan struct{}
	ln     net.Listener
	// selfServed: the instance is a Server and serves ln itself.
	selfServed bool
}

func (d *inProcess) Start(ctx context.Context, cfg sutconfig.SUTConfig) error {
	d.cfg = cfg
	return d.launch(ctx)
}

func (d *inProcess) launch(ctx context.Context) error {
	inst, err := d.factory(ctx, d.cfg)
	if err != nil {
		return &StartError{err: err}
	}
	d.addrMu.Lock()
	prev := d.addr
	d.addrMu.Unlock()
	addr := prev
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil && prev != "" {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		inst.Close()
		return harnessErr("listen: %v", err)
	}
	d.addrMu.Lock()
	d.addr = ln.Addr().String()
	d.addrMu.Unlock()
	d.inst = inst
	d.done = make(chan struct{})
	d.ln = ln
	if self, ok := inst.(sut.Server); ok {
		// The instance applies its own connection limits; the kit only hands it the listener.
		d.srv, d.selfServed = nil, true
		go func(done chan struct{}) {
			defer close(done)
			_ = self.Serve(ln)
		}(d.done)
		return nil
	}
	d.selfServed = false
	d.srv = &http.Server{Handler: inst.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(d.srv, d.done)
	return nil
}

// stopServing ends the driver's own server, or waits for a self-serving instance's Serve to
// return once the instance was crashed or closed (the listener is closed too, so a Serve that
// waits on Accept returns; one that does not return within a few seconds is left behind).
func (d *inProcess) stopServing() {
	if !d.selfServed {
		_ = d.srv.Close()
		<-d.done
		return
	}
	_ = d.ln.Close()
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
	}
}

func (d *inProcess) URL() string {
	d.addrMu.Lock()
	defer d.addrMu.Unlock()
	return "http://" + d.addr
}

func (d *inProcess) Crash() error {
	if d.inst == nil {
		return nil
	}
	d.inst.Crash()
	d.stopServing()
	d.inst = nil
	return nil
}

func (d *inProcess) Restart(ctx context.Context) error {
	if err := d.Crash(); err != nil {
		return err
	}
	return d.launch(ctx)
}

func (d *inProcess) Stop() error {
	if d.inst == nil {
		return nil
	}
	var err error
	if d.selfServed {
		err = d.inst.Close()
		d.stopServing()
	} else {
		d.stopServing()
		err = d.inst.Close()
	}
	d.inst = nil
	return err
}

func (d *inProcess) Logs() string { return "" }

func (d *inProcess) Reconfigure(cfg sutconfig.SUTConfig) { d.cfg = cfg }

// StartError is a SUT that refused to start (which some scenarios expect).
type StartError struct{ err error }

func (e *StartError) Error() string { return "the system under test did not start: " + e.err.Error() }
func (e *StartError) Unwrap() error { return e.err }

// process launches a command with LOOM_CONFIG, SIGKILLs it to crash it and launches it again.
type process struct {
	command string
	dir     string
	cfg     sutconfig.SUTConfig
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error // how the process ended (exec.ExitError), once exited is closed
	logs    *ringBuffer
	ready   time.Duration
	// port is the reservation of the port cfg.Listen names, held until Stop (a crash and a
	// restart keep it, so no other kit process takes the port while the SUT is down).
	port *portReservation
}

func (d *process) Start(ctx context.Context, cfg sutconfig.SUTConfig) error {
	d.cfg = cfg
	d.logs = newRingBuffer(64 << 10)
	if err := d.newPort(); err != nil {
		return err
	}
	if err := d.launchHeld(ctx); err != nil {
		d.releasePort()
		return err
	}
	return nil
}

// newPort gives the process a port of its own, releasing the one it held, and sets the
// configuration's listen to it.
func (d *process) newPort() error {
	d.releasePort()
	r, err := reservePort()
	if err != nil {
		return harnessErr("pick a port: %v", err)
	}
	d.port = r
	d.cfg.Listen = "127.0.0.1:" + r.port
	return nil
}

func (d *process) releasePort() {
	if d.port != nil {
		d.port.release()
		d.port = nil
	}
}

// launchHeld launches the process on its port (a new one if it holds none), and again on a new
// port when another program took the port before the process bound it, at most portTries times.
func (d *process) launchHeld(ctx context.Context) error {
	if d.port == nil {
		if err := d.newPort(); err != nil {
			return err
		}
	}
	for try := 1; ; try++ {
		err := d.launch(ctx)
		if !errors.Is(err, errPortTaken) || try == portTries {
			return err
		}
		fmt.Fprintf(d.logs, "--- %v; launching again on another port\n", err)
		if err := d.newPort(); err != nil {
			return err
		}
	}
}

// portTries is how many ports launchHeld tries before it gives up.
const portTries = 3

// errPortTaken is a launch whose port another program held when the process failed to answer.
var errPortTaken = errors.New("another program listens on the port the system was to bind")

// A port for a process SUT is one the SUT must bind itself, from the configuration: a command the
// kit runs has no way to report a port of its own choosing. So the kit picks the port, and keeps
// the gap between its check that the port is free and the SUT's bind from being taken:
//   - ports come from 20000-32000, below the kernel's ephemeral range (32768 and up by default on
//     Linux), where port-0 listeners (worlds, in-process SUTs, the nodes' front) and outgoing
//     connections get theirs;
//   - a port handed out in this run is not handed out again in it;
//   - on Linux a reservation is an abstract Unix socket named after the port, which other kit
//     processes on the machine (another run, another package's tests) see and skip; the kernel
//     frees it when the reservation is released or the process ends, so none is left behind;
//   - a program outside the kit that binds a port of that range by itself can still take it;
//     launch then finds the port held when the SUT fails to answer, and launchHeld moves the SUT
//     to another port instead of blaming it.
var (
	portMu   sync.Mutex
	portUsed = map[int]bool{}
)

// portReservation is a port of 127.0.0.1 handed to a process SUT, and what holds it against
// other kit processes (nil where there is no such hold).
type portReservation struct {
	port string
	hold net.Listener
}

// release lets other kit processes take the port again (this run never hands it out again).
func (r *portReservation) release() {
	if r.hold != nil {
		_ = r.hold.Close()
		r.hold = nil
	}
}

// reservePort picks a port of 20000-32000 that is free now and reserves it.
func reservePort() (*portReservation, error) {
	return reservePortIn(20000, 32000)
}

// reservePortIn picks a port of [lo, hi) that no one listens on now, that this run has not handed
// out, and that no other kit process holds, and reserves it.
func reservePortIn(lo, hi int) (*portReservation, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		p := lo + mrand.IntN(hi-lo)
		if portUsed[p] {
			continue
		}
		hold, err := holdPort(p)
		if err != nil {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			if hold != nil {
				hold.Close()
			}
			continue
		}
		ln.Close()
		portUsed[p] = true
		return &portReservation{port: strconv.Itoa(p), hold: hold}, nil
	}
	return nil, fmt.Errorf("no free port between %d and %d", lo, hi-1)
}

// holdPort reserves port p against other kit processes: on Linux by binding the abstract Unix
// socket @loomcheck-port-P (an error when another process holds it); elsewhere it holds nothing.
// The caller holds portMu.
func holdPort(p int) (net.Listener, error) {
	if runtime.GOOS != "linux" {
		return nil, nil
	}
	return net.Listen("unix", portHoldPrefix+strconv.Itoa(p))
}

// portHoldPrefix names the abstract Unix sockets that reserve ports (guarded by portMu).
var portHoldPrefix = "@loomcheck-port-"

// heldByOther reports whether a listen on addr fails because the address is in use: called once
// the SUT is gone, it means another program took the port.
func heldByOther(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.EADDRINUSE)
	}
	ln.Close()
	return false
}

func (d *process) launch(ctx context.Context) error {
	b, _ := json.MarshalIndent(d.cfg, "", "  ")
	path := filepath.Join(d.dir, "loom-config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return harnessErr("write config: %v", err)
	}
	cmd := exec.Command("/bin/sh", "-c", d.command)
	cmd.Env = append(os.Environ(), "LOOM_CONFIG="+path)
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return harnessErr("launch %q: %v", d.command, err)
	}
	d.cmd = cmd
	d.exited = make(chan struct{})
	go func(c *exec.Cmd, ch chan struct{}) { d.exitErr = c.Wait(); close(ch) }(cmd, d.exited)
	wait := d.ready
	if wait <= 0 {
		wait = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	// No keep-alive: an idle probe connection would hold one of the system's connection slots.
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		resp, err := hc.Get(d.URL() + "/.well-known/loom")
		if err == nil {
			// Any HTTP answer means it is serving (a Host rule may refuse the probe itself).
			resp.Body.Close()
			return nil
		}
		select {
		case <-d.exited:
			if heldByOther(d.cfg.Listen) {
				return harnessErr("%w (%s) when it exited before answering", errPortTaken, d.cfg.Listen)
			}
			// What it printed follows (logsOf), once.
			how := "it exited before answering"
			if d.exitErr != nil {
				how += " (" + d.exitErr.Error() + ")"
			}
			return &StartError{err: errors.New(how + "; " + d.knocked())}
		case <-ctx.Done():
			d.kill()
			if heldByOther(d.cfg.Listen) {
				return harnessErr("%w (%s) when it had not answered within %s", errPortTaken, d.cfg.Listen, wait)
			}
			return &StartError{err: fmt.Errorf("it did not answer GET /.well-known/loom within %s; %s", wait, d.knocked())}
		case <-tick.C:
		}
	}
}

func (d *process) URL() string { return "http://" + d.cfg.Listen }

// knocked says where the kit looked for the system: the address it wrote as "listen" in the
// configuration file LOOM_CONFIG names, which the system must serve HTTP on.
func (d *process) knocked() string {
	return fmt.Sprintf("the kit knocked on %s/.well-known/loom, the \"listen\" address (%s) it wrote in the configuration file $LOOM_CONFIG names; the system must serve HTTP there", d.URL(), d.cfg.Listen)
}

func (d *process) kill() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	<-d.exited
	d.cmd = nil
}

func (d *process) Crash() error { d.kill(); return nil }

func (d *process) Restart(ctx context.Context) error {
	d.kill()
	return d.launchHeld(ctx)
}

func (d *process) Stop() error {
	defer d.releasePort()
	if d.cmd == nil || d.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		d.kill()
	}
	d.cmd = nil
	return nil
}

func (d *process) Logs() string { return d.logs.String() }

func (d *process) Reconfigure(cfg sutconfig.SUTConfig) {
	cfg.Listen = d.cfg.Listen
	d.cfg = cfg
}

// remote is a running system the kit cannot configure, crash or restart.
type remote struct{ url string }

func (d *remote) Start(ctx context.Context, cfg sutconfig.SUTConfig) error { return nil }
func (d *remote) URL() string                                              { return d.url }
func (d *remote) Crash() error {
	return &HarnessError{Err: fmt.Errorf("%w: a remote target cannot be crashed", ErrNotApplicable)}
}
func (d *remote) Restart(ctx context.Context) error { return d.Crash() }
func (d *remote) Stop() error                       { return nil }
func (d *remote) Logs() string                      { return "" }
func (d *remote) Reconfigure(sutconfig.SUTConfig)   {}

// ringBuffer keeps the last n bytes written to it.
type ringBuffer struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newRingBuffer(n int) *ringBuffer { return &ringBuffer{n: n} }

func (r *ringBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > r.n {
		r.buf = append([]byte(nil), r.buf[len(r.buf)-r.n:]...)
	}
	return len(p), nil
}

func (r *ringBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(bytes.ToValidUTF8(r.buf, nil))
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
