package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/loomcheck/loomcheck/spec"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// usageVersion is what `loomcheck version -h` prints above the flags.
const usageVersion = `usage: loomcheck version    (or: loomcheck --version)

Prints the kit's module version (from the build; "(devel)" for a build from a source tree), the
commit it was built from (when the go command stamped it), the version of the specification it
checks, and the version of its requirement catalogue.
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
	module, commit := "(unknown)", "(unknown: built without version control information)"
	if bi, ok := readBuildInfo(); ok {
		if bi.Main.Version != "" {
			module = bi.Main.Version
		}
		commit = commitOf(bi)
	}
	catalogue := "(unreadable)"
	if cat, err := spec.LoadCatalogue(); err == nil {
		catalogue = cat.Version
	}
	fmt.Fprintf(stdout, "loomcheck %s\ncommit %s\nspec %s\ncatalogue %s\n", module, commit, sutconfig.Version, catalogue)
	return exitConformant
}

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// commitOf names the commit the binary was built from, as the go command stamps it (vcs.revision,
// vcs.time, vcs.modified): "3f2c9e1d0a7b (2026-12-06T13:00:00Z), with uncommitted changes".
func commitOf(bi *debug.BuildInfo) string {
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "(unknown: built without version control information)"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if at != "" {
		rev += " (" + at + ")"
	}
	if modified {
		rev += ", with uncommitted changes"
	}
	return rev
}
