package report_test

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness/report"
)

func TestRedact(t *testing.T) {
	r := sampleReport()
	got := report.Redact(r, "", signingKey, bearerToken)
	require.NotSame(t, r, got)

	x := got.Scenarios[0].Exchanges[0]
	assert.Equal(t, []string{report.RedactedText}, x.RequestHeaders["Authorization"])
	assert.Equal(t, []string{report.RedactedText}, x.RequestHeaders["x-api-key"])
	assert.Equal(t, []string{"application/json"}, x.RequestHeaders["Content-Type"])
	assert.Equal(t, []string{report.RedactedText}, x.ResponseHeaders["Set-Cookie"])
	assert.Equal(t, "http://127.0.0.1:8080/conversations?sig="+report.RedactedText, x.URL)
	assert.Equal(t, `{"text":"hello","key":"`+report.RedactedText+`"}`, x.RequestBody)

	y := got.Scenarios[1].Exchanges[0]
	for _, h := range []string{"authorization", "Cookie", "Proxy-Authorization"} {
		assert.Equal(t, []string{report.RedactedText}, y.RequestHeaders[h], h)
	}
	assert.Equal(t, []string{"4"}, y.RequestHeaders["Last-Event-ID"])
	assert.Equal(t, "signed with "+report.RedactedText, y.ResponseBody)
	assert.NotContains(t, got.Scenarios[1].Steps[1].Error, bearerToken)
	assert.NotContains(t, got.Target.Description, signingKey)

	// The input is untouched.
	assert.Equal(t, sampleReport(), r)
	assert.Nil(t, report.Redact(nil, "x"))
}

func TestRedactSecretForms(t *testing.T) {
	const secret = `k"ey/with+odd&chars`
	r := &report.Report{Scenarios: []report.Scenario{{
		ID: "a:1", Status: report.Failed,
		Message:  "in json: {\"k\":" + mustJSON(secret) + "}",
		Failure:  &report.Failure{Got: "path /x/" + url.PathEscape(secret), Want: "query " + url.QueryEscape(secret)},
		Steps:    []report.Step{{Table: [][]string{{"a", secret}}, DocString: secret + secret}},
		Expected: "long " + secret + "-suffix",
		Exchanges: []report.Exchange{{
			Events:     []report.Event{{ID: secret, Data: "x" + secret}},
			Violations: []string{secret},
		}},
	}}, Warnings: []string{secret}}
	got := report.Redact(r, secret, "odd") // "odd" is part of the longer secret: the longer one wins
	var buf bytes.Buffer
	require.NoError(t, report.WriteJSON(&buf, got))
	out := buf.String()
	for _, form := range []string{secret, url.PathEscape(secret), url.QueryEscape(secret), "odd"} {
		assert.NotContains(t, out, form)
	}
	assert.Equal(t, "long "+report.RedactedText+"-suffix", got.Scenarios[0].Expected)
	assert.Equal(t, report.RedactedText+report.RedactedText, got.Scenarios[0].Steps[0].DocString)
	assert.Equal(t, secret, r.Warnings[0])
	assert.Equal(t, `in json: {"k":"`+report.RedactedText+`"}`, got.Scenarios[0].Message)

	raw := &report.Report{SpecVersion: `{"k":"k\"ey/with+odd&chars"}`}
	assert.Equal(t, `{"k":"`+report.RedactedText+`"}`, report.Redact(raw, secret).SpecVersion)
}

func mustJSON(s string) string {
	var b bytes.Buffer
	_ = report.WriteJSON(&b, &report.Report{SpecVersion: s})
	i := strings.Index(b.String(), `"specVersion": `)
	rest := b.String()[i+len(`"specVersion": `):]
	return rest[:strings.IndexByte(rest, '\n')-1]
}

func TestIsCredentialHeader(t *testing.T) {
	for _, h := range []string{"Authorization", "PROXY-AUTHORIZATION", "cookie", "Set-Cookie", "X-API-Key", " x-auth-token "} {
		assert.True(t, report.IsCredentialHeader(h), h)
	}
	for _, h := range []string{"Content-Type", "Last-Event-ID", "X-Request-Id"} {
		assert.False(t, report.IsCredentialHeader(h), h)
	}
}

