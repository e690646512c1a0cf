// Package server is the reference engine's serving command, shared by `loom` (cmd/loom, the
// engine's own binary, which links nothing of the conformance kit) and `loomcheck serve`: it reads
// the configuration document and the flags, opens the engine (or a node of several) and serves it
// until its context ends.
//
//	os.Exit(server.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, server.Hooks{}))
package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/reference/model"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// Exit statuses of Main.
const (
	// ExitOK: served until the context ended, and closed cleanly.
	ExitOK = 0
	// ExitUsage: a bad flag or configuration, or the engine could not start or close.
	ExitUsage = 2
)

// Hooks are what a binary adds to Main.
type Hooks struct {
	// Name is the command's name in messages and usage (default "loom").
	Name string
	// Validate, if set, checks the configuration document before it is decoded, listing every
	// problem it finds (loomcheck checks it against schemas/sut-config.schema.json). Without
	// it the document is decoded strictly (an unknown field is refused) and the engine checks
	// what it uses.
	Validate func(doc []byte) []string
}

// usage is what -h prints above the flags.
const usage = `usage: %s [flags]

Serves the reference engine over HTTP (spec/http.md) until interrupted, on one data directory
(or a PostgreSQL database with --store, as one of several nodes with --node: spec/nodes.md).
With no configuration it makes a bearer token for one local principal and prints how to use it;
with no model it answers with a small built-in deterministic model. Every internal error is
logged to stderr with the errorId a caller sees.
`

// Main is the serving command with args (the flags), until ctx ends. It returns the exit status:
// ExitOK after a clean close, ExitUsage on a bad flag or configuration or an engine that would
// not start. It prints where it serves to stdout, and every message of the engine to stderr.
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	os.Exit(server.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, server.Hooks{}))
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, hooks Hooks) int {
	name := hooks.Name
	if name == "" {
		name = "loom"
	}
	f, code := parseFlags(name, args, stderr)
	if f == nil {
		return code
	}
	cfg, err := f.resolve(hooks)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) && ue.lines != nil {
			fmt.Fprintf(stderr, "%s: %s\n", name, ue.msg)
			for _, l := range ue.lines {
				fmt.Fprintf(stderr, "  %s\n", l)
			}
			return ExitUsage
		}
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return ExitUsage
	}
	return serve(ctx, name, f, cfg, stdout, stderr)
}

// flags are Main's flags as parsed.
type flags struct {
	listen, dataDir, modelURL, modelName, config string
	storeURL, nodeName, advertise                string
	allowEmpty                                   bool
	delay, lease                                 time.Duration
}

// parseFlags parses args; a nil result ends Main with the code returned (help, or a usage error
// already printed).
func parseFlags(name string, args []string, stderr io.Writer) (*flags, int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usage, name)
		fmt.Fprintln(fs.Output(), "\nflags:")
		fs.PrintDefaults()
	}
	f := &flags{}
	fs.StringVar(&f.listen, "listen", "", "host:port to serve on (default 127.0.0.1:8080, or the configuration's listen)")
	fs.StringVar(&f.dataDir, "data", "", "data directory (default ./loom-data, or the configuration's dataDir)")
	fs.StringVar(&f.modelURL, "model-url", "", "an OpenAI-compatible API root (for example http://127.0.0.1:11434/v1)")
	fs.StringVar(&f.modelName, "model", "", "the model name to ask for")
	fs.BoolVar(&f.allowEmpty, "allow-empty", false, "start on a data directory that exists and holds no store, or whose store's database is gone (refused otherwise)")
	fs.StringVar(&f.config, "config", os.Getenv("LOOM_CONFIG"), "a configuration document (schemas/sut-config.schema.json); default $LOOM_CONFIG")
	fs.DurationVar(&f.delay, "builtin-delay", 0, "with the built-in model: wait this long before each streamed piece (e.g. 50ms), to watch live deltas")
	fs.StringVar(&f.storeURL, "store", "", "keep the state in this PostgreSQL database (postgres://...) instead of the data directory")
	fs.StringVar(&f.nodeName, "node", "", "with --store: run as one node of several on that database, under this name (spec/nodes.md)")
	fs.StringVar(&f.advertise, "advertise", "", "with --node: the http:// address the other nodes forward to (default http://LISTEN)")
	fs.DurationVar(&f.lease, "lease", 0, "with --node: how long the hold on the executions lasts unless renewed (default 10s)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, ExitOK
		}
		return nil, ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return nil, ExitUsage
	}
	if f.delay < 0 {
		fmt.Fprintln(stderr, name+": --builtin-delay must not be negative")
		return nil, ExitUsage
	}
	return f, ExitOK
}

