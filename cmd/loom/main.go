// Command loom serves the Loom reference engine over HTTP: the same command as `loomcheck serve`
// in a binary that links the engine alone, none of the conformance kit, so that it starts as a
// plain Go server does. It decodes its configuration document strictly (an unknown field is
// refused) and leaves the full check against schemas/sut-config.schema.json to
// `loomcheck validate --schema sut-config`.
//
//	loom --data /var/lib/loom --listen 127.0.0.1:8080
//	LOOM_CONFIG=sut.json loom
//	loom --store postgres://loom@db/loom --node node-1 --advertise http://10.0.0.7:8080
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/loomcheck/loomcheck/reference/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := server.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, server.Hooks{})
	stop()
	os.Exit(code)
}
