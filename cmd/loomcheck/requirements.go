package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/spec"
)

func cmdRequirements(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("requirements", usageRequirements)
	asJSON := fs.Bool("json", false, "print the matrix as JSON")
	profile := fs.String("profile", "", "only this profile")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	cat, err := spec.LoadCatalogue()
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck requirements: %v\n", err)
		return exitUsage
	}
	matrix, problems, err := harness.Trace(cat, nil)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck requirements: %v\n", err)
		return exitUsage
	}
	type row struct {
		spec.Requirement
		Scenarios []string `json:"scenarios"`
	}
	var rows []row
	covered := 0
	for _, q := range cat.Requirements {
		if *profile != "" && q.Profile != *profile {
			continue
		}
		var ids []string
		for _, ref := range matrix[q.ID] {
			ids = append(ids, ref.ID)
		}
		if len(ids) > 0 {
			covered++
		}
		rows = append(rows, row{Requirement: q, Scenarios: ids})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"version": cat.Version, "requirements": rows, "covered": covered, "problems": problems})
	} else {
		fmt.Fprintf(stdout, "Loom requirement catalogue %s\n\n", cat.Version)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REQUIREMENT\tLEVEL\tPROFILE\tSCENARIOS")
		for _, r := range rows {
			sc := strings.Join(r.Scenarios, " ")
			if sc == "" {
				sc = "(none)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Level, r.Profile, sc)
		}
		tw.Flush()
		fmt.Fprintf(stdout, "\ncoverage: %d of %d requirements have a scenario (%.0f%%)\n", covered, len(rows), 100*float64(covered)/float64(max(1, len(rows))))
		for _, p := range problems {
			fmt.Fprintln(stdout, "problem: "+p)
		}
	}
	if len(problems) > 0 {
		return exitNonConformant
	}
	return exitConformant
}

func cmdExplain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", usageExplain)
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: loomcheck explain REQUIREMENT-ID")
		return exitUsage
	}
	cat, err := spec.LoadCatalogue()
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck explain: %v\n", err)
		return exitUsage
	}
	id := strings.ReplaceAll(fs.Arg(0), report.NonBreakingHyphen, "-") // pasted from summary.md
	q, ok := cat.Get(id)
	if !ok {
		ids := make([]string, 0, len(cat.Requirements))
		for _, q := range cat.Requirements {
			ids = append(ids, q.ID)
		}
		fmt.Fprintf(stderr, "loomcheck explain: %s is not in catalogue %s%s\n", fs.Arg(0), cat.Version, harness.DidYouMean(id, ids))
		return exitUsage
	}
	matrix, _, err := harness.Trace(cat, nil)
	if err != nil {
		fmt.Fprintf(stderr, "loomcheck explain: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "%s (%s, profile %s)\n\n%s\n\nSource: %s\n", q.ID, q.Level, q.Profile, q.Rule, q.Source)
	if q.FirstCut != "" {
		fmt.Fprintf(stdout, "Rules out: %s\n", q.FirstCut)
	}
	fmt.Fprintln(stdout, "\nProved by:")
	for _, ref := range matrix[q.ID] {
		fmt.Fprintf(stdout, "  %s  %s\n", ref.ID, ref.Name)
	}
	if len(matrix[q.ID]) == 0 {
		fmt.Fprintln(stdout, "  (no scenario yet)")
	}
	return exitConformant
}

// usageRequirements is what `loomcheck requirements -h` prints above the flags.
const usageRequirements = `usage: loomcheck requirements [flags]

Prints the traceability matrix: every catalogued requirement, its level and profile, and the
scenarios that prove it. Exit 1 when the catalogue and the features disagree.
`

// usageExplain is what `loomcheck explain -h` prints above the flags.
const usageExplain = `usage: loomcheck explain REQUIREMENT-ID

Prints one requirement: its rule, its source, and the scenarios that prove it.
`
