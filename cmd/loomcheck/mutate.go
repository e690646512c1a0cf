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
	fs := newFlagSet("mutate", usageMutate)
	root := fs.String("root", ".", "the module root")
	pkgs := fs.String("packages", strings.Join(mutation.Packages, ","), "the package directories to mutate (comma-separated)")
	sample := fs.Int("sample", 0, "judge only this many mutants per package, chosen by --seed (0: all)")
	seed := fs.Uint64("seed", 1, "the sample's seed")
	since := fs.String("since", "", "judge only mutants in files changed since this git ref")
	only := fs.String("only", "", "judge only these mutant ids (comma-separated)")
	equivalent := fs.String("equivalent", "fixtures/mutation/equivalent.yaml", "the reviewed equivalent mutants")
	out := fs.String("out", "reports/mutation", "where mutation.json and summary.md are written")
	survivors := fs.String("survivors", "", "also keep this markdown file of the survivors up to date as the run goes")
	workers := fs.Int("workers", 1, "mutants judged at once")
	timeout := fs.Duration("timeout", 0, "limit of one test binary run (0: three times the package's unmutated run, at least 30s, 60s for the conformance suite)")
	minRate := fs.Float64("min-kill-rate", 0, "exit 1 when the kill rate (percent) of all judged packages is below this")
	failOnSurvivor := fs.Bool("fail-on-survivor", false, "exit 1 when a mutant not listed as equivalent survives")
	unitOnly := fs.Bool("package-tests-only", false, "run only the mutated packages' own tests (a quick check while writing them; not a measure)")
	dry := fs.Bool("dry-run", false, "list the selected mutants and exit")
	shard := fs.String("shard", "", "k/n: mutate only the packages whose place in --packages is k modulo n (CI judges one shard a run)")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck mutate: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	dirs := splitList(*pkgs)
	if *shard != "" {
		if dirs, err = shardOf(dirs, *shard); err != nil {
			fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
			return exitUsage
		}
		*pkgs = strings.Join(dirs, ",")
	}
	ms, err := mutation.Generate(ctx, *root, dirs)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
		return exitUsage
	}
	generated := len(ms)
	var sel []string
	if *since != "" {
		changed, err := mutation.ChangedFiles(ctx, *root, *since)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck mutate: %v\n", err)
			return exitUsage
		}
		var keep []mutation.Mutant
		for _, m := range ms {
			if changed[m.File] {
				keep = append(keep, m)
			}
		}
		ms = keep
		sel = append(sel, "files changed since "+*since)
	}
	if *sample > 0 {
		ms = mutation.Sample(ms, *sample, *seed)
		sel = append(sel, fmt.Sprintf("a sample of %d per package (seed %d)", *sample, *seed))
	}
	if *only != "" {
		want := map[string]bool{}
		for _, id := range splitList(*only) {
			want[id] = true
		}
		var keep []mutation.Mutant
		for _, m := range ms {
			if want[m.ID] {
				keep = append(keep, m)
			}
		}
		ms = keep
		sel = append(sel, "the mutants named by --only")
	}
	if len(sel) == 0 {
		sel = append(sel, "every mutant")
	}
	if *unitOnly {
		sel = append(sel, "package tests only")
	}
	selection := fmt.Sprintf("%s: %d of %d generated mutants of %s", strings.Join(sel, ", "), len(ms), generated, *pkgs)
	if *dry {
		for _, m := range ms {
			fmt.Fprintf(stdout, "%s %s\n", m.ID, m)
		}
		fmt.Fprintln(stdout, selection)
		return exitConformant
	}
	eq, err := mutation.LoadEquivalent(*equivalent)
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
		if err := mutation.Write(*out, rep); err != nil {
			return err
		}
		if *survivors != "" {
			return os.WriteFile(*survivors, []byte(mutation.Markdown(rep)), 0o644)
		}
		return nil
	}
	results, err := mutation.Run(ctx, mutation.Options{
		Root: *root, Mutants: ms, Equivalent: eq, Workers: *workers, Timeout: *timeout, Log: stderr,
		PackageTestsOnly: *unitOnly,
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
	t := rep.Total
	fmt.Fprintf(stdout, "mutation: kill rate %.1f%% (%d killed, %d by timeout, %d survived, %d equivalent, %d not covered, %d not viable, %d not run) in %s; report: %s\n",
		100*t.KillRate, t.Killed, t.Timeout, t.Survived, t.Equivalent, t.NotCovered, t.NotViable, t.NotRun,
		time.Since(start).Round(time.Second), *out)
	if ctx.Err() != nil || t.NotRun > 0 {
		fmt.Fprintln(stderr, "loomcheck mutate: interrupted; the mutants not run are reported as not-run")
		return exitUsage
	}
	code := exitConformant
	if *minRate > 0 && 100*t.KillRate < *minRate {
		fmt.Fprintf(stderr, "loomcheck mutate: kill rate %.1f%% is below %.1f%%\n", 100*t.KillRate, *minRate)
		code = exitNonConformant
	}
	if *failOnSurvivor && t.Survived > 0 {
		fmt.Fprintf(stderr, "loomcheck mutate: %d mutants survived (see %s/summary.md)\n", t.Survived, *out)
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
