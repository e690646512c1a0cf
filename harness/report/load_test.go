package report_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

func TestLoadRoundTrip(t *testing.T) {
	dir, r := writeSample(t)
	got, err := report.Load(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	want := report.Redact(r, signingKey, bearerToken)
	// Load gives back what was written, up to time zone representation.
	assert.True(t, want.StartedAt.Equal(got.StartedAt))
	got.StartedAt = want.StartedAt
	assert.Equal(t, want.Scenarios[1], got.Scenarios[1])
	assert.Equal(t, want.Requirements, got.Requirements)
	assert.Equal(t, want.Baseline, got.Baseline)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := report.Load(filepath.Join(dir, "missing.json"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, report.ErrInvalidReport)

	bad := map[string]string{
		"syntax":         `{"kit": `,
		"wrong type":     `{"kit": "loomcheck"}`,
		"not an object":  `[1, 2]`,
		"null":           `null`,
		"empty":          ``,
		"trailing":       `{} {}`,
		"unknown status": `{"scenarios": [{"id": "a:1", "status": "flaky"}]}`,
		"step status":    `{"scenarios": [{"id": "a:1", "status": "passed", "steps": [{"status": "meh"}]}]}`,
		"req status":     `{"requirements": [{"id": "R", "status": ""}]}`,
	}
	for name, body := range bad {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
			require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
			_, err := report.Load(p)
			require.ErrorIs(t, err, report.ErrInvalidReport)
			var de *report.DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, p, de.Path)
		})
	}
	var syn *json.SyntaxError
	_, err = report.Decode(strings.NewReader(`{"kit": }`))
	assert.ErrorAs(t, err, &syn)

	r, err := report.Decode(strings.NewReader("\n  {\"kit\": {\"name\": \"x\"}, \"future\": 1}\n"))
	require.NoError(t, err)
	assert.Equal(t, "x", r.Kit.Name)
}
