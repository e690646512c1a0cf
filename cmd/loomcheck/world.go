package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// printRemoteConfig prints the configuration a remote target whose world is w is started with.
func printRemoteConfig(stdout io.Writer, w *world.World, listen, dataDir string) {
	cfg := harness.RemoteConfig(w, sutconfig.SUTConfig{Listen: listen, DataDir: dataDir})
	b, _ := json.MarshalIndent(cfg, "", "  ")
	fmt.Fprintln(stdout, string(b))
}

// startWorld reads the configuration a remote target was started with and starts the world at the
// address that configuration points the target to.
func startWorld(path string) (*sutconfig.SUTConfig, *world.World, error) {
	if path == "" {
		return nil, nil, fmt.Errorf("--target needs --world-config FILE: the configuration the target was started with (see loomcheck world)")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var cfg sutconfig.SUTConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	u, err := url.Parse(cfg.Model.BaseURL)
	if err != nil || u.Host == "" {
		return nil, nil, fmt.Errorf("%s: model.baseURL does not name the world's address", path)
	}
	w := world.New(world.Options{})
	if _, err := w.Start(u.Host); err != nil {
		return nil, nil, fmt.Errorf("start the world at %s: %v", u.Host, err)
	}
	return &cfg, w, nil
}

func cmdWorld(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runWorld(ctx, args, stdout, stderr)
}

// runWorld is the world command until ctx ends: it serves the world, scripted by --script and
// by the control API (world.ControlHandler) on the same address. With --print it only prints the
// configuration and binds nothing.
func runWorld(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("world", usageWorld)
	addr := fs.String("addr", "127.0.0.1:8090", "HOST:PORT the world listens on; the system under test must reach it there")
	dataDir := fs.String("data", "loom-data", "the dataDir to put into the printed configuration")
	listen := fs.String("listen", "127.0.0.1:8080", "the listen address to put into the printed configuration")
	printOnly := fs.Bool("print", false, "print the configuration and exit, without binding any port")
	scriptFile := fs.String("script", "", "a script (spec/world.md, Scripting the world by hand) the world starts with")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck world: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var script world.Script
	if *scriptFile != "" {
		b, err := os.ReadFile(*scriptFile)
		if err == nil {
			script, err = world.LoadScript(b)
		}
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck world: --script %s: %v\n", *scriptFile, err)
			return exitUsage
		}
	}
	if *printOnly {
		// The document names the world at --addr; nothing listens there.
		w := world.New(world.Options{URL: "http://" + *addr})
		defer w.Close()
		printRemoteConfig(stdout, w, *listen, *dataDir)
		return exitConformant
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck world: %v\n", err)
		return exitUsage
	}
	w := world.New(world.Options{URL: "http://" + ln.Addr().String()})
	defer w.Close()
	if err := w.Apply(script); err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "loomcheck world: --script %s: %v\n", *scriptFile, err)
		return exitUsage
	}
	mux := http.NewServeMux()
	mux.Handle(world.PathControl, world.ControlHandler(w))
	mux.Handle("/", w.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	defer srv.Close()

	// Everything is printed before the first request is served: whoever waits for the world to
	// answer may read the document at once.
	printRemoteConfig(stdout, w, *listen, *dataDir)
	fmt.Fprintf(stderr, "the world answers on %s, for trying things by hand: its default behaviour, plus what --script and\n"+
		"  POST %s/control/script add (GET %s/control/model/requests shows what the model was asked).\n"+
		"Save the configuration above (or print it with --print), start the system under test with it, stop this, and run:\n"+
		"  loomcheck run --target http://%s --world-config FILE\n", w.URL(), w.URL(), w.URL(), *listen)
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	return exitConformant
}

// usageWorld is what `loomcheck world -h` prints above the flags.
const usageWorld = `usage: loomcheck world [flags]

Prints the configuration document a system under test must be started with to be judged remotely
(the world's endpoints at --addr, the kit's principals, a signing key), then serves the world there
until interrupted, with its control API (POST /control/script, /control/reset) on the same address;
--script FILE starts it scripted. With --print it prints the document and exits without binding any port.
`
