package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"

	"github.com/loomcheck/loomcheck/reference/perf"
)

// usageBench is what `loomcheck bench -h` prints above the flags.
const usageBench = `usage: loomcheck bench [flags]

Measures the reference engine's performance figures as a user meets them, each beside a
baseline doing the same work without the engine (raw SQLite, a bare net/http server, a bare Go
binary, a bare SSE echo), in this process, baseline and figure runs alternating round after round
so that the machine's noise hits both. Prints a Markdown table: the medians over the rounds, the
ratio's min / median / max, the goal and whether the median meets it. Nothing is failed for being
slow. With --docs FILE the section of FILE between its markers (docs/performance.md, "The
latest table") is rewritten with the table, the date, the commit (git's short hash, "-dirty"
when tracked files differ from it) and the command line, once every figure asked for was
measured; the rest of FILE is left as it is. The figures on PostgreSQL run when PGHOST is set (the PG* variables name the server; the
role must be allowed to create databases) and are skipped with a note otherwise. The restart
figure builds loomcheck from the module of the working directory.

Figures: ` + "%s" + `

Exit 0 when measured, 2 on a usage error or when a figure could not be measured.
`

func cmdBench(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", fmt.Sprintf(usageBench, strings.Join(perf.Names(), ", ")))
	figures := fs.String("figures", "", "comma-separated figures to measure (default all)")
	rounds := fs.Int("rounds", perf.DefaultRounds, "how many times baseline and figure runs alternate")
	quick := fs.Bool("quick", false, "small sizes: a smoke run of seconds, not the figures")
	out := fs.String("out", "", "also write the Markdown table to this file")
	asJSON := fs.Bool("json", false, "print the result as JSON (every round's values) instead of the table")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	docs := fs.String("docs", "", "rewrite the latest table of this document (docs/performance.md) between its markers with the table measured, its date, commit and command")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck bench: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *rounds < 1 {
		fmt.Fprintln(stderr, "loomcheck bench: --rounds must be at least 1")
		return exitUsage
	}
	var commit string
	if *docs != "" {
		var err error
		if commit, err = checkDocs(*docs, *quick); err != nil {
			fmt.Fprintf(stderr, "loomcheck bench: %v\n", err)
			return exitUsage
		}
	}
	cfg := perf.Config{Rounds: *rounds, Quick: *quick, Postgres: os.Getenv("PGHOST") != "", Log: stderr}
	var err error
	if cfg.Figures, err = parseFigures(*figures); err != nil {
		fmt.Fprintf(stderr, "loomcheck bench: %v\n", err)
		return exitUsage
	}
	if *cpuProfile != "" {
		stopProfile, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck bench: %v\n", err)
			return exitUsage
		}
		defer stopProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rev := revision()
	fmt.Fprintf(stderr, "loomcheck bench at %s, %d rounds\n", rev, *rounds)
	res, err := perf.Run(ctx, cfg)
	code := exitConformant
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck bench: %v\n", err)
		code = exitUsage
		if res == nil {
			return code
		}
	}
	var table bytes.Buffer
	fmt.Fprintf(&table, "Measured at %s with `loomcheck bench%s`.\n\n", rev, flagsLine(args))
	_ = res.Markdown(&table)
	if *asJSON {
		_ = res.JSON(stdout)
	} else {
		_, _ = stdout.Write(table.Bytes())
	}
	if *out != "" {
		if err := os.WriteFile(*out, table.Bytes(), 0o644); err != nil {
			fmt.Fprintf(stderr, "loomcheck bench: %v\n", err)
			return exitUsage
		}
	}
	if *docs != "" && code == exitConformant {
		var md bytes.Buffer
		_ = res.Markdown(&md)
		if err := writeDocs(*docs, docsSection(res.Started, commit, "loomcheck bench"+flagsLine(args), md.String())); err != nil {
			fmt.Fprintf(stderr, "loomcheck bench: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "loomcheck bench: wrote the latest table of %s\n", *docs)
	}
	return code
}

// parseFigures is the --figures list: the named figures in order, none for all; a name that is no
// figure is an error naming the figures there are.
func parseFigures(list string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(perf.Names(), f) {
			return nil, fmt.Errorf("no figure %q (figures: %s)", f, strings.Join(perf.Names(), ", "))
		}
		out = append(out, f)
	}
	return out, nil
}

// startCPUProfile writes a CPU profile of what runs until the returned function is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// checkDocs checks, before anything is measured, that the document exists and has its markers
// and that the run measures figures, and returns the commit the table will be said to come from.
func checkDocs(path string, quick bool) (string, error) {
	if quick {
		return "", errDocsQuick
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if _, err := rewriteBetweenMarkers(doc, ""); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return gitCommit()
}

// flagsLine is args as typed, for quoting the command that made a table.
func flagsLine(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return " " + strings.Join(args, " ")
}

// revision names the commit the command was built at (and "+changes" when its tree had
// uncommitted changes): from the build's version control stamp, else from git in the working
// directory, else "an unknown commit".
func revision() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			return short(rev, dirty)
		}
	}
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "an unknown commit"
	}
	st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	return short(strings.TrimSpace(string(out)), len(bytes.TrimSpace(st)) > 0)
}

func short(rev string, dirty bool) string {
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		return "commit " + rev + "+changes"
	}
	return "commit " + rev
}
