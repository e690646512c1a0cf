package main

import (
	"fmt"
	"io"

	"github.com/loomcheck/loomcheck/harness/report"
)

func cmdReport(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageReport)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usageReport)
		return exitConformant
	case "diff":
		fs := newFlagSet("report diff", usageReportDiff)
		if code, ok := parse(fs, args[1:], stderr); !ok {
			return code
		}
		if fs.NArg() != 2 {
			fmt.Fprintln(stderr, "usage: loomcheck report diff OLD/report.json NEW/report.json")
			return exitUsage
		}
		older, err := report.Load(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck report diff: %v\n", err)
			return exitUsage
		}
		newer, err := report.Load(fs.Arg(1))
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck report diff: %v\n", err)
			return exitUsage
		}
		d := report.Diff(older, newer)
		if err := report.WriteDiff(stdout, d); err != nil {
			fmt.Fprintf(stderr, "loomcheck report diff: %v\n", err)
			return exitUsage
		}
		if d.HasRegressions() {
			return exitNonConformant
		}
		return exitConformant
	case "render":
		fs := newFlagSet("report render", usageReportRender)
		out := fs.String("out", "", "directory to write every format into")
		if code, ok := parse(fs, args[1:], stderr); !ok {
			return code
		}
		if fs.NArg() != 1 || *out == "" {
			fmt.Fprintln(stderr, "usage: loomcheck report render REPORT.json --out DIR")
			return exitUsage
		}
		rep, err := report.Load(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "loomcheck report render: %v\n", err)
			return exitUsage
		}
		if err := report.WriteAll(*out, rep); err != nil {
			fmt.Fprintf(stderr, "loomcheck report render: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(stdout, "wrote %s\n", *out)
		return exitConformant
	}
	fmt.Fprintf(stderr, "loomcheck report: unknown subcommand %q\n\n%s", args[0], usageReport)
	return exitUsage
}

// usageReportDiff is what `loomcheck report diff -h` prints above the flags.
const usageReportDiff = `usage: loomcheck report diff OLD/report.json NEW/report.json

Shows the scenarios and requirements whose outcome differs between two reports.
Exit 1 when NEW regressed, 0 otherwise, 2 on a usage error.
`

// usageReportRender is what `loomcheck report render -h` prints above the flags.
const usageReportRender = `usage: loomcheck report render REPORT.json --out DIR

Writes every report format (junit.xml, cucumber.json, summary.md, report.html, report.json) from one report.json.
`

// usageReport is what `loomcheck report -h` prints.
const usageReport = `usage: loomcheck report diff OLD/report.json NEW/report.json
       loomcheck report render REPORT.json --out DIR

Reads reports written by loomcheck run:
  diff    shows the scenarios and requirements whose outcome differs (exit 1 when NEW regressed)
  render  writes every report format from one report.json into DIR

loomcheck report <subcommand> -h shows its flags.
`
