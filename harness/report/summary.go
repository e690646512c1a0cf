package report

import (
	"fmt"
	"io"
	"strings"
)

// Limits that keep summary.md small enough for a CI job summary whatever the report holds.
const (
	// SummaryMaxBytes bounds the size of summary.md, well below the 1 MiB GitHub accepts for
	// one step's summary.
	//
	//	_ = report.WriteSummary(&buf, r) // buf.Len() <= report.SummaryMaxBytes
	SummaryMaxBytes = 60 * 1024
	// summaryMaxFailures bounds the failure table; the rest are counted.
	summaryMaxFailures = 50
	// summaryMaxList bounds every other list.
	summaryMaxList = 20
	// summaryMaxCell bounds one table cell or list item, in runes.
	summaryMaxCell = 240
	// Byte budgets of the sections, which with the fixed text stay below SummaryMaxBytes.
	budgetProfiles = 6 * 1024
	budgetFailures = 26 * 1024
	budgetHarness  = 6 * 1024
	budgetList     = 3 * 1024
)

// WriteSummary writes r as Markdown sized for a CI job summary (GitHub's step summary, a merge
// request note): a verdict line with the exit code, the kit and spec versions and the target, a
// table of totals, a table per profile (claimed, conformant, counts), the failures that fail the
// run (scenario, requirement, one-line message; at most 50, then "and N more"), harness errors on
// their own, failures the baseline expects, r.Warnings, stale and unexpected baseline entries and
// the contract counts. Failures that break only SHOULD or MAY requirements are not listed as
// failures; the runner reports them through r.Warnings.
//
// Every list is capped in entries and in bytes, so a long list never pushes later sections out;
// every cell is shortened to one line; and the whole output never exceeds SummaryMaxBytes (should
// the sections together still be too long, the text is cut at a line end with a note pointing at
// report.html).
// Text from the report is escaped so it cannot add Markdown or HTML structure.
//
//	f, _ := os.OpenFile(os.Getenv("GITHUB_STEP_SUMMARY"), os.O_APPEND|os.O_WRONLY, 0)
//	err := report.WriteSummary(f, report.Redact(r, token))
func WriteSummary(w io.Writer, r *Report) error {
	if r == nil {
		return ErrNilReport
	}
	var b strings.Builder
	summarize(&b, r)
	out := b.String()
	if len(out) > SummaryMaxBytes {
		const note = "\n_The summary was cut to fit; report.html has everything._\n"
		cut := out[:SummaryMaxBytes-len(note)]
		if i := strings.LastIndexByte(cut, '\n'); i > 0 {
			cut = cut[:i+1]
		}
		out = cut + note
	}
	_, err := io.WriteString(w, out)
	return err
}

func summarize(b *strings.Builder, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	summaryHeading(b, r)
	summaryTotals(b, r)
	summaryProfiles(b, r)
	failures, expected, harness := failedScenarios(r)
	summaryContract(b, r)
	summaryScenarios(b, failures, expected, harness)
	summaryWarnings(b, r)
	c := r.Contract
	p("**Contract** %d exchanges and %d events validated, %d violations.\n", c.ExchangesValidated, c.EventsValidated, c.Violations)
}

// summaryHeading writes the verdict, the kit, spec, target and implementation, the claimed
// profiles, the duration and the claimed profiles that did not run.
func summaryHeading(b *strings.Builder, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	kit := strings.TrimSpace(r.Kit.Name + " " + r.Kit.Version)
	if kit == "" {
		kit = "loomcheck"
	}
	switch {
	case r.Unstarted != "":
		p("## ❌ Not conformant: the system did not start (exit code %d)\n\n%s\n\n", r.ExitCode, md(r.Unstarted))
	case r.Conformant && r.Excused() > 0:
		p("## ☑️ No new failures: %d excused by the baseline, so not conformant (exit code %d)\n\n", r.Excused(), r.ExitCode)
	case r.Conformant:
		p("## ✅ Conformant (exit code %d)\n\n", r.ExitCode)
	case r.ExitCode == 2:
		p("## ⚠️ Not conformant: the run could not be completed (exit code %d)\n\n", r.ExitCode)
	default:
		p("## ❌ Not conformant (exit code %d)\n\n", r.ExitCode)
	}
	p("**Kit** %s · **Spec** %s · **Target** %s", md(kit), md(r.SpecVersion), md(r.Target.Description))
	if r.Target.Driver != "" && !strings.Contains(r.Target.Description, r.Target.Driver) {
		p(" (%s)", md(r.Target.Driver))
	}
	if r.Target.Implementation != "" {
		p(" · **Implementation** %s", md(r.Target.Implementation))
	}
	p("\n\n**Claimed profiles** %s · **Duration** %.1f s\n\n", md(strings.Join(r.Target.Profiles, ", ")), float64(r.DurationMs)/1000)
	if len(r.NotRun) > 0 {
		p("**Claimed profiles not run** %s: none of their scenarios ran, so they are not judged conformant.\n\n", md(strings.Join(r.NotRun, ", ")))
	}
}

