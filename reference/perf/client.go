package perf

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// stallGuard bounds every wait for an answer or an event, so that a broken server fails the run
// instead of hanging it. It is a deadlock guard, not a speed target.
const stallGuard = time.Minute

// users is the number of principals an engine of the figures knows (token i is user i).
const users = 128

// target is a server the figures talk to over loopback HTTP: an engine, a node, or a bare server
// answering the same routes.
type target struct {
	base string
	hc   *http.Client
	tr   *http.Transport
	stop func() error
}

// close stops the server and drops the client's idle connections.
func (t *target) close() error {
	t.tr.CloseIdleConnections()
	return t.stop()
}

func newTransport() *http.Transport {
	return &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 30 * time.Second,
		DisableCompression: true, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
}

// token is the bearer token of user i.
func token(i int) string { return fmt.Sprintf("perf-user-%d", i%users) }

// engineConfig is the configuration of an engine of the figures: the kit's configuration
// document with users principals, the built-in model, and the limits a load test raises (posts
// per minute, streams per principal, connections).
func engineConfig(dir, storeURL string) sutconfig.SUTConfig {
	cfg := sutconfig.SUTConfig{Listen: "127.0.0.1:0", DataDir: dir,
		Signing: sutconfig.SigningConfig{Key: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, 32))},
		Gateway: sutconfig.GatewayConfig{PostsPerMinute: 1 << 30, MaxStreams: 1 << 16, MaxStreamsPerPrincipal: 1 << 16,
			MaxConnections: 1 << 16},
		Identity: sutconfig.IdentityConfig{Principals: map[string]sutconfig.Principal{}}}
	cfg.Storage.URL = storeURL
	for i := range users {
		cfg.Identity.Principals[token(i)] = sutconfig.Principal{Tenant: "perf", Actor: fmt.Sprintf("user-%d", i)}
	}
	return cfg
}

// options are the engine options of engineConfig, with provider (nil: the built-in model) and
// the figure's log for the engine's warnings.
func (e *env) options(dir, storeURL string, provider model.Provider) (reference.Options, error) {
	opt, err := reference.FromConfig(engineConfig(dir, storeURL))
	if err != nil {
		return opt, err
	}
	if provider != nil {
		opt.Deps.Provider = provider
	}
	opt.Logger = slog.New(slog.NewTextHandler(e.cfg.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return opt, nil
}

// openEngine opens an engine on dir (or, with storeURL, on that database) and serves it on a
// loopback port.
func (e *env) openEngine(dir, storeURL string, provider model.Provider, tweak ...func(*reference.Options)) (*target, *reference.Engine, error) {
	opt, err := e.options(dir, storeURL, provider)
	if err != nil {
		return nil, nil, err
	}
	for _, f := range tweak {
		f(&opt)
	}
	eng, err := reference.Open(e.ctx, opt)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		return nil, nil, err
	}
	go func() { _ = eng.Serve(ln) }()
	tr := newTransport()
	return &target{base: "http://" + ln.Addr().String(), hc: &http.Client{Transport: tr}, tr: tr, stop: eng.Close}, eng, nil
}

// serveHandler serves h on a loopback port (a bare server).
func serveHandler(h http.Handler) (*target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tr := newTransport()
	stop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Open event streams never end by themselves: they are cut.
		if err := srv.Shutdown(ctx); err != nil {
			return srv.Close()
		}
		return nil
	}
	return &target{base: "http://" + ln.Addr().String(), hc: &http.Client{Transport: tr}, tr: tr, stop: stop}, nil
}

// do sends one request as user, reads the whole answer and returns its status, body and header.
func (t *target) do(ctx context.Context, user int, method, path, body string) (int, []byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, stallGuard)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.base+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token(user))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// conv is one conversation as its owner's client sees it, with its event stream once listening.
type conv struct {
	t     *target
	user  int
	id    string
	turns int64 // the newest turn this client knows of
	ev    *sseStream
}

// newConv starts a conversation of user.
func (t *target) newConv(ctx context.Context, user int) (*conv, error) {
	c, _, err := t.newConvAt(ctx, user)
	return c, err
}

// newConvAt starts a conversation of user and returns the node that served the creation (its
// answer's Loom-Node header; empty from a server that is no node).
func (t *target) newConvAt(ctx context.Context, user int) (*conv, string, error) {
	return t.newConvWith(ctx, user, "{}")
}

// newConvWith is newConvAt with the creation's body (a chosen id: {"id": "..."}).
func (t *target) newConvWith(ctx context.Context, user int, body string) (*conv, string, error) {
	code, b, h, err := t.do(ctx, user, http.MethodPost, "/conversations", body)
	if err != nil {
		return nil, "", fmt.Errorf("POST /conversations: %w", err)
	}
	if code != http.StatusCreated && code != http.StatusOK {
		return nil, "", fmt.Errorf("POST /conversations: status %d: %s", code, b)
	}
	var st struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.ID == "" {
		return nil, "", fmt.Errorf("POST /conversations: %q: %v", b, err)
	}
	return &conv{t: t, user: user, id: st.ID}, h.Get(reference.NodeHeader), nil
}

