package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

func referenceFactory(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
	if cfg.Node.ID != "" {
		return reference.OpenNodeConfig(ctx, cfg)
	}
	return reference.OpenConfig(ctx, cfg)
}

// cmdRun is loomcheck run: it runs the scenarios against the system the flags choose, writes the
// reports to --out, prints the verdict and returns the run's exit code.
func cmdRun(args []string, stdout, stderr io.Writer) int {
	f, base, code, ok := parseRunFlags(args, stderr)
	if !ok {
		return code
	}
	opt, cleanup, code, ok := runOptions(f, stderr)
	defer cleanup()
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return executeRun(ctx, opt, f, base, stdout, stderr)
}

// runFlags are the flags of loomcheck run.
type runFlags struct {
	sutCmd, target, worldCfg, tags, profiles, out, baseline, storeFlag *string
	conc, nodes, partitions                                            *int
	timeout                                                            *time.Duration
	certify, quiet, engineLog                                          *bool
}

// parseRunFlags parses and checks the flags of loomcheck run and loads the baseline they name;
// when it returns false, the command ends with the code it returns.
func parseRunFlags(args []string, stderr io.Writer) (*runFlags, *harness.Baseline, int, bool) {
	fs := newFlagSet("run", usageRun)
	f := &runFlags{}
	f.sutCmd = fs.String("sut-cmd", "", "run the system under test as a process: `sh -c CMD` with LOOM_CONFIG=<file>")
	f.target = fs.String("target", "", "the URL of a running system under test (see loomcheck world)")
	f.worldCfg = fs.String("world-config", "", "with --target: the configuration document the target was started with (from loomcheck world)")
	f.tags = fs.String("tags", "", "run only scenarios matching this tag expression (e.g. \"@profile:core && ~@crash\")")
	f.profiles = fs.String("profile", "", "judge only these profiles (comma-separated)")
	f.out = fs.String("out", "reports/latest", "directory the reports are written to")
	f.conc = fs.Int("concurrency", 0, "scenarios run at once (default: 8, or the number of CPUs when more; twice the number of CPUs with --nodes; the number of CPUs with the race detector; always 1 with --target)")
	f.timeout = fs.Duration("step-timeout", harness.DefaultStepTimeout(), "the longest any step waits for the system (default: LOOMCHECK_STEP_TIMEOUT, else 10s)")
	f.baseline = fs.String("baseline", "", "a JSON file of expected failures (requirement or scenario ids, each with a reason)")
	f.certify = fs.Bool("certify", false, "a certification run: refuses a baseline and any skipped scenario of a claimed profile")
	f.quiet = fs.Bool("quiet", false, "no progress line")
	f.storeFlag = fs.String("store", "", "give every scenario a database of its own on this PostgreSQL server: \"postgres\" (the server of the PG* environment variables) or a postgres:// URL")
	f.nodes = fs.Int("nodes", 0, "with --sut-cmd and --store: run the system as this many nodes sharing each scenario's database, behind one address")
	f.partitions = fs.Int("partitions", 0, "with --nodes: the nodes' node.partitions, how many partitions the executions are shared out in (default: the system's own)")
	f.engineLog = fs.Bool("engine-log", false, "with the embedded reference engine: keep its log (every internal error it hides behind an errorId) on stderr")
	if code, ok := parse(fs, args, stderr); !ok {
		return nil, nil, code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck run: unexpected argument %q\n", fs.Arg(0))
		return nil, nil, exitUsage, false
	}
	if *f.certify && *f.baseline != "" {
		fmt.Fprintln(stderr, "loomcheck run: --certify refuses a baseline: a certification run judges everything")
		return nil, nil, exitUsage, false
	}
	var base *harness.Baseline
	if *f.baseline != "" {
		b, err := harness.LoadBaseline(*f.baseline)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return nil, nil, exitUsage, false
		}
		base = b
	}
	if *f.nodes < 0 || *f.nodes == 1 || (*f.nodes > 1 && (*f.sutCmd == "" || *f.storeFlag == "")) {
		fmt.Fprintln(stderr, "loomcheck run: --nodes takes 2 or more, with --sut-cmd and --store")
		return nil, nil, exitUsage, false
	}
	if *f.partitions < 0 || (*f.partitions > 0 && *f.nodes < 2) {
		fmt.Fprintln(stderr, "loomcheck run: --partitions takes 1 or more, with --nodes")
		return nil, nil, exitUsage, false
	}
	return f, base, 0, true
}

