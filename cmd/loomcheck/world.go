package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/spec"
)

// startWorld starts the world for a remote run on addr.
func startWorld(addr string) (*world.World, error) {
	if addr == "" {
		return nil, fmt.Errorf("--target needs --world HOST:PORT: the address the system under test was configured to reach the world at (see loomcheck world)")
	}
	w := world.New(world.Options{})
	if _, err := w.Start(addr); err != nil {
		return nil, err
	}
	return w, nil
}

func cmdWorld(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("world", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8090", "HOST:PORT the world listens on; the system under test must reach it there")
	dataDir := fs.String("data", "loom-data", "the dataDir to put into the printed configuration")
	listen := fs.String("listen", "127.0.0.1:8080", "the listen address to put into the printed configuration")
	printOnly := fs.Bool("print", false, "print the configuration and exit")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	w := world.New(world.Options{})
	if _, err := w.Start(*addr); err != nil {
		fmt.Fprintf(stderr, "loomcheck world: %v\n", err)
		return exitUsage
	}
	defer w.Close()
	cfg := harness.RemoteConfig(w, spec.SUTConfig{Listen: *listen, DataDir: *dataDir})
	b, _ := json.MarshalIndent(cfg, "", "  ")
	fmt.Fprintln(stdout, string(b))
	if *printOnly {
		return exitConformant
	}
	fmt.Fprintf(stderr, "the world answers on http://%s; start the system under test with the configuration above, then stop this and run:\n  loomcheck run --target http://%s --world %s\n", *addr, *listen, *addr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	return exitConformant
}
