package steps

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// answerLog keeps what the newest answer about the scenario's executions said of the node that
// served it (Loom-Node), and the newest GET that drew such an answer, to ask again once that
// node is gone. The discovery document names the node that received it, not an owner, so its
// answers are not kept. Safe for concurrent use.
type answerLog struct {
	mu    sync.Mutex
	node  string
	probe *http.Request
	// pinned is the node whose own address the scenario sends its requests to (pin), and
	// pinnedHost that address's host:port; sent counts the answers that came from there, and
	// hops are those among them that named no node or another one.
	pinned, pinnedHost string
	sent               int
	hops               []string
}

// pin starts counting the answers that come from host, each of which must name node.
func (l *answerLog) pin(node, host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pinned, l.pinnedHost, l.sent, l.hops = node, host, 0, nil
}

// pinnedAnswers are how many answers came from the pinned node's address since pin, and the
// requests among them whose answer named another node (or none).
func (l *answerLog) pinnedAnswers() (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, append([]string(nil), l.hops...)
}

// note keeps node as the newest answer's, and req as the probe when it is a GET.
func (l *answerLog) note(node string, req *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pinnedHost != "" && req.URL.Host == l.pinnedHost {
		l.sent++
		if node != l.pinned {
			l.hops = append(l.hops, fmt.Sprintf("%s %s named %q", req.Method, req.URL.Path, node))
		}
	}
	if node == "" || req.URL.Path == "/.well-known/loom" {
		return
	}
	l.node = node
	if req.Method == http.MethodGet {
		l.probe = &http.Request{Method: http.MethodGet, URL: req.URL, Header: req.Header.Clone()}
	}
}

// newest is the node of the newest answer ("" before any) and the newest GET (nil before any).
func (l *answerLog) newest() (string, *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.node, l.probe
}

// recordingTransport notes in log the serving node of every answer base carries.
type recordingTransport struct {
	base http.RoundTripper
	log  *answerLog
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		t.log.note(resp.Header.Get(nodeHeader), req)
	}
	return resp, err
}

// ownerCrasher is a driver that can crash the node an answer named, not only the one it finds
// itself.
type ownerCrasher interface {
	// crashOwner kills the node named node (the one that served the newest answer about the
	// scenario's execution: the owner of its partition), probe being the newest GET about it
	// (nil: none), which a restart asks again until another node answers it.
	crashOwner(node string, probe *http.Request) error
}

// crashOwner SIGKILLs the running node named node; an unknown name crashes the lease holder,
// as Crash does.
func (d *nodes) crashOwner(node string, probe *http.Request) error {
	for _, p := range d.procs {
		if p.cmd != nil && p.cfg.Node.ID == node {
			p.kill()
			d.killed, d.probe = node, probe
			d.front.set(d.addrs())
			return nil
		}
	}
	return d.Crash()
}

// takenOver waits until a running node other than the one killed answers the probe of the
// crashed execution itself (its Loom-Node names another, and the answer is neither 421 nor a
// 5xx): that node then owns the execution's partition and has recovered it. Without a probe
// it waits only for a running node to answer (holder).
func (d *nodes) takenOver(ctx context.Context) error {
	if _, err := d.holder(); err != nil {
		return err
	}
	if d.probe == nil || d.killed == "" {
		return nil
	}
	hc := &http.Client{Timeout: 4*d.lease + 10*time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(4*d.lease + 20*time.Second)
	var last string
	for time.Now().Before(deadline) {
		for _, addr := range d.addrs() {
			u := *d.probe.URL
			u.Host = addr
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
			if err != nil {
				return err
			}
			req.Header = d.probe.Header.Clone()
			resp, err := hc.Do(req)
			if err != nil {
				last = err.Error()
				continue
			}
			// A stream's answer is judged by its head alone.
			resp.Body.Close()
			served := resp.Header.Get(nodeHeader)
			if served != "" && served != d.killed && resp.StatusCode != http.StatusMisdirectedRequest && resp.StatusCode < 500 {
				return nil
			}
			last = fmt.Sprintf("%s answered %d from %q", addr, resp.StatusCode, served)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("no other node served %s after %s was killed; the last answer: %s", d.probe.URL.Path, d.killed, last)
}

// nodeSet is a driver that runs the system as several nodes: it says how many, with which
// node.partitions, and where each running node answers on its own (besides the one address in
// front of all of them).
type nodeSet interface {
	// shape is how many nodes the system runs as, and their node.partitions (0: not set).
	shape() (nodes, partitions int)
	// nodeURLs maps the name of every running node (what its answers carry in Loom-Node) to
	// its own address, "http://host:port".
	nodeURLs() map[string]string
}

func (d *nodes) shape() (int, int) { return d.n, d.partitions }

func (d *nodes) nodeURLs() map[string]string {
	out := map[string]string{}
	for _, p := range d.procs {
		if p.cmd != nil {
			out[p.cfg.Node.ID] = p.URL()
		}
	}
	return out
}
