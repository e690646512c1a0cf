package steps

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// nodeHeader is the response header naming the node that served a request (spec/nodes.md).
const nodeHeader = "Loom-Node"

// nodes runs a process SUT as several nodes on one database behind one address (spec/nodes.md):
// a front of the kit's own accepts every connection at the configured listen address and hands
// it to the next live node in turn. A crash SIGKILLs the node that holds the lease (the one
// whose answers carry its name in Loom-Node), so that another must take the executions over;
// a restart waits until another node serves as the holder, then launches the killed node again,
// as a follower. The nodes start at once; a changed configuration restarts every node.
type nodes struct {
	command string
	n       int
	lease   time.Duration
	// partitions is every node's node.partitions (0: not set).
	partitions int
	dir        string
	cfg        sutconfig.SUTConfig
	procs      []*process
	front      *front
	// stale: Reconfigure changed the configuration since the nodes were launched.
	stale bool
	// killed names the node crashOwner killed last, and probe is the newest GET about the
	// execution it served (nil: none): a restart waits until another node answers it.
	killed string
	probe  *http.Request
}

// settingLimits is a driver that cannot honour some settings of the configuration document: a
// scenario that sets one, or counts on it, is not applicable there, for the driver's reason.
type settingLimits interface {
	// unhonoured returns the not-applicable verdict of a scenario that sets path (a JSON path of
	// the configuration document), or nil when the driver honours it.
	unhonoured(path string) error
}

// processLimits is a driver that runs the system as several processes each serving some of its
// executions: a rule counted per process (a warning given once per process) cannot be judged
// through one address, since which process serves a request is not the scenario's to choose.
type processLimits interface {
	// perProcess returns the not-applicable verdict of a scenario that judges such a rule, or nil
	// when one process serves every execution at a time.
	perProcess() error
}

// perProcess: at several partitions the nodes serve the executions at once, each from its own
// process; at one partition the lease holder serves them all.
func (d *nodes) perProcess() error {
	if d.partitions > 1 {
		return &HarnessError{Err: fmt.Errorf("%w: %d nodes of %d partitions serve the executions from %d processes at once, and which one serves a request is not the scenario's to choose", ErrNotApplicable, d.n, d.partitions, d.n)}
	}
	return nil
}

// unhonoured: the connection cap (gateway.maxConnections) is each node's own, so one address in
// front of n nodes admits n times it; and with a cap that small, the kit's own connections to the
// nodes and the nodes' forwards could take its slots first.
func (d *nodes) unhonoured(path string) error {
	if path == "gateway.maxConnections" {
		return &HarnessError{Err: fmt.Errorf("%w: the connection cap is each node's own, so one address in front of %d nodes admits %d times it", ErrNotApplicable, d.n, d.n)}
	}
	return nil
}

func (d *nodes) Start(ctx context.Context, cfg sutconfig.SUTConfig) error {
	if cfg.Storage.URL == "" {
		return harnessErr("nodes share a database, and the scenario has none (Options.Databases)")
	}
	// The front is the kit's own listener: it binds a port of the kernel's choosing and keeps it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return harnessErr("listen for the nodes' front: %v", err)
	}
	cfg.Listen = ln.Addr().String()
	d.cfg = cfg
	d.procs = make([]*process, d.n)
	for i := range d.procs {
		dir := filepath.Join(d.dir, "node-"+strconv.Itoa(i+1))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			ln.Close()
			return harnessErr("node directory: %v", err)
		}
		d.procs[i] = &process{command: d.command, dir: dir, logs: newRingBuffer(32 << 10)}
	}
	d.front = newFront(ln)
	return d.launchAll(ctx)
}

// nodeConfig is the configuration of node i: the shared one, with the node's own name and data
// directory; launchNode gives it its own address.
func (d *nodes) nodeConfig(i int) sutconfig.SUTConfig {
	c := d.cfg
	c.Listen = ""
	c.DataDir = d.cfg.DataDir + "-node-" + strconv.Itoa(i+1)
	c.Node = sutconfig.NodeConfig{ID: "node-" + strconv.Itoa(i+1), LeaseMs: int(d.lease.Milliseconds()), Partitions: d.partitions}
	return c
}

