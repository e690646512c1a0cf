package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/harness/mutation"
)

// cmdMutate runs mutation testing of the reference (package harness/mutation): every mutant, a
// fixed-seed sample, or those in files changed since a git ref. It writes mutation.json and
// summary.md to --out, refreshed after every mutant, and exits 1 when the kill rate is below
// --min-kill-rate or, with --fail-on-survivor, when a mutant not listed as equivalent survives.
//
//	loomcheck mutate                              # the full run (make mutate)
//	loomcheck mutate --sample 5 --min-kill-rate 60 # a CI sample (make mutate MUTANTS=5)
func cmdMutate(args []string, stdout, stderr io.Writer) int {
	f, code, ok := parseMutateFlags(args, stderr)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ms, selection, err := selectMutants(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
		return exitUsage
	}
	if *f.dry {
		for _, m := range ms {
			fmt.Fprintf(stdout, "%s %s\n", m.ID, m)
		}
		fmt.Fprintln(stdout, selection)
		return exitConformant
	}
	return runMutants(ctx, f, ms, selection, stdout, stderr)
}

// mutateFlags are the flags of loomcheck mutate.
type mutateFlags struct {
	root, pkgs, since, only, equivalent, out, survivors, shard *string
	sample, workers                                            *int
	seed                                                       *uint64
	timeout                                                    *time.Duration
	minRate                                                    *float64
	failOnSurvivor, unitOnly, dry                              *bool
}

// parseMutateFlags parses the flags of loomcheck mutate; when it returns false, the command ends
// with the code it returns.
func parseMutateFlags(args []string, stderr io.Writer) (*mutateFlags, int, bool) {
	fs := newFlagSet("mutate", usageMutate)
	f := &mutateFlags{}
	f.root = fs.String("root", ".", "the module root")
	f.pkgs = fs.String("packages", strings.Join(mutation.Packages, ","), "the package directories to mutate (comma-separated)")
	f.sample = fs.Int("sample", 0, "judge only this many mutants per package, chosen by --seed (0: all)")
	f.seed = fs.Uint64("seed", 1, "the sample's seed")
	f.since = fs.String("since", "", "judge only mutants in files changed since this git ref")
	f.only = fs.String("only", "", "judge only these mutant ids (comma-separated)")
	f.equivalent = fs.String("equivalent", "fixtures/mutation/equivalent.yaml", "the reviewed equivalent mutants")
	f.out = fs.String("out", "reports/mutation", "where mutation.json and summary.md are written")
	f.survivors = fs.String("survivors", "", "also keep this markdown file of the survivors up to date as the run goes")
	f.workers = fs.Int("workers", 1, "mutants judged at once")
	f.timeout = fs.Duration("timeout", 0, "limit of one test binary run (0: three times the package's unmutated run, at least 30s, 60s for the conformance suite)")
	f.minRate = fs.Float64("min-kill-rate", 0, "exit 1 when the kill rate (percent) of all judged packages is below this")
	f.failOnSurvivor = fs.Bool("fail-on-survivor", false, "exit 1 when a mutant not listed as equivalent survives")
	f.unitOnly = fs.Bool("package-tests-only", false, "run only the mutated packages' own tests (a quick check while writing them; not a measure)")
	f.dry = fs.Bool("dry-run", false, "list the selected mutants and exit")
	f.shard = fs.String("shard", "", "k/n: mutate only the packages whose place in --packages is k modulo n (CI judges one shard a run)")
	if code, ok := parse(fs, args, stderr); !ok {
		return nil, code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck mutate: unexpected arguments %q\n", fs.Args())
		return nil, exitUsage, false
	}
	return f, 0, true
}

// selectMutants generates the mutants of the flags' packages (of the shard, which then sets the
// packages) and keeps those the flags select; it also returns the sentence that describes the
// selection.
func selectMutants(ctx context.Context, f *mutateFlags) ([]mutation.Mutant, string, error) {
	var err error
	dirs := splitList(*f.pkgs)
	if *f.shard != "" {
		if dirs, err = shardOf(dirs, *f.shard); err != nil {
			return nil, "", err
		}
		*f.pkgs = strings.Join(dirs, ",")
	}
	ms, err := mutation.Generate(ctx, *f.root, dirs)
	if err != nil {
		return nil, "", err
	}
	generated := len(ms)
	var sel []string
	if *f.since != "" {
		changed, err := mutation.ChangedFiles(ctx, *f.root, *f.since)
		if err != nil {
			return nil, "", err
		}
		ms = keepMutants(ms, func(m mutation.Mutant) bool { return changed[m.File] })
		sel = append(sel, "files changed since "+*f.since)
	}
	if *f.sample > 0 {
		ms = mutation.Sample(ms, *f.sample, *f.seed)
		sel = append(sel, fmt.Sprintf("a sample of %d per package (seed %d)", *f.sample, *f.seed))
	}
	if *f.only != "" {
		want := map[string]bool{}
		for _, id := range splitList(*f.only) {
			want[id] = true
		}
		ms = keepMutants(ms, func(m mutation.Mutant) bool { return want[m.ID] })
		sel = append(sel, "the mutants named by --only")
	}
	if len(sel) == 0 {
		sel = append(sel, "every mutant")
	}
	if *f.unitOnly {
		sel = append(sel, "package tests only")
	}
	selection := fmt.Sprintf("%s: %d of %d generated mutants of %s", strings.Join(sel, ", "), len(ms), generated, *f.pkgs)
	return ms, selection, nil
}

