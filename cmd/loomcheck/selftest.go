package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loomcheck/loomcheck/harness/selftest"
)

func cmdSelftest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("selftest", flag.ContinueOnError)
	root := fs.String("root", ".", "the source tree (the module root) to build broken variants from")
	defects := fs.String("defects", "fixtures/defects", "the directory of defects.yaml and the patches")
	out := fs.String("out", "reports/selftest", "where the self-test report is written")
	only := fs.String("only", "", "run only these defects (comma-separated names)")
	par := fs.Int("parallel", 2, "variants built and judged at once")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	opt := selftest.Options{Root: *root, Defects: *defects, Parallel: *par, Log: stdout}
	if *only != "" {
		opt.Only = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := selftest.Run(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck selftest: %v\n", err)
		return exitUsage
	}
	if err := selftest.Write(*out, results); err != nil {
		fmt.Fprintf(stderr, "loomcheck selftest: %v\n", err)
		return exitUsage
	}
	missed := 0
	for _, r := range results {
		if !r.Caught {
			missed++
		}
	}
	fmt.Fprintf(stdout, "self-test: %d of %d defects caught (report: %s)\n", len(results)-missed, len(results), *out)
	if missed > 0 {
		return exitNonConformant
	}
	return exitConformant
}
