package main

import (
	"bytes"
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
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec"
)

func cmdServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "", "host:port to serve on (default 127.0.0.1:8080, or the configuration's listen)")
	dataDir := fs.String("data", "", "data directory (default ./loom-data, or the configuration's dataDir)")
	modelURL := fs.String("model-url", "", "an OpenAI-compatible API root (for example http://127.0.0.1:11434/v1)")
	modelName := fs.String("model", "", "the model name to ask for")
	allowEmpty := fs.Bool("allow-empty", false, "start on a data directory that exists and holds no store, or whose store's database is gone (refused otherwise)")
	config := fs.String("config", os.Getenv("LOOM_CONFIG"), "a configuration document (schemas/sut-config.schema.json); default $LOOM_CONFIG")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	var cfg spec.SUTConfig
	fromFile := *config != ""
	if fromFile {
		b, err := os.ReadFile(*config)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck serve: %v\n", err)
			return exitUsage
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			fmt.Fprintf(stderr, "loomcheck serve: configuration %s: %v\n", *config, err)
			return exitUsage
		}
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8080"
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "loom-data"
	}
	if *modelURL != "" {
		cfg.Model.BaseURL = *modelURL
	}
	if *modelName != "" {
		cfg.Model.Name = *modelName
	}
	// A data directory that does not exist yet is a first start; one that exists and holds no
	// store is refused by the engine unless --allow-empty (or storage.allowEmpty) says so.
	_, statErr := os.Stat(cfg.DataDir)
	firstStart := errors.Is(statErr, os.ErrNotExist)
	if *allowEmpty {
		cfg.Storage.AllowEmpty = true
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		fmt.Fprintf(stderr, "loomcheck serve: %v\n", err)
		return exitUsage
	}
	if cfg.Signing.Key == "" {
		key, err := localKey(cfg.DataDir)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck serve: %v\n", err)
			return exitUsage
		}
		cfg.Signing.Key = key
	}
	var devToken string
	if !fromFile && cfg.Identity.URL == "" && len(cfg.Identity.Principals) == 0 && !cfg.Identity.Insecure {
		// Secure by default, friendly at once: a token for one local principal.
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		devToken = "dev-" + hex.EncodeToString(b)
		cfg.Identity.Principals = map[string]spec.Principal{devToken: {Tenant: "local", Actor: "you"}}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opt, err := reference.FromConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck serve: %v\n", err)
		return exitUsage
	}
	opt.Logger = log
	if firstStart {
		opt.AllowEmpty = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	eng, err := reference.Open(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck serve: %v\n", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		eng.Close()
		fmt.Fprintf(stderr, "loomcheck serve: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "loom reference %s serving http://%s (data in %s)\n", reference.Version, ln.Addr(), cfg.DataDir)
	if cfg.Model.BaseURL == "" {
		fmt.Fprintln(stdout, "no model configured: answering with the built-in deterministic model (--model-url points at a real one)")
	}
	if devToken != "" {
		fmt.Fprintf(stdout, "no identities configured: use  -H 'Authorization: Bearer %s'\n", devToken)
		fmt.Fprintf(stdout, "try: curl -s -X POST -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{}' http://%s/conversations\n", devToken, ln.Addr())
	}
	// The engine serves with its edge: the request and header deadlines and the connection cap
	// of the configuration's gateway settings.
	errc := make(chan error, 1)
	go func() { errc <- eng.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, reference.ErrEngineClosed) {
			fmt.Fprintf(stderr, "loomcheck serve: %v\n", err)
		}
	}
	if err := eng.Close(); err != nil {
		fmt.Fprintf(stderr, "loomcheck serve: close: %v\n", err)
		return exitUsage
	}
	return exitConformant
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
