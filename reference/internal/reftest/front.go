package reftest

import (
	"net"
	"sync"
)

// front is the loopback address a served engine is reached at for the whole test. A restart
// serves the new engine behind the same listener, so no port is closed and bound again (another
// program could take it in between). While no engine is served, a connection is accepted and
// closed at once, as a stopped server's port would refuse it.
type front struct {
	ln net.Listener
	mu sync.Mutex
	to *handoff // the listener of the engine served now; nil while none is
}

func newFront() (*front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &front{ln: ln}
	go f.run()
	return f, nil
}

func (f *front) run() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return // the front is closed: the test has ended
		}
		f.mu.Lock()
		h := f.to
		f.mu.Unlock()
		if h == nil || !h.give(c) {
			_ = c.Close()
		}
	}
}

// serve gives the connections that arrive from now on to a new listener for an engine to serve.
func (f *front) serve() net.Listener {
	h := &handoff{addr: f.ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	f.mu.Lock()
	f.to = h
	f.mu.Unlock()
	return h
}

// stop closes the listener served now, once its engine no longer serves it.
func (f *front) stop() {
	f.mu.Lock()
	h := f.to
	f.to = nil
	f.mu.Unlock()
	if h != nil {
		_ = h.Close()
	}
}

func (f *front) close() error { return f.ln.Close() }

// handoff is the listener an engine serves: its connections are those the front accepted while
// it was the front's.
type handoff struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }

// give hands c to the engine serving h, and reports false when h was closed first.
func (h *handoff) give(c net.Conn) bool {
	select {
	case h.conns <- c:
		return true
	case <-h.done:
		return false
	}
}
