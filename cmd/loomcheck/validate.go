package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/loomcheck/loomcheck/schemas"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", usageValidate)
	name := fs.String("schema", "", "the schema to validate against (one of: loomcheck validate --list)")
	list := fs.Bool("list", false, "list the schemas")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *list {
		for _, n := range schemas.Names() {
			fmt.Fprintln(stdout, n)
		}
		return exitConformant
	}
	if *name == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: loomcheck validate --schema NAME FILE")
		return exitUsage
	}
	doc, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck validate: %v\n", err)
		return exitUsage
	}
	err = schemas.Validate(*name, doc)
	var ve *schemas.ValidationError
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "%s: valid %s\n", fs.Arg(0), *name)
		return exitConformant
	case errors.As(err, &ve):
		fmt.Fprintf(stdout, "%s: not a valid %s:\n", fs.Arg(0), *name)
		for _, p := range ve.Problems {
			fmt.Fprintf(stdout, "  %s: %s\n", p.Pointer, p.Message)
		}
		return exitNonConformant
	default:
		fmt.Fprintf(stderr, "loomcheck validate: %v\n", err)
		return exitUsage
	}
}

// usageValidate is what `loomcheck validate -h` prints above the flags.
const usageValidate = `usage: loomcheck validate --schema NAME FILE
       loomcheck validate --list

Checks a JSON document against one of the schemas in schemas/. Exit 0 valid, 1 not valid, 2 usage error.
`
