package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/loomcheck/loomcheck/harness/report"
)

func cmdReport(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: loomcheck report diff OLD NEW | loomcheck report render REPORT.json --out DIR")
		return exitUsage
	}
	switch args[0] {
	case "diff":
		fs := flag.NewFlagSet("report diff", flag.ContinueOnError)
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
		fs := flag.NewFlagSet("report render", flag.ContinueOnError)
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
	fmt.Fprintf(stderr, "loomcheck report: unknown subcommand %q\n", args[0])
	return exitUsage
}
