// Package reftest opens a reference engine for a test: Open assembles it on a temporary data
// directory (or, with Postgres, on a fresh PostgreSQL database), with options for what the tests
// vary (who the callers are, the conversation configuration, the model and the other
// dependencies, whether it is served over HTTP), and closes it when the test ends. Restart opens
// it again on the same data, as a restarted process would; Kill stops it first as a crash would.
//
//	eng := reftest.Open(t, reftest.As(alice), reftest.Provider(scriptmodel.Echo("You asked: ")))
//	st, _, err := eng.Conversations().Start(ctx, alice, conversation.StartOptions{})
//	...
//	eng.Kill()
//	eng.Restart(reftest.Provider(scriptmodel.Gated()))
package reftest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/internal/conversation"
	"github.com/loomcheck/loomcheck/reference/internal/gateway"
	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Option sets what the engine is opened with.
type Option func(*settings)

type settings struct {
	dir      string
	config   *sutconfig.SUTConfig
	edits    []func(*reference.Options)
	served   bool
	postgres bool
	endKill  bool
}

// As makes the gateway take every request as who.
func As(who loomtype.Identity) Option {
	return With(func(o *reference.Options) {
		o.Gateway.Insecure = false
		o.Gateway.Authenticate = func(*http.Request) (loomtype.Identity, error) { return who, nil }
	})
}

// Tokens makes the gateway take a request with the header "Authorization: Bearer <token>" as
// ids[token]; any other request is unauthenticated.
func Tokens(ids map[string]loomtype.Identity) Option {
	return With(func(o *reference.Options) {
		o.Gateway.Insecure = false
		o.Gateway.Authenticate = func(r *http.Request) (loomtype.Identity, error) {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if who, known := ids[tok]; ok && known {
				return who, nil
			}
			return loomtype.Identity{}, gateway.ErrUnauthenticated
		}
	})
}

// Conversation edits the conversation configuration (its Keys hold the engine's signing key,
// Engine.Key, unless edit changes them).
func Conversation(edit func(c *conversation.Config)) Option {
	return With(func(o *reference.Options) { edit(&o.Conversation) })
}

// Shared lets the engine start shared conversations, run as the service principal svc.
func Shared(svc loomtype.Identity) Option {
	return Conversation(func(c *conversation.Config) { c.Shared.Service = &svc })
}

// Provider is the model the conversations complete through (the built-in one by default).
func Provider(p model.Provider) Option {
	return With(func(o *reference.Options) { o.Deps.Provider = p })
}

// Deps edits the dependencies that connect the conversations to the world.
func Deps(edit func(d *conversation.Deps)) Option {
	return With(func(o *reference.Options) { edit(&o.Deps) })
}

// With edits the engine's options directly, after the options before it.
func With(edit func(o *reference.Options)) Option {
	return func(s *settings) { s.edits = append(s.edits, edit) }
}

// Config opens the engine from the kit's configuration document, as `loomcheck serve` does
// (reference.FromConfig), in place of the rig's own defaults; the other options edit what it
// gives. An empty DataDir is the rig's, an empty signing key the rig's.
func Config(cfg sutconfig.SUTConfig) Option {
	return func(s *settings) { s.config = &cfg }
}

// Served serves the engine over HTTP (Engine.Serve, with the options' edge) on a loopback
// address, Engine.URL, held for the whole test: a restart serves the new engine at the same
// address without closing its port, and while the engine is stopped a connection there is closed
// at once.
func Served() Option { return func(s *settings) { s.served = true } }

// Dir opens the engine on the data directory dir (by default a new one in t.TempDir()): one a
// test has filled, or one another engine left.
func Dir(dir string) Option { return func(s *settings) { s.dir = dir } }

// Postgres keeps the engine's state in a fresh PostgreSQL database (pgtest.TempDatabase, on the
// server the PG* environment variables name; the test is skipped without one, and fails without
// one in CI), dropped when the test ends. A restart opens the same database.
func Postgres() Option { return func(s *settings) { s.postgres = true } }

// EndWithKill stops the engine with Kill when the test ends, in place of Close: nothing is shut
// down cleanly, and nothing waits for a request in flight.
func EndWithKill() Option { return func(s *settings) { s.endKill = true } }

