package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/loomcheck/loomcheck/reference/server"
	"github.com/loomcheck/loomcheck/schemas"
)

func cmdServe(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, args, stdout, stderr)
}

// serve is `loomcheck serve`, until ctx ends: the engine's serving command (reference/server,
// which cmd/loom runs alone), with the configuration document checked against its schema first,
// as `loomcheck validate --schema sut-config` checks it.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return server.Main(ctx, args, stdout, stderr, server.Hooks{Name: "loomcheck serve", Validate: validateConfig})
}

// validateConfig lists what is wrong with a sut-config document, by pointer.
func validateConfig(doc []byte) []string {
	err := schemas.Validate("sut-config", doc)
	if err == nil {
		return nil
	}
	var ve *schemas.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	out := make([]string, 0, len(ve.Problems))
	for _, p := range ve.Problems {
		out = append(out, p.Pointer+": "+p.Message)
	}
	return out
}
