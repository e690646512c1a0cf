package report_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

var (
	externalRef = regexp.MustCompile(`(?i)(src|href|action|srcset|poster|data)\s*=\s*["']?\s*(https?:)?//`)
	cssImport   = regexp.MustCompile(`(?i)@import|url\(\s*["']?\s*(https?:)?//`)
	scriptTag   = regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`)
	cspMeta     = regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`)
	styleTag    = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
)

func TestHTMLIsSelfContainedAndSafe(t *testing.T) {
	dir, _ := writeSample(t)
	page := string(readFile(t, dir, report.HTMLFile))

	assert.True(t, strings.HasPrefix(page, "<!DOCTYPE html>"))
	assert.False(t, externalRef.MatchString(page), "external resource reference")
	assert.False(t, cssImport.MatchString(page), "CSS import or remote url()")
	assert.NotContains(t, page, "fetch(")
	assert.NotContains(t, page, "XMLHttpRequest")
	assert.NotContains(t, page, ".innerHTML")
	assert.NotContains(t, page, "<script>alert(1)")
	assert.NotContains(t, page, "<img src=x")

	// Exactly two script elements: the data and the code. No payload opened another.
	scripts := scriptTag.FindAllStringSubmatch(page, -1)
	require.Len(t, scripts, 2)
	assert.Equal(t, 2, strings.Count(strings.ToLower(page), "</script"))
	assert.Contains(t, scripts[0][1], `type="application/json"`)
	assert.Contains(t, scripts[0][1], `id="report-data"`)
	payload := scripts[0][2]
	assert.NotContains(t, payload, "<")

	// Outside the data, nothing names a web address at all.
	outside := strings.Replace(page, payload, "", 1)
	assert.NotContains(t, outside, "http://")
	assert.NotContains(t, outside, "https://")

	// The embedded data is the report, and the script-breaking name survives intact.
	var embedded report.Report
	require.NoError(t, json.Unmarshal([]byte(payload), &embedded))
	loaded, err := report.Load(filepath.Join(dir, report.JSONFile))
	require.NoError(t, err)
	assert.Equal(t, loaded, &embedded)
	names := map[string]bool{}
	for _, s := range embedded.Scenarios {
		names[s.Name] = true
	}
	assert.True(t, names[scriptName])

	// The policy allows exactly the inline style and script, by hash, and nothing else.
	m := cspMeta.FindStringSubmatch(page)
	require.NotNil(t, m)
	csp := m[1]
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "'sha256-"+hash(scripts[1][2])+"'")
	style := styleTag.FindStringSubmatch(page)
	require.NotNil(t, style)
	assert.Contains(t, csp, "'sha256-"+hash(style[1])+"'")
	assert.NotContains(t, csp, "unsafe")

	// Documented hooks are present in the page or its script.
	for _, hook := range []string{
		`id="verdict"`, `id="profiles"`, `id="requirements"`, `id="filters"`, `id="scenarios"`,
		`id="filter-empty"`, `'data-filter'`, `'data-status'`, `'scenario'`, `data-ready="false"`,
		`'data-scenario-id'`, `'data-conformant'`, `'data-exit-code'`, `'exchange'`, `'events'`,
	} {
		assert.Contains(t, page, hook)
	}
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}
