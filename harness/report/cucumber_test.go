package report_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

// Cucumber JSON as report tools read it.
type cFeature struct {
	URI      string     `json:"uri"`
	ID       string     `json:"id"`
	Keyword  string     `json:"keyword"`
	Name     string     `json:"name"`
	Elements []cElement `json:"elements"`
}

type cElement struct {
	ID          string  `json:"id"`
	Keyword     string  `json:"keyword"`
	Name        string  `json:"name"`
	Line        int     `json:"line"`
	Type        string  `json:"type"`
	Description string  `json:"description"`
	Tags        []cTag  `json:"tags"`
	Before      []cHook `json:"before"`
	Steps       []cStep `json:"steps"`
	After       []cHook `json:"after"`
}

type cTag struct {
	Name string `json:"name"`
}

type cHook struct {
	Result cResult `json:"result"`
}

type cStep struct {
	Keyword   string `json:"keyword"`
	Name      string `json:"name"`
	DocString *struct {
		Value string `json:"value"`
	} `json:"doc_string"`
	Rows []struct {
		Cells []string `json:"cells"`
	} `json:"rows"`
	Result cResult `json:"result"`
}

type cResult struct {
	Status       string `json:"status"`
	Duration     int64  `json:"duration"`
	ErrorMessage string `json:"error_message"`
}

func TestCucumber(t *testing.T) {
	dir, r := writeSample(t)
	var features []cFeature
	require.NoError(t, json.Unmarshal(readFile(t, dir, report.CucumberFile), &features))
	require.Len(t, features, 6)
	assert.Equal(t, "features/core/turns.feature", features[0].URI)
	assert.Equal(t, "Feature", features[0].Keyword)

	byName := map[string]cElement{}
	n := 0
	valid := map[string]bool{"passed": true, "failed": true, "skipped": true, "undefined": true, "pending": true}
	for _, f := range features {
		for _, e := range f.Elements {
			n++
			byName[e.Name] = e
			assert.Equal(t, "scenario", e.Type)
			assert.True(t, strings.HasPrefix(e.ID, f.ID+";"))
			for _, s := range e.Steps {
				assert.True(t, valid[s.Result.Status], s.Result.Status)
				assert.True(t, strings.HasSuffix(s.Keyword, " "))
			}
			for _, h := range append(e.Before, e.After...) {
				assert.True(t, valid[h.Result.Status], h.Result.Status)
			}
		}
	}
	assert.Equal(t, len(r.Scenarios), n)

	passed := byName["A user turn is answered"]
	assert.Equal(t, 12, passed.Line)
	assert.Equal(t, []cTag{{"@core"}, {"@ADR0122-D3-01"}}, passed.Tags)
	assert.Equal(t, int64(200_000_000), passed.Steps[1].Result.Duration)
	assert.Equal(t, "hello <there>", passed.Steps[1].DocString.Value)
	assert.Equal(t, []string{"delta", "3"}, passed.Steps[2].Rows[1].Cells)
	assert.Empty(t, passed.Before)
	assert.Empty(t, passed.After)

	failed := byName["Replay resumes after the last event id"]
	assert.Equal(t, []string{"passed", "failed", "skipped"}, stepStatuses(failed))
	assert.NotEmpty(t, failed.Steps[1].Result.ErrorMessage)

	harness := byName["A turn survives a restart"]
	assert.Equal(t, []string{"failed"}, stepStatuses(harness))
	require.Len(t, harness.After, 1)
	assert.Equal(t, "failed", harness.After[0].Result.Status)
	assert.True(t, strings.HasPrefix(harness.After[0].Result.ErrorMessage, "harness error"))

	na := byName["Requests are routed by tenant"]
	assert.Empty(t, na.Steps)
	require.Len(t, na.Before, 1)
	assert.Equal(t, "skipped", na.Before[0].Result.Status)
	assert.True(t, strings.HasPrefix(na.Before[0].Result.ErrorMessage, "not applicable"))

	assert.Equal(t, []string{"undefined"}, stepStatuses(byName["Undefined step"]))
	assert.Equal(t, []string{"pending"}, stepStatuses(byName["Pending step"]))
	assert.Equal(t, []string{"skipped"}, stepStatuses(byName["Skipped scenario"]))
	assert.Contains(t, byName["Known failure"].Description, "tracked in issue 42")
	assert.Contains(t, byName["Skipped scenario"].Description, "tagged @wip")
	assert.Empty(t, passed.Description)
	assert.Contains(t, byName, scriptName)
}

func stepStatuses(e cElement) []string {
	var out []string
	for _, s := range e.Steps {
		out = append(out, s.Result.Status)
	}
	return out
}
