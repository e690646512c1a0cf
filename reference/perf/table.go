package perf

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Markdown writes the result as a Markdown table (figure, what is measured, the medians of the
// measured and baseline values over the rounds, the ratio's min / median / max, the goal and
// whether the median meets it), then the rows' notes, the skipped figures and the run's settings.
//
//	res.Markdown(os.Stdout)
func (r *Result) Markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| figure | measure | measured | baseline | ratio min / median / max | goal | met |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	var notes []string
	for _, row := range r.Rows {
		base := "—"
		ratio := "—"
		if len(row.Baseline) > 0 {
			base = FormatValue(Median(row.Baseline), row.Unit)
			if row.BaselineName != "" {
				base += " (" + row.BaselineName + ")"
			}
			s := row.Ratio()
			ratio = fmt.Sprintf("%s / %s / %sx", formatRatio(s.Min), formatRatio(s.Median), formatRatio(s.Max))
		}
		met := ""
		if m, ok := row.Met(); ok {
			met = "no"
			if m {
				met = "yes"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.Figure, cell(row.Measure),
			FormatValue(Median(row.Measured), row.Unit), cell(base), ratio, cell(row.Goal.Text), met)
		if row.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s, %s: %s", row.Figure, row.Measure, row.Note))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	if len(r.Skipped) > 0 {
		b.WriteString("\n")
		for _, s := range r.Skipped {
			fmt.Fprintf(&b, "- skipped %s: %s\n", s.Figure, s.Reason)
		}
	}
	quick := ""
	if r.Quick {
		quick = ", quick sizes (not the figures)"
	}
	fmt.Fprintf(&b, "\n%d rounds, baseline and figure runs alternating%s; measured and baseline are medians over the rounds. %s; took %s.\n",
		r.Rounds, quick, r.Machine, r.Took.Round(1e9))
	_, err := io.WriteString(w, b.String())
	return err
}

// JSON writes the result as one indented JSON document: the settings, every row with its value
// in each round, and the skipped figures.
//
//	res.JSON(os.Stdout)
func (r *Result) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonResult{r, r.summaries()})
}

// jsonResult adds each row's summaries to the JSON document.
type jsonResult struct {
	*Result
	Summaries []rowSummary `json:"summaries"`
}

type rowSummary struct {
	Figure   string   `json:"figure"`
	Measure  string   `json:"measure"`
	Measured Summary  `json:"measured"`
	Baseline *Summary `json:"baseline,omitempty"`
	Ratio    *Summary `json:"ratio,omitempty"`
	Met      *bool    `json:"met,omitempty"`
}

func (r *Result) summaries() []rowSummary {
	out := make([]rowSummary, 0, len(r.Rows))
	for _, row := range r.Rows {
		s := rowSummary{Figure: row.Figure, Measure: row.Measure, Measured: finite(Summarize(row.Measured))}
		if len(row.Baseline) > 0 {
			b, q := finite(Summarize(row.Baseline)), finite(row.Ratio())
			s.Baseline, s.Ratio = &b, &q
		}
		if m, ok := row.Met(); ok {
			s.Met = &m
		}
		out = append(out, s)
	}
	return out
}

// finite replaces NaNs (which JSON cannot hold) by 0.
func finite(s Summary) Summary {
	for _, v := range []*float64{&s.Min, &s.Median, &s.Max} {
		if math.IsNaN(*v) || math.IsInf(*v, 0) {
			*v = 0
		}
	}
	return s
}

// FormatValue writes v in unit for the table: bytes in KiB or MiB, rates and counts with three
// significant digits at most, times in ms.
//
//	FormatValue(1536, "bytes")      // "1.5 KiB"
//	FormatValue(412.7, "commits/s") // "413 commits/s"
func FormatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "—"
	}
	if unit == "bytes" {
		switch a := math.Abs(v); {
		case a >= 1<<20:
			return num(v/(1<<20)) + " MiB"
		case a >= 1<<10:
			return num(v/(1<<10)) + " KiB"
		}
		return num(v) + " B"
	}
	if unit == "" {
		return num(v)
	}
	return num(v) + " " + unit
}

// num prints v with three significant digits, more for large integers' whole part.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	case a == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

// formatRatio prints a ratio with two decimals, two significant digits below 0.1.
func formatRatio(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case a >= 10:
		return num(v)
	case a >= 0.1 || a == 0:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// cell escapes the table's separator.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
