// Command loomcheck is the Loom conformance kit: it runs the conformance suite against a system
// under test and writes reports, serves the reference engine, and reads the catalogue.
//
//	loomcheck run                        # the whole suite against the embedded reference
//	loomcheck run --sut-cmd "my-server"  # against your implementation, as a process
//	loomcheck serve                      # the reference engine over HTTP on 127.0.0.1
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit statuses.
const (
	exitConformant    = 0
	exitNonConformant = 1
	exitUsage         = 2
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "run the conformance suite and write reports", cmdRun},
		{"serve", "serve the reference engine over HTTP", cmdServe},
		{"world", "run the world alone, for a remote target", cmdWorld},
		{"requirements", "print the traceability matrix and coverage", cmdRequirements},
		{"explain", "explain one requirement", cmdExplain},
		{"steps", "list the step vocabulary the features are written in", cmdSteps},
		{"report", "render or compare reports (report diff OLD NEW)", cmdReport},
		{"validate", "validate a JSON document against a schema", cmdValidate},
		{"selftest", "prove the kit catches the broken variants in fixtures/defects", cmdSelftest},
		{"variance", "prove the spec-allowed variants in fixtures/variants stay conformant", cmdVariance},
		{"mutate", "mutation testing of the reference: how many small changes the suite notices", cmdMutate},
		{"explore", "crash the reference after every durable write of the canonical dialogues", cmdExplore},
		{"backup", "copy the reference engine's store to one file, while it serves", cmdBackup},
		{"restore", "make a new data directory from a backup, checking every record", cmdRestore},
		{"bench", "measure the reference engine's performance figures beside their baselines", cmdBench},
		{"version", "print the kit's module version, the spec version and the catalogue version", cmdVersion},
	}
}

func main() { os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr)) }

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitConformant
	case "-version", "--version":
		return cmdVersion(nil, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "loomcheck: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: loomcheck <command> [arguments] [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-13s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nloomcheck <command> -h says what a command does and which arguments and flags it takes;")
	fmt.Fprintln(w, "flags may come before or after the arguments. loomcheck --version prints the versions.")
	fmt.Fprintln(w, "Exit status: 0 conformant, 1 not conformant, 2 usage or harness error.")
}

// newFlagSet returns a flag set whose -h prints about (what the command does and its usage
// line) and then the flags.
func newFlagSet(name, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, about)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses flags, printing usage errors; ok false means exit with status code. Flags may
// come before and after the positional arguments (`report diff OLD NEW --x` as `--x OLD NEW`);
// after "--" everything is positional. fs.Args() then holds the positional arguments in order.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitConformant, false
			}
			return exitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if i := len(args) - len(rest); i > 0 && args[i-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	_ = fs.Parse(append([]string{"--"}, positional...))
	return 0, true
}
