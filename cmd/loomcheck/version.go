package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/loomcheck/loomcheck/spec"
)

// usageVersion is what `loomcheck version -h` prints above the flags.
const usageVersion = `usage: loomcheck version    (or: loomcheck --version)

Prints the kit's module version (from the build; "(devel)" for a build from a source tree), the
version of the specification it checks, and the version of its requirement catalogue.
`

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", usageVersion)
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loomcheck version: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	module := "(unknown)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		module = bi.Main.Version
	}
	catalogue := "(unreadable)"
	if cat, err := spec.LoadCatalogue(); err == nil {
		catalogue = cat.Version
	}
	fmt.Fprintf(stdout, "loomcheck %s\nspec %s\ncatalogue %s\n", module, spec.Version, catalogue)
	return exitConformant
}