// keepMutants is the mutants of ms that keep reports true for, in their order (nil when none).
func keepMutants(ms []mutation.Mutant, keep func(mutation.Mutant) bool) []mutation.Mutant {
	var out []mutation.Mutant
	for _, m := range ms {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// runMutants judges the mutants, keeping the report under --out (and --survivors) up to date,
// prints the kill rate and decides the exit code.
func runMutants(ctx context.Context, f *mutateFlags, ms []mutation.Mutant, selection string, stdout, stderr io.Writer) int {
	eq, err := mutation.LoadEquivalent(*f.equivalent)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "mutate: %s\n", selection)
	start := time.Now()
	var mu sync.Mutex
	write := func(results []mutation.Result) error {
		mu.Lock()
		defer mu.Unlock()
		rep := mutation.Summarize(results, selection, time.Since(start))
		if err := mutation.Write(*f.out, rep); err != nil {
			return err
		}
		if *f.survivors != "" {
			return os.WriteFile(*f.survivors, []byte(mutation.Markdown(rep)), 0o644)
		}
		return nil
	}
	results, err := mutation.Run(ctx, mutation.Options{
		Root: *f.root, Mutants: ms, Equivalent: eq, Workers: *f.workers, Timeout: *f.timeout, Log: stderr,
		PackageTestsOnly: *f.unitOnly,
		OnResult: func(rs []mutation.Result) {
			if err := write(rs); err != nil {
				fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
			}
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
		return exitUsage
	}
	if err := write(results); err != nil {
		fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
		return exitUsage
	}
	rep := mutation.Summarize(results, selection, time.Since(start))
	return mutateVerdict(ctx, f, rep.Total, start, stdout, stderr)
}

// mutateVerdict prints the kill rate and decides the exit code: usage when the run was
// interrupted, not conformant below --min-kill-rate or, with --fail-on-survivor, on a survivor.
func mutateVerdict(ctx context.Context, f *mutateFlags, t mutation.Tally, start time.Time, stdout, stderr io.Writer) int {
	fmt.Fprintf(stdout, "mutation: kill rate %.1f%% (%d killed, %d by timeout, %d survived, %d equivalent, %d not covered, %d not viable, %d not run) in %s; report: %s\n",
		100*t.KillRate, t.Killed, t.Timeout, t.Survived, t.Equivalent, t.NotCovered, t.NotViable, t.NotRun,
		time.Since(start).Round(time.Second), *f.out)
	if ctx.Err() != nil || t.NotRun > 0 {
		fmt.Fprintln(stderr, "loomcheck mutate: interrupted; the mutants not run are reported as not-run")
		return exitUsage
	}
	code := exitConformant
	if *f.minRate > 0 && 100*t.KillRate < *f.minRate {
		fmt.Fprintf(stderr, "loomcheck mutate: kill rate %.1f%% is below %.1f%%\n", 100*t.KillRate, *f.minRate)
		code = exitNonConformant
	}
	if *f.failOnSurvivor && t.Survived > 0 {
		fmt.Fprintf(stderr, "loomcheck mutate: %d mutants survived (see %s/summary.md)\n", t.Survived, *f.out)
		code = exitNonConformant
	}
	return code
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// usageMutate is what `loomcheck mutate -h` prints above the flags.
const usageMutate = `usage: loomcheck mutate [flags]

Mutation testing of the reference: makes each small change the classic operators produce, one at a
time, and runs the package's tests and the in-process suite against it (docs/mutation.md).
`

// shardOf keeps the items whose place in list is k modulo n, for a shard written "k/n" with
// 0 <= k < n.
//
//	shardOf([]string{"a", "b", "c", "d"}, "1/2") // b, d
func shardOf(list []string, shard string) ([]string, error) {
	ks, ns, ok := strings.Cut(shard, "/")
	k, errK := strconv.Atoi(ks)
	n, errN := strconv.Atoi(ns)
	if !ok || errK != nil || errN != nil || n < 1 || k < 0 || k >= n {
		return nil, fmt.Errorf("--shard %q: want k/n with 0 <= k < n", shard)
	}
	var out []string
	for i, item := range list {
		if i%n == k {
			out = append(out, item)
		}
	}
	return out, nil
}
