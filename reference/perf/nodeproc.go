package perf

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/reference/server"
	"github.com/loomcheck/loomcheck/reference/store"
	"github.com/loomcheck/loomcheck/reference/store/postgres"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// loomNode is one `loom` process running as a node of a shared database.
type loomNode struct {
	id     string
	cmd    *exec.Cmd
	pid    int
	t      *target
	exited chan struct{}
	logs   *syncBuffer
}

// buildLoom builds cmd/loom into the figure's directory (a *skipError without a module or one
// without cmd/loom).
func buildLoom(e *env) (string, error) {
	goBin, mod, err := moduleDir(e)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(mod, "cmd", "loom")); err != nil {
		return "", &skipError{fmt.Sprintf("no cmd/loom in %s", mod)}
	}
	bin := filepath.Join(e.dir, "loom")
	if err := build(e.ctx, goBin, mod, bin, "./cmd/loom"); err != nil {
		return "", err
	}
	return bin, nil
}

// nodeSpec is how a figure's nodes run: the database, the partitions, the lease, and the
// environment each process gets beside the bench's (GOMAXPROCS=1).
type nodeSpec struct {
	bin        string
	url        string
	partitions int
	lease      time.Duration
	env        []string
}

// startLoomNode execs node id of s on a loopback port picked for it, with a data directory of
// its own, and returns once it answers GET /.well-known/loom. A port another program took in
// between is picked again, a few times.
func (e *env) startLoomNode(s nodeSpec, id string) (*loomNode, error) {
	var last error
	for range 3 {
		n, err := e.tryLoomNode(s, id)
		if err == nil {
			return n, nil
		}
		last = err
	}
	return nil, last
}

func (e *env) tryLoomNode(s nodeSpec, id string) (*loomNode, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := filepath.Join(e.dir, "node-"+id)
	cfg := engineConfig(dir, s.url)
	cfg.Listen = addr
	cfg.Node = sutconfig.NodeConfig{ID: id, Advertise: "http://" + addr, LeaseMs: int(s.lease.Milliseconds()), Partitions: s.partitions}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	conf := dir + ".json"
	if err := os.WriteFile(conf, b, 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(s.bin, "--config", conf)
	cmd.Env = append(os.Environ(), s.env...)
	logs := &syncBuffer{}
	cmd.Stderr = logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &loomNode{id: id, cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{}), logs: logs}
	serving := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, ok := server.ServingAddr(sc.Text()); ok {
				select {
				case serving <- struct{}{}:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(n.exited)
	}()
	tr := newTransport()
	n.t = &target{base: "http://" + addr, hc: &http.Client{Transport: tr}, tr: tr, stop: func() error { n.stop(); return nil }}
	select {
	case <-serving:
	case <-n.exited:
		return nil, fmt.Errorf("loom node %s ended before it served: %s", id, lastLines(logs.String(), 5))
	case <-time.After(stallGuard):
		n.kill()
		return nil, fmt.Errorf("loom node %s printed no serving line in %v", id, stallGuard)
	}
	return n, nil
}

// lastLines is the last k lines of s.
func lastLines(s string, k int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-k):], "\n")
}

// kill SIGKILLs the node (let go first if a budget stopped it) and waits for it.
func (n *loomNode) kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.t.tr.CloseIdleConnections()
}

// stop ends the node with SIGTERM, as an operator would, and waits for it.
func (n *loomNode) stop() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.t.tr.CloseIdleConnections()
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(stallGuard):
		n.kill()
	}
}

// stopNodes stops every node, at once.
func stopNodes(ns []*loomNode) {
	done := make(chan struct{}, len(ns))
	for _, n := range ns {
		go func() { n.stop(); done <- struct{}{} }()
	}
	for range ns {
		<-done
	}
}

// waitPartitionsShared waits until the partition leases of the database at url are all held,
// by exactly the nodes ids, each holding its even share (p / len(ids), when it divides), and
// two readings in a row agree; it returns the holder of each partition.
func (e *env) waitPartitionsShared(url string, p int, ids []string) (map[string]string, error) {
	st, err := postgres.Open(e.ctx, url, postgres.Options{Conns: 1})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	deadline := time.Now().Add(stallGuard)
	var prev map[string]string
	for {
		cur, err := partitionHolders(e, st)
		if err != nil {
			return nil, err
		}
		if shared(cur, p, ids) && equalMaps(prev, cur) {
			return cur, nil
		}
		prev = cur
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the partitions were not shared out between %v within %v: %v", ids, stallGuard, cur)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// partitionHolders is the live holder of each partition lease, by lease name.
func partitionHolders(e *env, st store.Leases) (map[string]string, error) {
	ls, err := st.Grants(e.ctx, "partition/")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	now := time.Now()
	for _, l := range ls {
		if l.Holder != "" && l.Expires.After(now) {
			out[l.Name] = l.Holder
		}
	}
	return out, nil
}

// shared reports whether holders has p partitions, each held by one of ids, each id holding
// p / len(ids) of them.
func shared(holders map[string]string, p int, ids []string) bool {
	if len(holders) != p {
		return false
	}
	count := map[string]int{}
	for _, h := range holders {
		if !slices.Contains(ids, h) {
			return false
		}
		count[h]++
	}
	for _, id := range ids {
		if p%len(ids) == 0 && count[id] != p/len(ids) {
			return false
		}
		if count[id] == 0 {
			return false
		}
	}
	return true
}

func equalMaps(a, b map[string]string) bool {
	if a == nil || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