func TestStatusHelpers(t *testing.T) {
	all := report.Statuses()
	assert.Equal(t, []report.Status{report.Passed, report.NotApplicable, report.Skipped, report.Pending,
		report.Undefined, report.Failed, report.HarnessError}, all)
	all[0] = "mutated"
	assert.Equal(t, report.Passed, report.Statuses()[0])

	for i, a := range report.Statuses() {
		assert.True(t, a.Valid())
		for j, b := range report.Statuses() {
			want := a
			if j > i {
				want = b
			}
			assert.Equal(t, want, report.Worse(a, b), "%s vs %s", a, b)
		}
		assert.Equal(t, a, report.Worse("", a))
		assert.Equal(t, a, report.Worse(a, ""))
		assert.Equal(t, report.Status("bogus"), report.Worse(a, "bogus"))
		assert.Equal(t, report.Status("bogus"), report.Worse("bogus", a))
	}
	assert.False(t, report.Status("bogus").Valid())
	assert.True(t, report.Failed.Failing())
	assert.True(t, report.HarnessError.Failing())
	assert.False(t, report.Undefined.Failing())

	var tot report.Totals
	for _, s := range report.Statuses() {
		tot.Add(s)
		tot.Add(s)
	}
	tot.Add("bogus")
	assert.Equal(t, 14, tot.Total())
	for _, s := range report.Statuses() {
		assert.Equal(t, 2, tot.Count(s))
	}
	assert.Zero(t, tot.Count("bogus"))
}

func TestDiff(t *testing.T) {
	old := sampleReport()
	cur := sampleReport()
	cur.Conformant, cur.ExitCode = true, 0
	// Passed -> failed: regressed.
	cur.Scenarios[0].Status = report.Failed
	// Failed -> passed: fixed.
	cur.Scenarios[1].Status = report.Passed
	// Harness error -> failed: changed.
	cur.Scenarios[2].Status = report.Failed
	// Removed and new.
	cur.Scenarios = slices.Delete(cur.Scenarios, 3, 4)
	cur.Scenarios = append(cur.Scenarios, report.Scenario{ID: "features/new.feature:1", Name: "brand new", Status: report.Passed})
	// A duplicate id: the first occurrence counts.
	cur.Scenarios = append(cur.Scenarios, report.Scenario{ID: "features/core/turns.feature:12", Status: report.Passed})
	// Requirements: passed -> harness-error regresses; failed -> passed fixes.
	cur.Requirements[0].Status = report.HarnessError
	cur.Requirements[1].Status = report.Passed

	d := report.Diff(old, cur)
	ids := func(es []report.DiffEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, string(e.Kind)+" "+e.ID)
		}
		return out
	}
	assert.Equal(t, []string{"scenario features/core/turns.feature:12", "requirement ADR0122-D3-01"}, ids(d.Regressed))
	assert.Equal(t, []string{"scenario features/core/turns.feature:30", "requirement ADR0122-D3-02"}, ids(d.Fixed))
	assert.Equal(t, []string{"scenario features/new.feature:1"}, ids(d.New))
	assert.Equal(t, []string{"scenario features/gateway/route.feature:5"}, ids(d.Removed))
	assert.Equal(t, []string{"scenario features/durability/restart.feature:8"}, ids(d.Changed))
	assert.Equal(t, report.Passed, d.Regressed[0].Old)
	assert.Equal(t, report.Failed, d.Regressed[0].New)
	assert.Equal(t, report.Status(""), d.New[0].Old)
	assert.Equal(t, report.Status(""), d.Removed[0].New)
	assert.Equal(t, "Requests are routed by tenant", d.Removed[0].Name)
	assert.True(t, d.HasRegressions())
	assert.False(t, d.Empty())
	assert.False(t, d.OldConformant)
	assert.True(t, d.NewConformant)

	same := report.Diff(old, sampleReport())
	assert.True(t, same.Empty())
	assert.False(t, same.HasRegressions())

	fromNothing := report.Diff(nil, old)
	assert.Len(t, fromNothing.New, len(old.Scenarios)+len(old.Requirements))

	var buf bytes.Buffer
	require.NoError(t, report.WriteDiff(&buf, d))
	out := buf.String()
	for _, want := range []string{
		"old: not conformant (exit 1)", "new: conformant (exit 0)",
		"Regressed (2):", "Fixed (2):", "New (1):", "Removed (1):", "Changed (1):",
		"features/core/turns.feature:12  passed -> failed",
		"features/new.feature:1  (none) -> passed",
		"2 regressed, 2 fixed, 1 new, 1 removed, 1 changed",
	} {
		assert.Contains(t, out, want)
	}
	buf.Reset()
	require.NoError(t, report.WriteDiff(&buf, same))
	assert.NotContains(t, buf.String(), "Regressed")
}