// listen opens the conversation's event stream and reads its first event (the status, which
// says how many turns it has).
func (c *conv) listen(ctx context.Context) error {
	s, err := c.t.events(ctx, c.user, "/conversations/"+c.id+"/events")
	if err != nil {
		return err
	}
	ev, err := s.next()
	if err != nil {
		s.close()
		return err
	}
	var st struct {
		Turns int64 `json:"turns"`
	}
	if ev.name != "status" || json.Unmarshal(ev.data, &st) != nil {
		s.close()
		return fmt.Errorf("events of %s: first event %s %s, want the status", c.id, ev.name, ev.data)
	}
	c.turns, c.ev = st.Turns, s
	return nil
}

// stop closes the event stream.
func (c *conv) stop() {
	if c.ev != nil {
		c.ev.close()
		c.ev = nil
	}
}

// send posts one turn and checks it was delivered; the turn is then c.turns.
func (c *conv) send(ctx context.Context, text string) error {
	_, err := c.sendVia(ctx, c.t, text)
	return err
}

// sendVia posts one turn through via (the conversation's own server, or another node) and
// checks it was delivered; the turn is then c.turns. It returns the node that served it (the
// answer's Loom-Node header).
func (c *conv) sendVia(ctx context.Context, via *target, text string) (string, error) {
	body, _ := json.Marshal(map[string]string{"text": text})
	code, b, h, err := via.do(ctx, c.user, http.MethodPost, "/conversations/"+c.id+"/turns", string(body))
	if err != nil {
		return "", fmt.Errorf("POST turn: %w", err)
	}
	var res struct {
		Delivered bool `json:"delivered"`
	}
	if code != http.StatusAccepted || json.Unmarshal(b, &res) != nil || !res.Delivered {
		return "", fmt.Errorf("POST turn to %s: status %d: %s", c.id, code, b)
	}
	c.turns++
	return h.Get(reference.NodeHeader), nil
}

// turn posts a turn and waits on the event stream for its complete reply, returning the time
// from the POST to the reply's arrival.
func (c *conv) turn(ctx context.Context, text string) (time.Duration, error) {
	start := time.Now()
	if err := c.send(ctx, text); err != nil {
		return 0, err
	}
	if _, err := c.reply(nil); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// entry is the part of a transcript record the figures read.
type entry struct {
	Turn   int64  `json:"turn"`
	Role   string `json:"role"`
	Status string `json:"status"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
}

// reply reads events until the durable reply of turn c.turns and returns it, handing every
// delta met on the way to onDelta. A reply other than complete, and an event that ends or
// resets the stream, are errors.
func (c *conv) reply(onDelta func(ev sseEvent) error) (sseEvent, error) {
	for {
		ev, err := c.ev.next()
		if err != nil {
			return ev, fmt.Errorf("events of %s: %w", c.id, err)
		}
		switch ev.name {
		case "delta":
			if onDelta != nil {
				if err := onDelta(ev); err != nil {
					return ev, err
				}
			}
		case "message":
			var e entry
			if err := json.Unmarshal(ev.data, &e); err != nil {
				return ev, fmt.Errorf("events of %s: message %s: %w", c.id, ev.data, err)
			}
			if e.Role != "assistant" || e.Turn != c.turns {
				continue
			}
			if e.Status != "complete" {
				return ev, fmt.Errorf("conversation %s: turn %d ended %s (%s)", c.id, e.Turn, e.Status, e.Reason)
			}
			return ev, nil
		case "error", "closed", "reconnect", "reset":
			return ev, fmt.Errorf("events of %s: unexpected %s event: %s", c.id, ev.name, ev.data)
		}
	}
}

// origin is the clock origin of stamps: offsets from it on the monotonic clock.
var origin = time.Now()

// stamp is now as an offset from origin.
func stamp() time.Duration { return time.Since(origin) }

// sseEvent is one event of a stream, stamped when its data line was read off the wire.
type sseEvent struct {
	name string
	data []byte
	at   time.Duration
}

// sseStream reads one Server-Sent Events stream.
type sseStream struct {
	body   io.ReadCloser
	r      *bufio.Reader
	cancel context.CancelFunc
	once   sync.Once
}

// events opens an event stream as user.
func (t *target) events(ctx context.Context, user int, path string) (*sseStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.base+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token(user))
	req.Header.Set("Accept", "text/event-stream")
	resp, err := t.hc.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: status %d: %s", path, resp.StatusCode, b)
	}
	return &sseStream{body: resp.Body, r: bufio.NewReader(resp.Body), cancel: cancel}, nil
}

// next returns the next event; a stream that stays silent for stallGuard is cut.
func (s *sseStream) next() (sseEvent, error) {
	guard := time.AfterFunc(stallGuard, s.close)
	defer guard.Stop()
	var ev sseEvent
	for {
		line, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			full := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = s.r.ReadSlice('\n')
				full = append(full, line...)
			}
			line = full
		}
		if err != nil {
			return ev, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if ev.name != "" || ev.data != nil {
				return ev, nil
			}
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.name = string(value)
			case "data":
				ev.at = stamp()
				ev.data = append(ev.data, value...)
			}
		}
	}
}

// close ends the stream.
func (s *sseStream) close() {
	s.once.Do(func() {
		s.cancel()
		s.body.Close()
	})
}
