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

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", usageRun)
	sutCmd := fs.String("sut-cmd", "", "run the system under test as a process: `sh -c CMD` with LOOM_CONFIG=<file>")
	target := fs.String("target", "", "the URL of a running system under test (see loomcheck world)")
	worldCfg := fs.String("world-config", "", "with --target: the configuration document the target was started with (from loomcheck world)")
	tags := fs.String("tags", "", "run only scenarios matching this tag expression (e.g. \"@profile:core && ~@crash\")")
	profiles := fs.String("profile", "", "judge only these profiles (comma-separated)")
	out := fs.String("out", "reports/latest", "directory the reports are written to")
	conc := fs.Int("concurrency", 0, "scenarios run at once (default: 8, or the number of CPUs when more; the number of CPUs with --nodes or the race detector; always 1 with --target)")
	timeout := fs.Duration("step-timeout", harness.DefaultStepTimeout(), "the longest any step waits for the system (default: LOOMCHECK_STEP_TIMEOUT, else 10s)")
	baseline := fs.String("baseline", "", "a JSON file of expected failures (requirement or scenario ids, each with a reason)")
	certify := fs.Bool("certify", false, "a certification run: refuses a baseline and any skipped scenario of a claimed profile")
	quiet := fs.Bool("quiet", false, "no progress line")
	storeFlag := fs.String("store", "", "give every scenario a database of its own on this PostgreSQL server: \"postgres\" (the server of the PG* environment variables) or a postgres:// URL")
	nodes := fs.Int("nodes", 0, "with --sut-cmd and --store: run the system as this many nodes sharing each scenario's database, behind one address")
	engineLog := fs.Bool("engine-log", false, "with the embedded reference engine: keep its log (every internal error it hides behind an errorId) on stderr")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck run: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *certify && *baseline != "" {
		fmt.Fprintln(stderr, "loomcheck run: --certify refuses a baseline: a certification run judges everything")
		return exitUsage
	}
	var base *harness.Baseline
	if *baseline != "" {
		b, err := harness.LoadBaseline(*baseline)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return exitUsage
		}
		base = b
	}
	if *nodes < 0 || *nodes == 1 || (*nodes > 1 && (*sutCmd == "" || *storeFlag == "")) {
		fmt.Fprintln(stderr, "loomcheck run: --nodes takes 2 or more, with --sut-cmd and --store")
		return exitUsage
	}
	opt := harness.Options{Nodes: *nodes, Tags: strings.ReplaceAll(*tags, report.NonBreakingHyphen, "-"), Concurrency: *conc, StepTimeout: *timeout}
	if *storeFlag != "" {
		admin, err := storeServer(*storeFlag)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return exitUsage
		}
		dbs := newServerDatabases(admin)
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := dbs.Close(ctx); err != nil {
				fmt.Fprintf(stderr, "loomcheck run: drop the scenarios' databases: %v\n", err)
			}
		}()
		opt.Databases = dbs
	}
	if *profiles != "" {
		opt.Profiles = strings.Split(*profiles, ",")
	}
	if !*quiet {
		opt.Progress = stderr
	}
	switch {
	case *sutCmd != "" && *target != "":
		fmt.Fprintln(stderr, "loomcheck run: choose --sut-cmd or --target, not both")
		return exitUsage
	case *sutCmd != "":
		opt.Command = *sutCmd
	case *target != "":
		if err := checkTarget(*target); err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return exitUsage
		}
		cfg, w, err := startWorld(*worldCfg)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck run: %v\n", err)
			return exitUsage
		}
		defer w.Close()
		opt.Target, opt.World, opt.RemoteConfig = *target, w, cfg
	default:
		opt.Factory = referenceFactory
		opt.Describe = "the embedded reference engine"
		if !*engineLog {
			// The scenarios provoke errors on purpose; the report says what matters.
			prev := slog.Default()
			slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
			defer slog.SetDefault(prev)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	if *certify {
		harness.Certify(rep)
	}
	if err := report.WriteAll(*out, rep, harness.Secrets()...); err != nil {
		fmt.Fprintf(stderr, "loomcheck run: write reports: %v\n", err)
		return exitUsage
	}
	printVerdict(stdout, rep, *out)
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
