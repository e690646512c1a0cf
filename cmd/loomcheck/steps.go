package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/loomcheck/loomcheck/harness"
)

// usageSteps is what `loomcheck steps -h` prints above the flags.
const usageSteps = `usage: loomcheck steps [WORD...] [--area NAME] [--format text|json]

Prints the step vocabulary of the kit: every pattern a feature's step may use, the area it
belongs to (its definitions are in harness/steps/<area>.go: <area>_<topic> for the steps of
features/<area>/<topic>.feature, common_<name> for shared ones) and one line of what it does. With
words, only the steps whose pattern or meaning holds every word (any case). Look here for a step
before writing a new one: a pattern that two steps match, or that no feature uses, fails the
kit's tests.
`

func cmdSteps(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("steps", usageSteps)
	format := fs.String("format", "text", "text (grouped by area) or json (an array of {pattern, area, meaning})")
	areaName := fs.String("area", "", "only the steps of this area")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "loomcheck steps: --format must be text or json, not %q\n", *format)
		return exitUsage
	}
	all := harness.Vocabulary()
	if *areaName != "" {
		known := false
		for _, st := range all {
			known = known || st.Area == *areaName
		}
		if !known {
			fmt.Fprintf(stderr, "loomcheck steps: no area %q (the areas: %s)\n", *areaName, strings.Join(areasOf(all), ", "))
			return exitUsage
		}
	}
	steps := []harness.Step{}
	for _, st := range all {
		if (*areaName == "" || st.Area == *areaName) && holdsAll(st, fs.Args()) {
			steps = append(steps, st)
		}
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(steps); err != nil {
			fmt.Fprintf(stderr, "loomcheck steps: %v\n", err)
			return exitUsage
		}
		return exitConformant
	}
	for i, a := range areasOf(steps) {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		n := 0
		for _, st := range steps {
			if st.Area == a {
				n++
			}
		}
		fmt.Fprintf(stdout, "%s (%d, harness/steps/%s.go)\n", a, n, a)
		for _, st := range steps {
			if st.Area == a {
				fmt.Fprintf(stdout, "  %s\n      %s\n", st.Pattern, st.Meaning)
			}
		}
	}
	if len(steps) == 0 {
		fmt.Fprintln(stderr, "loomcheck steps: no step holds every word")
	}
	return exitConformant
}

// areasOf is the areas of steps, in their first-seen order.
func areasOf(steps []harness.Step) []string {
	var out []string
	seen := map[string]bool{}
	for _, st := range steps {
		if !seen[st.Area] {
			seen[st.Area] = true
			out = append(out, st.Area)
		}
	}
	return out
}

// holdsAll reports whether st's pattern or meaning holds every word, in any case.
func holdsAll(st harness.Step, words []string) bool {
	text := strings.ToLower(st.Pattern + " " + st.Meaning)
	for _, w := range words {
		if !strings.Contains(text, strings.ToLower(w)) {
			return false
		}
	}
	return true
}
