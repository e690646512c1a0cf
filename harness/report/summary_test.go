package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

func TestSummary(t *testing.T) {
	dir, _ := writeSample(t)
	md := string(readFile(t, dir, report.SummaryFile))
	first, _, _ := strings.Cut(md, "\n")
	assert.Contains(t, first, "Not conformant")
	assert.Contains(t, first, "exit code 1")
	for _, want := range []string{
		"loomcheck 0.3.0", "0.1.0", "### Profiles", "| core | yes | ❌ |", "| gateway | no | – |",
		"### Failures (1)", "ADR0122-D3-02", "### Harness errors (1)", "### Expected failures (1)",
		"### Warnings (1)", "Stale entries (1)", "Unexpected failures (1)", "**Contract**",
	} {
		assert.Contains(t, md, want)
	}
	assert.NotContains(t, md, "<b>")
	assert.Contains(t, md, "&lt;b&gt;bold&lt;/b&gt; &amp; co")
}

func TestSummaryStaysSmall(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, report.WriteSummary(&buf, manyFailures(5000)))
	assert.LessOrEqual(t, buf.Len(), report.SummaryMaxBytes)
	md := buf.String()
	assert.Contains(t, md, "### Failures (5000)")
	assert.Regexp(t, `_and \d+ more_`, md)
	// Later sections survive however long the failure list is.
	assert.Contains(t, md, "### Harness errors (5000)")
	assert.Contains(t, md, "### Warnings (5000)")
	assert.Contains(t, md, "Stale entries (5000)")
	assert.Contains(t, md, "**Contract**")
	assert.NotContains(t, md, "report.html has everything")
	assert.NotContains(t, md, "<b>")
	// Every line of a failure table is one table row.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| failure ") {
			assert.True(t, strings.HasSuffix(line, " |"), "a row was cut or broken: %.80q", line)
		}
	}

	conformant := sampleReport()
	conformant.Conformant, conformant.ExitCode = true, 0
	buf.Reset()
	require.NoError(t, report.WriteSummary(&buf, conformant))
	first, _, _ := strings.Cut(buf.String(), "\n")
	assert.Contains(t, first, "No new failures: 1 excused by the baseline, so not conformant (exit code 0)",
		"a pass that the baseline excused a failure for is never headlined conformant")

	for i := range conformant.Scenarios {
		if conformant.Scenarios[i].Expected != "" {
			conformant.Scenarios[i].Status = report.Passed
		}
	}
	buf.Reset()
	require.NoError(t, report.WriteSummary(&buf, conformant))
	first, _, _ = strings.Cut(buf.String(), "\n")
	assert.Equal(t, "## ✅ Conformant (exit code 0)", first)
}