// launchAll launches every node at once: whichever is granted the lease first leads, and the
// others follow it. Each launch ends once its node answers, which a follower does once some node
// leads; one after the other, the scenario would wait for every node's start in turn. The first
// launch that failed, in the nodes' order, is the answer (the nodes that started are stopped
// with the others at Stop).
func (d *nodes) launchAll(ctx context.Context) error {
	errs := make([]error, len(d.procs))
	var wg sync.WaitGroup
	for i, p := range d.procs {
		wg.Go(func() { errs[i] = d.launchNode(ctx, i, p) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	d.stale = false
	d.front.set(d.addrs())
	return nil
}

// addrs are the addresses of the nodes that run.
func (d *nodes) addrs() []string {
	var out []string
	for _, p := range d.procs {
		if p.cmd != nil {
			out = append(out, p.cfg.Listen)
		}
	}
	return out
}

func (d *nodes) URL() string { return "http://" + d.cfg.Listen }

// holder is the index of the node that holds the lease, as the running nodes themselves answer
// (a follower's answer waits, bounded, until some node holds it). An answer cut on its way (a
// follower whose holder just died may end the connection as the holder's crash did) is asked
// again, a few times.
func (d *nodes) holder() (int, error) {
	hc := &http.Client{Timeout: 4*d.lease + 10*time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	for try := range holderTries {
		if try > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		for _, p := range d.procs {
			if p.cmd == nil {
				continue
			}
			resp, err := hc.Get("http://" + p.cfg.Listen + "/.well-known/loom")
			if err != nil {
				last = err
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			name := resp.Header.Get(nodeHeader)
			for j, q := range d.procs {
				if q.cmd != nil && q.cfg.Node.ID == name {
					return j, nil
				}
			}
			last = fmt.Errorf("%s answered %d naming %q", p.cfg.Node.ID, resp.StatusCode, name)
		}
	}
	return 0, fmt.Errorf("no running node names a lease holder in its answers (Loom-Node); the last answer: %v", last)
}

// holderTries is how many times holder asks the running nodes before it gives up.
const holderTries = 3

func (d *nodes) Crash() error {
	i, err := d.holder()
	if err != nil {
		return harnessErr("find the node to crash: %v", err)
	}
	d.procs[i].kill()
	d.front.set(d.addrs())
	return nil
}

func (d *nodes) Restart(ctx context.Context) error {
	if d.stale {
		for _, p := range d.procs {
			p.kill()
		}
		return d.launchAll(ctx)
	}
	if len(d.addrs()) == len(d.procs) {
		// A restart without a crash first: the holder goes down and comes back.
		if err := d.Crash(); err != nil {
			return err
		}
	}
	// The killed node, launched again at once, would take its own lease back at once (it is
	// the same holder); the executions are to be taken over by another node, so it comes back
	// only once one of the others serves as the holder, and serves the crashed execution.
	if err := d.takenOver(ctx); err != nil {
		return harnessErr("no other node took the executions over: %v", err)
	}
	d.killed, d.probe = "", nil
	for i, p := range d.procs {
		if p.cmd != nil {
			continue
		}
		if err := d.launchNode(ctx, i, p); err != nil {
			return err
		}
	}
	d.front.set(d.addrs())
	return nil
}

// launchNode launches node i on a port of its own, a new one each time (the process driver's
// reservation: launchHeld).
func (d *nodes) launchNode(ctx context.Context, i int, p *process) error {
	p.cfg = d.nodeConfig(i)
	if err := p.newPort(); err != nil {
		return err
	}
	return p.launchHeld(ctx)
}

func (d *nodes) Stop() error {
	var wg sync.WaitGroup
	for _, p := range d.procs {
		wg.Go(func() { _ = p.Stop() })
	}
	wg.Wait()
	if d.front != nil {
		d.front.close()
	}
	return nil
}

func (d *nodes) Logs() string {
	var b strings.Builder
	for i, p := range d.procs {
		if p == nil || p.logs == nil {
			continue
		}
		if l := p.logs.String(); l != "" {
			fmt.Fprintf(&b, "[node-%d] %s\n", i+1, l)
		}
	}
	return b.String()
}

func (d *nodes) Reconfigure(cfg sutconfig.SUTConfig) {
	cfg.Listen = d.cfg.Listen
	d.cfg = cfg
	d.stale = true
}

// front hands each connection it accepts to the next of its addresses that takes it, and
// copies bytes both ways until either side closes.
type front struct {
	ln    net.Listener
	mu    sync.Mutex
	addrs []string
	next  int
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newFront(ln net.Listener) *front {
	f := &front{ln: ln, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.accept)
	return f
}

func (f *front) set(addrs []string) {
	f.mu.Lock()
	f.addrs = addrs
	f.mu.Unlock()
}

func (f *front) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Go(func() { f.pipe(c) })
	}
}

// pipe connects c to a node: the next in turn, or the ones after it if it does not answer.
func (f *front) pipe(c net.Conn) {
	f.mu.Lock()
	addrs := append([]string(nil), f.addrs...)
	start := f.next
	f.next++
	f.mu.Unlock()
	var up net.Conn
	for k := range addrs {
		a := addrs[(start+k)%len(addrs)]
		u, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err == nil {
			up = u
			break
		}
	}
	if up == nil {
		c.Close()
		return
	}
	if !f.track(c, up) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
	f.untrack(c, up)
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

// track records an open pair, unless the front is closed (then it closes them).
func (f *front) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *front) untrack(cs ...net.Conn) {
	f.mu.Lock()
	for _, c := range cs {
		c.Close()
		delete(f.conns, c)
	}
	f.mu.Unlock()
}

// close stops accepting and ends every connection.
func (f *front) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}
