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

// cmdVariance runs the spec-allowed variants of fixtures/variants: a subcommand of its own beside
// selftest, mutate and explore (one proof of the kit each), since its verdicts (kept, false red)
// and its flags are not the self-test's: no sample, no seed, no requirement to catch.
func cmdVariance(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("variance", usageVariance)
	root := fs.String("root", ".", "the source tree (the module root) to build the variants from")
	variants := fs.String("variants", "fixtures/variants", "the directory of variants.yaml and the variants' edit files")
	out := fs.String("out", "reports/variance", "where the variants' report is written")
	only := fs.String("only", "", "run only these variants (comma-separated names)")
	par := fs.Int("parallel", 1, "variants built and run at once")
	timeout := fs.Duration("step-timeout", 0, "the longest any step waits for a variant (default: LOOMCHECK_STEP_TIMEOUT, else 10s)")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	opt := selftest.VariantOptions{Root: *root, Variants: *variants, Parallel: *par, StepTimeout: *timeout, Log: stdout}
	if *only != "" {
		opt.Only = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := selftest.RunVariants(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck variance: %v\n", err)
		return exitUsage
	}
	if err := selftest.WriteVariants(*out, results); err != nil {
		fmt.Fprintf(stderr, "loomcheck variance: %v\n", err)
		return exitUsage
	}
	count := map[string]int{}
	for _, r := range results {
		count[r.Outcome]++
	}
	fmt.Fprintf(stdout, "variance: %d of %d variants kept, %d false red, %d harness errors, %d not judged (report: %s)\n",
		count[selftest.Kept], len(results), count[selftest.FalseRed], count[selftest.HarnessError], count[selftest.Unjudged], *out)
	switch {
	case count[selftest.FalseRed] > 0:
		return exitNonConformant
	case count[selftest.Kept] < len(results):
		// The kit could not judge them all: never a pass, and not the variants' fault.
		return exitUsage
	}
	return exitConformant
}

// usageVariance is what `loomcheck variance -h` prints above the flags.
const usageVariance = `usage: loomcheck variance [flags]

Builds each spec-allowed variant of fixtures/variants (another choice the spec leaves free) and runs
the scenarios of the profiles it names against it: every variant must stay conformant. A scenario
that fails against one is a false red. Exit 0 when every variant is kept, 1 on a false red, 2 when a
variant could not be judged (a harness error, an interruption).
`
