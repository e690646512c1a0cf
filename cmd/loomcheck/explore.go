package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/loomcheck/loomcheck/harness/explore"
)

// cmdExplore is `loomcheck explore`: the crash exploration of the canonical dialogues against the
// embedded reference engine. Exit 0 with no finding, 1 with any, 2 on a usage or harness error.
func cmdExplore(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explore", usageExplore)
	out := fs.String("out", "reports/explore", "directory report.json and summary.md are written to")
	dialogues := fs.String("dialogue", "", "explore only these dialogues (comma-separated; default all: "+strings.Join(explore.DialogueNames(), ", ")+")")
	every := fs.Int("every", 1, "explore every K-th crash point (1, 1+K, ...; the last always)")
	maxPoints := fs.Int("max-points", 0, "at most this many crash points per dialogue, spread evenly (0: all)")
	wait := fs.Duration("step-timeout", explore.DefaultWait, "the longest any step waits for the system")
	points := fs.String("points", "", "explore only these crash points (comma-separated write numbers), to reproduce a finding")
	then := fs.Int64("then", 0, "also crash each restarted instance right after its M-th durable write (a crash during recovery; 0: none)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	compareLog := fs.Bool("compare-log", true, "also compare the raw execution log with the uncrashed run's, event by event (the reference's log is deterministic)")
	engineLog := fs.Bool("engine-log", false, "keep the engine's own log lines (a crashed instance logs the writes it could not make)")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck explore: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *every < 1 || *maxPoints < 0 || *then < 0 {
		fmt.Fprintln(stderr, "loomcheck explore: --every must be at least 1, --max-points and --then at least 0")
		return exitUsage
	}
	opt := explore.Options{Factory: referenceFactory, Every: *every, MaxPoints: *maxPoints, Wait: *wait, CompareLog: *compareLog, Then: *then}
	for _, p := range strings.Split(*points, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "loomcheck explore: --points: %q is not a write number (1 or more)\n", p)
			return exitUsage
		}
		opt.Points = append(opt.Points, n)
	}
	if *dialogues != "" {
		opt.Dialogues = strings.Split(*dialogues, ",")
	}
	if !*quiet {
		opt.Progress = stdout
	}
	if !*engineLog {
		prev := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
		defer slog.SetDefault(prev)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	rep, err := explore.Run(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck explore: %v\n", err)
		return exitUsage // a usage error (explore.ErrUsage) or a harness error: either way, no verdict
	}
	if err := rep.WriteFiles(*out); err != nil {
		fmt.Fprintf(stderr, "loomcheck explore: write the report: %v\n", err)
		return exitUsage
	}
	explored := 0
	for _, d := range rep.Dialogues {
		explored += len(d.Points)
	}
	fmt.Fprintf(stdout, "%d crash points explored over %d dialogues in %s: %d findings (report in %s)\n",
		explored, len(rep.Dialogues), time.Since(began).Round(100*time.Millisecond), rep.Findings, *out)
	if rep.Findings > 0 {
		return exitNonConformant
	}
	return exitConformant
}

// usageExplore is what `loomcheck explore -h` prints above the flags.
const usageExplore = `usage: loomcheck explore [flags]

Crashes the embedded reference engine after every durable write of the canonical dialogues and
checks that each restart recovers them. Exit 0 with no finding, 1 with any, 2 on a usage or harness error.
`