// summaryTotals writes the table of the run's totals.
func summaryTotals(b *strings.Builder, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("| Scenarios | Passed | Failed | Harness error | Not applicable | Skipped | Undefined | Pending |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	t := r.Totals
	p("| %d | %d | %d | %d | %d | %d | %d | %d |\n\n", t.Total(), t.Passed, t.Failed, t.HarnessError, t.NotApplicable, t.Skipped, t.Undefined, t.Pending)
}

// summaryProfiles writes the table of the profiles, when there are any.
func summaryProfiles(b *strings.Builder, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(r.Profiles) > 0 {
		p("### Profiles\n\n")
		p("| Profile | Claimed | Conformant | Passed | Failed | Harness error | Not applicable | Skipped | Undefined | Pending |\n")
		p("|---|:---:|:---:|---:|---:|---:|---:|---:|---:|---:|\n")
		rows(b, len(r.Profiles), summaryMaxFailures, budgetProfiles, func(i int) string {
			pr := r.Profiles[i]
			conf := "❌"
			switch {
			case !pr.Claimed:
				conf = "–"
			case pr.Conformant:
				conf = "✅"
			case pr.Verdict == ProfileNotRun:
				conf = "not run"
			}
			claimed := "no"
			if pr.Claimed {
				claimed = "yes"
			}
			pt := pr.Totals
			return fmt.Sprintf("| %s | %s | %s | %d | %d | %d | %d | %d | %d | %d |\n", md(pr.Name), claimed, conf,
				pt.Passed, pt.Failed, pt.HarnessError, pt.NotApplicable, pt.Skipped, pt.Undefined, pt.Pending)
		}, func(rest int) string { return fmt.Sprintf("\n_and %d more profiles_\n", rest) })
		p("\n")
	}
}

// failedScenarios sorts the failed scenarios into failures that count, failures the baseline
// expects, and harness errors.
func failedScenarios(r *Report) (failures, expected, harness []*Scenario) {
	lv := levels(r)
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		switch sc.Status {
		case Failed:
			switch classifyFailure(sc, lv) {
			case gatingFailure:
				failures = append(failures, sc)
			case expectedFailure:
				expected = append(expected, sc)
			}
		case HarnessError:
			harness = append(harness, sc)
		}
	}
	return failures, expected, harness
}

// summaryContract writes the distinct contract violations, when there are any.
func summaryContract(b *strings.Builder, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if fs := r.Contract.Findings; len(fs) > 0 {
		p("### Contract violations (%d) under %s\n\n", len(fs), mdID(r.Contract.Requirement))
		p("Each distinct violation once; the scenarios that met one are judged on their behaviour and note it.\n\n")
		p("| Route | Location | Contract | Seen |\n|---|---|---|---:|\n")
		rows(b, len(fs), summaryMaxList, budgetList, func(i int) string {
			f := fs[i]
			return fmt.Sprintf("| %s | %s | %s | %d× in %d scenarios |\n", md(f.Route), md(f.Location), md(f.Message), f.Occurrences, len(f.Scenarios))
		}, func(rest int) string { return fmt.Sprintf("\n_and %d more_\n", rest) })
		p("\n")
	}
}

// summaryScenarios writes the failures, the harness errors and the expected failures, each when
// there are any.
func summaryScenarios(b *strings.Builder, failures, expected, harness []*Scenario) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(failures) > 0 {
		p("### Failures (%d)\n\n", len(failures))
		scenarioTable(b, failures, summaryMaxFailures, budgetFailures, failureLine)
	}
	if len(harness) > 0 {
		p("### Harness errors (%d)\n\nThe kit itself broke on these scenarios; they say nothing about the system under test.\n\n", len(harness))
		scenarioTable(b, harness, summaryMaxList, budgetHarness, failureLine)
	}
	if len(expected) > 0 {
		p("### Expected failures (%d)\n\nExcused by the baseline.\n\n", len(expected))
		scenarioTable(b, expected, summaryMaxList, budgetList, func(sc *Scenario) string { return sc.Expected })
	}
}

