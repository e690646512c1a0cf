package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/loomcheck/loomcheck/harness/selftest"
)

func cmdSelftest(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("selftest", usageSelftest)
	root := fs.String("root", ".", "the source tree (the module root) to build broken variants from")
	defects := fs.String("defects", "fixtures/defects", "the directory of defects.yaml and the defects' edit files")
	out := fs.String("out", "reports/selftest", "where the self-test report is written")
	only := fs.String("only", "", "run only these defects (comma-separated names)")
	par := fs.Int("parallel", 2, "variants built and judged at once")
	sample := fs.Int("sample", 0, "judge only this many defects, chosen by --seed (0: all)")
	seed := fs.Uint64("seed", 1, "the seed that chooses the --sample")
	timeout := fs.Duration("step-timeout", 0, "the longest any step waits for a variant (default: LOOMCHECK_STEP_TIMEOUT, else 5s)")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	opt := selftest.Options{Root: *root, Defects: *defects, Parallel: *par, Sample: *sample, Seed: *seed,
		StepTimeout: *timeout, Log: stdout}
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
	caught, missed := 0, 0
	for _, r := range results {
		switch {
		case r.Caught:
			caught++
		case !r.Interrupted:
			missed++
		}
	}
	unjudged := selftest.Interrupted(results)
	fmt.Fprintf(stdout, "self-test: %d of %d defects caught, %d missed, %d not judged (report: %s)\n",
		caught, len(results), missed, unjudged, *out)
	if unjudged > 0 {
		fmt.Fprintf(stdout, "self-test: %d defects were %s: the run was cancelled before it reached them\n", unjudged, selftest.NotJudged)
	}
	switch {
	case missed > 0:
		return exitNonConformant
	case unjudged > 0:
		// The kit could not finish: never a pass, and not the defects' fault.
		return exitUsage
	}
	return exitConformant
}

// usageSelftest is what `loomcheck selftest -h` prints above the flags.
const usageSelftest = `usage: loomcheck selftest [flags]

Builds each broken variant of fixtures/defects and proves the scenarios of its requirement catch it.
Exit 0 when every defect is caught, 1 when one is missed, 2 when the self-test could not finish.
`