// usageError is a configuration Main refuses: msg, then one indented line per problem.
type usageError struct {
	msg   string
	lines []string
}

func (e *usageError) Error() string { return e.msg }

// resolve is the configuration document (if any) with the flags over it, checked.
func (f *flags) resolve(hooks Hooks) (sutconfig.SUTConfig, error) {
	var cfg sutconfig.SUTConfig
	if f.config != "" {
		b, err := os.ReadFile(f.config)
		if err != nil {
			return cfg, err
		}
		if hooks.Validate != nil {
			if problems := hooks.Validate(b); len(problems) > 0 {
				return cfg, &usageError{msg: fmt.Sprintf("configuration %s is not a valid sut-config document:", f.config), lines: problems}
			}
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, fmt.Errorf("configuration %s: %v", f.config, err)
		}
	}
	cfg.Listen = cmp.Or(f.listen, cfg.Listen, "127.0.0.1:8080")
	cfg.DataDir = cmp.Or(f.dataDir, cfg.DataDir, "loom-data")
	cfg.Storage.URL = cmp.Or(f.storeURL, cfg.Storage.URL)
	cfg.Node.ID = cmp.Or(f.nodeName, cfg.Node.ID)
	cfg.Node.Advertise = cmp.Or(f.advertise, cfg.Node.Advertise)
	if f.lease != 0 {
		cfg.Node.LeaseMs = int(f.lease.Milliseconds())
	}
	if cfg.Node.ID == "" && (f.advertise != "" || f.lease != 0) {
		return cfg, errors.New("--advertise and --lease need --node")
	}
	cfg.Model.BaseURL = cmp.Or(f.modelURL, cfg.Model.BaseURL)
	cfg.Model.Name = cmp.Or(f.modelName, cfg.Model.Name)
	if cfg.Model.BaseURL != "" {
		if err := checkModelURL(cfg.Model.BaseURL); err != nil {
			field := "model.baseURL of " + f.config
			if f.modelURL != "" {
				field = "--model-url"
			}
			return cfg, fmt.Errorf("%s %q: %v", field, cfg.Model.BaseURL, err)
		}
	}
	if f.config != "" && cfg.Identity.URL == "" && len(cfg.Identity.Principals) == 0 && !cfg.Identity.Insecure {
		return cfg, fmt.Errorf("configuration %s configures no identity: set identity.principals or identity.url, or identity.insecure to true to serve without authentication", f.config)
	}
	if f.allowEmpty {
		cfg.Storage.AllowEmpty = true
	}
	return cfg, nil
}

// serve opens the engine (or a node) on cfg, serves it until ctx ends and closes it.
func serve(ctx context.Context, name string, f *flags, cfg sutconfig.SUTConfig, stdout, stderr io.Writer) int {
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, name+": %v\n", err)
		return ExitUsage
	}
	// A data directory that does not exist yet is a first start; one that exists and holds no
	// store is refused by the engine unless --allow-empty (or storage.allowEmpty) says so.
	_, statErr := os.Stat(cfg.DataDir)
	firstStart := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return usageErr(err)
	}
	if cfg.Signing.Key == "" {
		key, err := localKey(cfg.DataDir)
		if err != nil {
			return usageErr(err)
		}
		cfg.Signing.Key = key
	}
	var devToken string
	if f.config == "" && cfg.Identity.URL == "" && len(cfg.Identity.Principals) == 0 && !cfg.Identity.Insecure {
		// Secure by default, friendly at once: a token for one local principal.
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		devToken = "dev-" + hex.EncodeToString(b)
		cfg.Identity.Principals = map[string]sutconfig.Principal{devToken: {Tenant: "local", Actor: "you"}}
	}
	opt, err := reference.FromConfig(cfg)
	if err != nil {
		return usageErr(err)
	}
	opt.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	if firstStart {
		opt.AllowEmpty = true
	}
	if cfg.Model.BaseURL == "" && f.delay > 0 {
		opt.Deps.Provider = model.BuiltinSlow(f.delay)
	}
	srv, ln, err := openListening(ctx, cfg, opt)
	if err != nil {
		return usageErr(err)
	}
	greet(stdout, cfg, ln.Addr().String(), devToken)
	// The engine serves with its edge: the request and header deadlines and the connection cap
	// of the configuration's gateway settings.
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, reference.ErrEngineClosed) {
			fmt.Fprintf(stderr, name+": %v\n", err)
		}
	}
	if err := srv.Close(); err != nil {
		return usageErr(fmt.Errorf("close: %w", err))
	}
	return ExitOK
}