// summaryWarnings writes the warnings and the baseline's stale entries and unexpected failures,
// each when there are any.
func summaryWarnings(b *strings.Builder, r *Report) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(r.Warnings) > 0 {
		p("### Warnings (%d)\n\n", len(r.Warnings))
		list(b, r.Warnings, budgetList, func(s string) string { return s })
	}
	if bl := r.Baseline; bl != nil && (len(bl.Stale) > 0 || len(bl.Unexpected) > 0) {
		p("### Baseline %s\n\n", md(bl.File))
		if len(bl.Stale) > 0 {
			p("Stale entries (%d): these now pass; remove them from the baseline.\n\n", len(bl.Stale))
			list(b, bl.Stale, budgetList, func(e BaselineEntry) string {
				return strings.TrimSpace(e.Requirement+" "+e.Scenario) + " — " + e.Reason
			})
		}
		if len(bl.Unexpected) > 0 {
			p("Unexpected failures (%d): the baseline does not excuse these.\n\n", len(bl.Unexpected))
			list(b, bl.Unexpected, budgetList, func(s string) string { return s })
		}
	}
}

// scenarioTable writes at most limit scenarios as a table, stopping early once the rows take
// budget bytes, then counts the rest.
func scenarioTable(b *strings.Builder, scs []*Scenario, limit, budget int, msg func(*Scenario) string) {
	b.WriteString("| Scenario | Profile | Requirement | Message |\n|---|---|---|---|\n")
	rows(b, len(scs), limit, budget, func(i int) string {
		sc := scs[i]
		reqs := sc.Requirements
		if sc.Failure != nil && sc.Failure.Requirement != "" {
			reqs = []string{sc.Failure.Requirement}
		}
		ids := make([]string, len(reqs))
		for i, id := range reqs {
			ids[i] = mdID(id)
		}
		req := strings.Join(ids, ", ")
		if req == "" {
			req = md("")
		}
		return fmt.Sprintf("| %s<br>%s | %s | %s | %s |\n", md(sc.Name), mdID(sc.ID), md(sc.Profile), req, md(msg(sc)))
	}, func(rest int) string { return fmt.Sprintf("\n_and %d more_\n", rest) })
	b.WriteString("\n")
}

// list writes items as a bullet list under the same limits as scenarioTable.
func list[T any](b *strings.Builder, items []T, budget int, text func(T) string) {
	rows(b, len(items), summaryMaxList, budget, func(i int) string {
		return "- " + md(text(items[i])) + "\n"
	}, func(rest int) string { return fmt.Sprintf("- _and %d more_\n", rest) })
	b.WriteString("\n")
}

// rows writes row(i) for i in [0, n) until limit rows are written or the next row would take the
// rows past budget bytes; then it writes more(rest) for the rows left out.
func rows(b *strings.Builder, n, limit, budget int, row func(int) string, more func(int) string) {
	used := 0
	for i := range n {
		line := row(i)
		if i == limit || used+len(line) > budget {
			b.WriteString(more(n - i))
			return
		}
		used += len(line)
		b.WriteString(line)
	}
}

// mdEscaper neutralises Markdown and HTML in report text.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", `*`, `\*`, `_`, `\_`, `[`, `\[`, `]`, `\]`, `|`, `\|`, `#`, `\#`,
	`~`, `\~`, `!`, `\!`, `<`, `&lt;`, `>`, `&gt;`, `&`, `&amp;`,
)

// md renders report text as one short, escaped line of Markdown.
// mdID is an id as a code span that a renderer does not break across lines: its hyphens are
// non-breaking hyphens (U+2011), which `loomcheck explain` and `--tags` read as "-" when the id
// is pasted back.
func mdID(s string) string {
	s = strings.NewReplacer("`", "", "|", "").Replace(oneLine(s))
	if s == "" {
		return "–"
	}
	return "`" + strings.ReplaceAll(s, "-", NonBreakingHyphen) + "`"
}

// NonBreakingHyphen (U+2011) stands for "-" in the ids of summary.md, so that they do not wrap.
const NonBreakingHyphen = "\u2011"

func md(s string) string {
	s = oneLine(s)
	if s == "" {
		return "–"
	}
	return mdEscaper.Replace(truncate(s, summaryMaxCell))
}