// runOptions makes the run's options from the flags: the databases, the profiles, the progress
// line and the driver. The cleanup it returns, never nil, undoes what it set up, the last first,
// and is to be called whether or not it succeeded; when it returns false, the command ends with
// the code it returns.
func runOptions(f *runFlags, stderr io.Writer) (harness.Options, func(), int, bool) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	opt := harness.Options{Nodes: *f.nodes, Partitions: *f.partitions, Tags: strings.ReplaceAll(*f.tags, report.NonBreakingHyphen, "-"), Concurrency: *f.conc, StepTimeout: *f.timeout}
	if *f.storeFlag != "" {
		admin, err := storeServer(*f.storeFlag)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return opt, cleanup, exitUsage, false
		}
		dbs := newServerDatabases(admin)
		undo = append(undo, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := dbs.Close(ctx); err != nil {
				fmt.Fprintf(stderr, "loomcheck run: drop the scenarios' databases: %v\n", err)
			}
		})
		opt.Databases = dbs
	}
	if *f.profiles != "" {
		opt.Profiles = strings.Split(*f.profiles, ",")
	}
	if !*f.quiet {
		opt.Progress = stderr
	}
	switch {
	case *f.sutCmd != "" && *f.target != "":
		fmt.Fprintln(stderr, "loomcheck run: choose --sut-cmd or --target, not both")
		return opt, cleanup, exitUsage, false
	case *f.sutCmd != "":
		opt.Command = *f.sutCmd
	case *f.target != "":
		if err := checkTarget(*f.target); err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return opt, cleanup, exitUsage, false
		}
		cfg, w, err := startWorld(*f.worldCfg)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return opt, cleanup, exitUsage, false
		}
		undo = append(undo, func() { _ = w.Close() })
		opt.Target, opt.World, opt.RemoteConfig = *f.target, w, cfg
	default:
		opt.Factory = referenceFactory
		opt.Describe = "the embedded reference engine"
		if !*f.engineLog {
			// The scenarios provoke errors on purpose; the report says what matters.
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
			undo = append(undo, func() { slog.SetDefault(prev) })
		}
	}
	return opt, cleanup, 0, true
}

// executeRun runs the scenarios, judges the report against the catalogue and the baseline (and
// certifies it with --certify), writes the reports and prints the verdict; it returns the run's
// exit code.
func executeRun(ctx context.Context, opt harness.Options, f *runFlags, base *harness.Baseline, stdout, stderr io.Writer) int {
	rep, err := harness.Execute(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
		if errors.Is(err, harness.ErrUsage) {
			return exitUsage
		}
		return exitUsage // the kit could not run: a harness error
	}
	cat, err := spec.LoadCatalogue()
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
		return exitUsage
	}
	rep = harness.Judge(rep, cat, base)
	if *f.certify {
		harness.Certify(rep)
	}
	if err := report.WriteAll(*f.out, rep, harness.Secrets()...); err != nil {
		fmt.Fprintf(stderr, "loomcheck run: write reports: %v\n", err)
		return exitUsage
	}
	printVerdict(stdout, rep, *f.out)
	return rep.ExitCode
}

func printVerdict(w io.Writer, rep *report.Report, out string) {
	t := rep.Totals
	verdict := "CONFORMANT"
	if n := rep.Excused(); rep.Conformant && n > 0 {
		verdict = fmt.Sprintf("NO NEW FAILURES (%d excused by the baseline, so not conformant)", n)
	}
	if !rep.Conformant {
		verdict = "NOT CONFORMANT"
	}
	if rep.ExitCode == exitUsage {
		verdict = "HARNESS ERROR"
	}
	if rep.Unstarted != "" {
		verdict = "NOT CONFORMANT (the system did not start: " + rep.Unstarted + ")"
	}
	fmt.Fprintf(w, "%s: %d passed, %d failed, %d not applicable, %d skipped, %d undefined, %d pending, %d harness errors (%s)\n",
		verdict, t.Passed, t.Failed, t.NotApplicable, t.Skipped, t.Undefined, t.Pending, t.HarnessError,
		time.Duration(rep.DurationMs)*time.Millisecond)
	if len(rep.NotRun) > 0 {
		fmt.Fprintf(w, "  claimed profiles not run (not judged, so not conformant): %s; narrow the judged profiles with --profile\n",
			strings.Join(rep.NotRun, ", "))
	}
	if fs := rep.Contract.Findings; len(fs) > 0 {
		what := "contract violations"
		if len(fs) == 1 {
			what = "contract violation"
		}
		fmt.Fprintf(w, "  %d %s under %s, each reported once (the scenarios that met them are judged on their behaviour):\n",
			len(fs), what, rep.Contract.Requirement)
		for _, f := range fs {
			fmt.Fprintf(w, "  contract %s %s: %s (%d times, in %d scenarios)\n", f.Route, f.Location, clip(f.Message, 200), f.Occurrences, len(f.Scenarios))
		}
	}
	for _, sc := range rep.Scenarios {
		if sc.Status == report.Failed && sc.Expected == "" || sc.Status == report.HarnessError {
			fmt.Fprintf(w, "  %s %s %q: %s\n", sc.Status, sc.ID, sc.Name, clip(sc.Message, 300))
		}
	}
	fmt.Fprintf(w, "reports: %s\n", out)
}

// checkTarget refuses a --target that is not the base URL of an HTTP server: the kit would
// otherwise knock on an address that cannot answer and blame the system for it.
func checkTarget(target string) error {
	u, err := url.Parse(target)
	switch {
	case err != nil:
		return fmt.Errorf("--target %q is not a URL (%v); give the system's base URL, as http://127.0.0.1:8080", target, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("--target %q is not an http:// or https:// URL; give the system's base URL, as http://127.0.0.1:8080", target)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("--target %q names no host; give the system's base URL, as http://127.0.0.1:8080", target)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("--target %q carries a query, a fragment or credentials; give the system's base URL alone", target)
	}
	return nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// usageRun is what `loomcheck run -h` prints above the flags.
const usageRun = `usage: loomcheck run [flags]

Runs the conformance suite and writes the reports. The target is the embedded reference engine,
or a process (--sut-cmd), or a running system (--target with --world-config).
Exit 0 conformant, 1 not conformant, 2 usage or harness error.
`