// openListening opens the engine (or a node) of opt and the socket it serves on cfg.Listen. A
// standalone engine's socket listens before the engine opens: a client that connects while it
// opens (one resuming after a restart) waits in the socket's queue and is answered as soon as the
// engine serves, instead of being refused and left to try again; nothing is read from it before
// then, and it is closed unanswered if the engine does not open. A node listens once it is open,
// so that a client asking the nodes in turn is refused by one still opening and goes on to the
// next.
func openListening(ctx context.Context, cfg sutconfig.SUTConfig, opt reference.Options) (server, net.Listener, error) {
	if cfg.Node.ID != "" {
		srv, err := reference.OpenNode(ctx, opt)
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			srv.Close()
			return nil, nil, err
		}
		return srv, ln, nil
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, err
	}
	srv, err := reference.Open(ctx, opt)
	if err != nil {
		ln.Close()
		return nil, nil, err
	}
	return srv, ln, nil
}

// greet prints where the server serves, what it answers with, and, with a made-up token, how to
// use it.
func greet(stdout io.Writer, cfg sutconfig.SUTConfig, addr, devToken string) {
	where := "data in " + cfg.DataDir
	if cfg.Storage.URL != "" {
		where = "state in " + redactURL(cfg.Storage.URL)
	}
	if cfg.Node.ID != "" {
		where += ", node " + cfg.Node.ID
	}
	fmt.Fprintf(stdout, "loom reference %s serving http://%s (%s)\n", reference.Version, addr, where)
	if cfg.Model.BaseURL == "" {
		fmt.Fprintln(stdout, "no model configured: answering with the built-in deterministic model (--model-url points at a real one)")
	}
	if devToken != "" {
		fmt.Fprintf(stdout, "no identities configured: use  -H 'Authorization: Bearer %s'\n", devToken)
		nextSteps(stdout, "http://"+addr, devToken)
	}
}

// server is what serve runs: an engine, or a node of several.
type server interface {
	Serve(ln net.Listener) error
	Close() error
}

// redactURL is u without its password, for printing.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a database URL)"
	}
	return p.Redacted()
}

// nextSteps prints the first requests to try against a server at base with the bearer token tok:
// start a conversation, send a turn, read the history, and watch the event stream.
func nextSteps(w io.Writer, base, tok string) {
	auth := "-H 'Authorization: Bearer " + tok + "'"
	fmt.Fprintf(w, "try: curl -s -X POST %s -H 'Content-Type: application/json' -d '{}' %s/conversations\n", auth, base)
	fmt.Fprintln(w, "then, with the id it answers (c_...):")
	fmt.Fprintf(w, "  send a turn:       curl -s -X POST %s -H 'Content-Type: application/json' -d '{\"messageId\":\"m1\",\"text\":\"hello\"}' %s/conversations/ID/turns\n", auth, base)
	fmt.Fprintf(w, "  read the history:  curl -s %s %s/conversations/ID/history\n", auth, base)
	fmt.Fprintf(w, "  watch it live:     curl -N %s %s/conversations/ID/events\n", auth, base)
}

// checkModelURL reports what is wrong with u as the root of an OpenAI-compatible API: it must be
// an absolute http or https URL with a host.
func checkModelURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return fmt.Errorf("want an http:// or https:// URL (for example http://127.0.0.1:11434/v1)")
	}
	if p.Host == "" {
		return fmt.Errorf("names no host (for example http://127.0.0.1:11434/v1)")
	}
	return nil
}

// localKey returns the data directory's signing key, making one the first time, so that a
// restarted server still verifies the envelopes it signed before.
func localKey(dir string) (string, error) {
	path := filepath.Join(dir, "signing.key")
	if b, err := os.ReadFile(path); err == nil {
		return string(b), nil
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	s := base64.StdEncoding.EncodeToString(k)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		return "", err
	}
	return s, nil
}