// Engine is an engine opened for a test. Its methods are those of the reference.Engine it holds
// now; Restart replaces it.
type Engine struct {
	*reference.Engine
	// URL is where the engine is served ("http://127.0.0.1:port"), with Served; "" without.
	URL string
	// Dir is the data directory, StoreURL the database when the state is in PostgreSQL.
	Dir      string
	StoreURL string
	// Key is the signing key the conversations are opened with unless an option names others;
	// it is kept across restarts.
	Key []byte

	t       testing.TB
	s       settings
	front   *front // with Served: the address the engine is reached at, kept across restarts
	stopped bool
	serving chan error
}

// Open opens an engine for t with opts, and stops it when t ends (Close, whose error fails t,
// or Kill with EndWithKill) unless it was stopped already. A failure to open fails t.
func Open(t testing.TB, opts ...Option) *Engine {
	t.Helper()
	e := &Engine{t: t, Key: make([]byte, 32)}
	_, _ = rand.Read(e.Key)
	for _, o := range opts {
		o(&e.s)
	}
	switch {
	case e.s.dir != "":
		e.Dir = e.s.dir
	case e.s.config != nil && e.s.config.DataDir != "":
		e.Dir = e.s.config.DataDir
	default:
		e.Dir = filepath.Join(t.TempDir(), "data") // a first start: the directory does not exist yet
	}
	if e.s.postgres {
		e.StoreURL = pgtest.TempDatabase(t)
	}
	e.open()
	t.Cleanup(func() {
		if e.stopped {
			return
		}
		if e.s.endKill {
			e.Kill()
			return
		}
		if err := e.Close(); err != nil {
			t.Errorf("reftest: close the engine: %v", err)
		}
	})
	return e
}

// Options are the options the engine is opened with.
func (e *Engine) Options() reference.Options {
	e.t.Helper()
	var o reference.Options
	if c := e.s.config; c != nil {
		cfg := *c
		if cfg.Signing.Key == "" {
			cfg.Signing.Key = base64.StdEncoding.EncodeToString(e.Key)
		}
		cfg.DataDir = e.Dir
		var err error
		if o, err = reference.FromConfig(cfg); err != nil {
			e.t.Fatalf("reftest: the configuration: %v", err)
		}
	} else {
		o = reference.Options{Conversation: conversation.Config{Keys: [][]byte{e.Key}}, Gateway: gateway.Config{Insecure: true}}
	}
	o.DataDir = e.Dir
	if e.StoreURL != "" {
		o.StoreURL = e.StoreURL
	}
	for _, edit := range e.s.edits {
		edit(&o)
	}
	return o
}

func (e *Engine) open() {
	e.t.Helper()
	eng, err := reference.Open(context.Background(), e.Options())
	if err != nil {
		e.t.Fatalf("reftest: open the engine on %s: %v", e.Dir, err)
	}
	e.Engine, e.stopped = eng, false
	if !e.s.served {
		return
	}
	if e.front == nil {
		f, err := newFront()
		if err != nil {
			eng.Kill()
			e.stopped = true
			e.t.Fatalf("reftest: listen on a loopback port: %v", err)
		}
		e.front = f
		e.URL = "http://" + f.ln.Addr().String()
		e.t.Cleanup(func() { _ = f.close() })
	}
	ln := e.front.serve()
	e.serving = make(chan error, 1)
	go func() { e.serving <- eng.Serve(ln) }()
}

// Close closes the engine (reference.Engine.Close) and waits until it is no longer served.
func (e *Engine) Close() error {
	e.stopped = true
	err := e.Engine.Close()
	e.waitServed()
	return err
}

// Kill stops the engine as a crash would (reference.Engine.Kill) and waits until it is no
// longer served.
func (e *Engine) Kill() {
	e.stopped = true
	e.Engine.Kill()
	e.waitServed()
}

// Crash is Kill.
func (e *Engine) Crash() { e.Kill() }

// waitServed waits for Serve to return, and fails the test if it ended otherwise than by the
// engine's stop.
func (e *Engine) waitServed() {
	if e.serving == nil {
		return
	}
	e.front.stop()
	if err := <-e.serving; !errors.Is(err, reference.ErrEngineClosed) {
		e.t.Errorf("reftest: serving ended with %v", err)
	}
	e.serving = nil
}

// Restart stops the engine with Close unless it was stopped already (by Kill, say), and opens it
// again on the same data directory and database with the same options, opts added after them
// (Dir and Postgres among them change nothing: the data stays where it is); a served engine is
// served again at the same address.
func (e *Engine) Restart(opts ...Option) {
	e.t.Helper()
	if !e.stopped {
		if err := e.Close(); err != nil {
			e.t.Fatalf("reftest: close the engine before its restart: %v", err)
		}
	}
	for _, o := range opts {
		o(&e.s)
	}
	e.open()
}
