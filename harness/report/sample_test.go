package report_test

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/loomcheck/loomcheck/harness/report"
)

// Credentials the sample report carries and that must never reach a written file.
const (
	signingKey  = "sk_live+Zq9/Wm3Kx=="
	bearerToken = "tok-7f3e9c1b5d2a"
	cookieValue = "session=cafe4b1d"
	apiKeyValue = "ak-91b2c3"
	scriptName  = `</script><script>alert(1)</script>`
)

var started = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

// sampleReport builds a report with every status, baseline results, warnings, credential headers
// and a secret in URLs and bodies. Each call returns a fresh, independent value.
func sampleReport() *report.Report {
	authHeaders := func() map[string][]string {
		return map[string][]string{
			"Authorization": {"Bearer " + bearerToken},
			"Content-Type":  {"application/json"},
			"x-api-key":     {apiKeyValue},
		}
	}
	r := &report.Report{
		Kit:         report.Kit{Name: "loomcheck", Version: "0.3.0"},
		SpecVersion: "0.1.0",
		Target: report.Target{
			Driver:         "process",
			Description:    "./bin/loom --data /tmp/loom --key " + signingKey,
			Implementation: "loom-ref 1.2 <b>bold</b> & co",
			Profiles:       []string{"core", "durability"},
		},
		StartedAt:  started,
		DurationMs: 12345,
		Conformant: false,
		ExitCode:   1,
		Contract: report.Contract{ExchangesValidated: 12, EventsValidated: 40, Violations: 1,
			Requirement: "ADR0122-D6-01", Rule: "Every exchange follows spec/openapi.yaml.",
			Findings: []report.ContractFinding{{
				Route: "POST /conversations", Location: "header:X-Content-Type-Options",
				Schema:  "#/paths/~1conversations/post/responses/201/headers/X-Content-Type-Options",
				Message: "required header is missing", Occurrences: 1, Scenarios: []string{"features/core/turns.feature:12"},
				Example: &report.Exchange{Method: "POST", URL: "/conversations?key=" + signingKey, Status: 201,
					RequestHeaders: authHeaders(), ResponseBody: `{"id":"c1"}`},
			}}},
		Warnings: []string{"ADR0122-D3-09 (SHOULD) failed: retries are not jittered"},
	}
	r.Scenarios = []report.Scenario{
		{
			ID: "features/core/turns.feature:12", Feature: "Turns", Name: "A user turn is answered",
			Tags: []string{"@core", "@ADR0122-D3-01"}, Profile: "core", Requirements: []string{"ADR0122-D3-01"},
			Status: report.Passed, DurationMs: 250,
			Notes: []string{"contract violation: POST /conversations header:X-Content-Type-Options: required header is missing"},
			Steps: []report.Step{
				{Keyword: "Given ", Text: "a new conversation", Status: report.Passed, DurationMs: 20},
				{Keyword: "When ", Text: "the user says", Status: report.Passed, DurationMs: 200, DocString: "hello <there>"},
				{Keyword: "Then ", Text: "the events are", Status: report.Passed, DurationMs: 30,
					Table: [][]string{{"event", "count"}, {"delta", "3"}}},
			},
			Exchanges: []report.Exchange{{
				Method: "POST", URL: "http://127.0.0.1:8080/conversations?sig=" + url.QueryEscape(signingKey), Status: 201,
				RequestHeaders: authHeaders(), RequestBody: `{"text":"hello","key":"` + signingKey + `"}`,
				ResponseHeaders: map[string][]string{"Set-Cookie": {cookieValue}, "Content-Type": {"text/event-stream"}},
				Events: []report.Event{
					{ID: "1", Type: "turn.started", Data: `{"turn":1}`},
					{ID: "2", Type: "turn.delta", Data: `{"text":"</script><img src=x onerror=alert(2)>"}`},
				},
				DurationMs: 180,
			}},
		},
		{
			ID: "features/core/turns.feature:30", Feature: "Turns", Name: "Replay resumes after the last event id",
			Tags: []string{"@core"}, Profile: "core", Requirements: []string{"ADR0122-D3-02", "ADR0122-D3-03"},
			Status: report.Failed, DurationMs: 410, Message: "replay started at the beginning",
			SystemOutput: "[node-1] replaying c1 from 0\nAuthorization: Bearer " + bearerToken + "\n",
			Failure: &report.Failure{
				Requirement: "ADR0122-D3-02", Rule: "A resumed stream starts after Last-Event-ID.",
				Operation: "GET /conversations/c1/events", Got: "first event id 1", Want: "first event id 5",
			},
			Steps: []report.Step{
				{Keyword: "Given ", Text: "a conversation with 4 events", Status: report.Passed, DurationMs: 100},
				{Keyword: "When ", Text: "the client resumes from event 4", Status: report.Failed, DurationMs: 300,
					Error: "got first event id 1, want 5 (bearer " + bearerToken + ")\n\x1b[31mterminal colour\x1b[0m ]]> \x00"},
				{Keyword: "Then ", Text: "nothing is repeated", Status: report.Skipped},
			},
			Exchanges: []report.Exchange{{
				Method: "GET", URL: "http://127.0.0.1:8080/conversations/c1/events", Status: 200,
				RequestHeaders: map[string][]string{
					"authorization": {"Bearer " + bearerToken}, "Cookie": {cookieValue},
					"Proxy-Authorization": {"Basic dXNlcjpwYXNz"}, "Last-Event-ID": {"4"},
				},
				ResponseBody: "signed with " + signingKey,
				Violations:   []string{"response: event 1 repeated"},
				DurationMs:   290,
			}},
		},
		{
			ID: "features/durability/restart.feature:8", Feature: "Restart", Name: "A turn survives a restart",
			Tags: []string{"@durability"}, Profile: "durability", Requirements: []string{"ADR0122-D4-01"},
			Status: report.HarnessError, DurationMs: 5, Message: "fake model server failed to start: address in use",
			Steps: []report.Step{
				{Keyword: "Given ", Text: "a running system", Status: report.HarnessError, Error: "listen tcp: address in use"},
			},
		},
		{
			ID: "features/gateway/route.feature:5", Feature: "Gateway routing", Name: "Requests are routed by tenant",
			Tags: []string{"@gateway"}, Profile: "gateway", Requirements: []string{"ADR0130-G1-01"},
			Status: report.NotApplicable, Message: "profile gateway is not claimed",
		},
		{
			ID: "features/core/budget.feature:3", Feature: "Budget", Name: "Skipped scenario",
			Tags: []string{"@core"}, Profile: "core", Requirements: []string{"ADR0122-D5-01"},
			Status: report.Skipped, Message: "tagged @wip",
			Steps: []report.Step{{Keyword: "Given ", Text: "a budget", Status: report.Skipped}},
		},
		{
			ID: "features/core/budget.feature:9", Feature: "Budget", Name: "Undefined step",
			Tags: []string{"@core"}, Profile: "core", Requirements: []string{"ADR0122-D5-02"},
			Status: report.Undefined,
			Steps:  []report.Step{{Keyword: "Given ", Text: "a step nobody wrote", Status: report.Undefined}},
		},
		{
			ID: "features/core/budget.feature:15", Feature: "Budget", Name: "Pending step",
			Tags: []string{"@core"}, Profile: "core", Requirements: []string{"ADR0122-D5-03"},
			Status: report.Pending,
			Steps:  []report.Step{{Keyword: "Given ", Text: "a step not done yet", Status: report.Pending}},
		},
		{
			ID: "features/durability/restart.feature:20", Feature: "Restart", Name: "Known failure",
			Tags: []string{"@durability"}, Profile: "durability", Requirements: []string{"ADR0122-D4-02"},
			Status: report.Failed, DurationMs: 60, Expected: "tracked in issue 42",
			Failure: &report.Failure{Operation: "POST /restart", Got: "500", Want: "204"},
			Steps:   []report.Step{{Keyword: "When ", Text: "the system restarts", Status: report.Failed, Error: "status 500"}},
		},
		{
			ID: "features/core/retry.feature:4", Feature: "Retry", Name: "Retries are jittered",
			Tags: []string{"@core"}, Profile: "core", Requirements: []string{"ADR0122-D3-09"},
			Status: report.Failed, DurationMs: 70,
			Failure: &report.Failure{Requirement: "ADR0122-D3-09", Operation: "retry timing", Got: "fixed 1s", Want: "jittered"},
			Steps:   []report.Step{{Keyword: "Then ", Text: "retries are jittered", Status: report.Failed, Error: "fixed delay"}},
		},
		{
			ID: "features/core/escape.feature:2", Feature: "Escaping <b>&amp;</b>", Name: scriptName,
			Tags: []string{"@core"}, Profile: "core", Requirements: []string{"ADR0122-D3-01"},
			Status: report.Passed, DurationMs: 1,
			Steps: []report.Step{{Keyword: "Given ", Text: `text with "quotes" & <angle> brackets ]]>`, Status: report.Passed}},
		},
	}
	r.Requirements = []report.RequirementResult{
		{ID: "ADR0122-D3-01", Level: "MUST", Profile: "core", Source: "ADR-0122 §3", Rule: "A user turn gets an answer.", Status: report.Passed,
			Scenarios: []string{"features/core/turns.feature:12", "features/core/escape.feature:2"}},
		{ID: "ADR0122-D3-02", Level: "MUST", Profile: "core", Source: "ADR-0122 §3", Rule: "A resumed stream starts after Last-Event-ID.", Status: report.Failed,
			Scenarios: []string{"features/core/turns.feature:30"}},
		{ID: "ADR0122-D3-03", Level: "MUST", Profile: "core", Source: "ADR-0122 §3", Rule: "No event is repeated.", Status: report.Failed,
			Scenarios: []string{"features/core/turns.feature:30"}},
		{ID: "ADR0122-D3-09", Level: "SHOULD", Profile: "core", Source: "ADR-0122 §3", Rule: "Retries are jittered.", Status: report.Failed,
			Scenarios: []string{"features/core/retry.feature:4"}},
		{ID: "ADR0122-D4-01", Level: "MUST", Profile: "durability", Source: "ADR-0122 §4", Rule: "Turns survive restarts.", Status: report.HarnessError,
			Scenarios: []string{"features/durability/restart.feature:8"}},
		{ID: "ADR0122-D4-02", Level: "MUST", Profile: "durability", Source: "ADR-0122 §4", Rule: "Restart answers 204.", Status: report.Failed,
			Scenarios: []string{"features/durability/restart.feature:20"}},
		{ID: "ADR0130-G1-01", Level: "MUST", Profile: "gateway", Source: "ADR-0130 §1", Rule: "Route by tenant.", Status: report.NotApplicable,
			Scenarios: []string{"features/gateway/route.feature:5"}},
		{ID: "ADR0122-D5-01", Level: "MAY", Profile: "core", Source: "ADR-0122 §5", Rule: "Budgets.", Status: report.Skipped, Scenarios: []string{}},
	}
	r.Baseline = &report.BaselineResult{
		File:       "baseline.yaml",
		Expected:   []report.BaselineEntry{{Scenario: "features/durability/restart.feature:20", Reason: "tracked in issue 42"}},
		Stale:      []report.BaselineEntry{{Requirement: "ADR0122-D3-01", Reason: "was flaky"}},
		Unexpected: []string{"features/core/turns.feature:30"},
	}
	var totals report.Totals
	profiles := map[string]*report.ProfileResult{}
	var order []string
	for _, sc := range r.Scenarios {
		totals.Add(sc.Status)
		p := profiles[sc.Profile]
		if p == nil {
			claimed := sc.Profile == "core" || sc.Profile == "durability"
			p = &report.ProfileResult{Name: sc.Profile, Claimed: claimed}
			profiles[sc.Profile] = p
			order = append(order, sc.Profile)
		}
		p.Totals.Add(sc.Status)
	}
	r.Totals = totals
	for _, name := range order {
		r.Profiles = append(r.Profiles, *profiles[name])
	}
	return r
}

// manyFailures builds a report with n failing scenarios carrying long, markup-heavy messages.
func manyFailures(n int) *report.Report {
	r := sampleReport()
	r.Scenarios = nil
	long := strings.Repeat("<b>|*_`x`_*|</b> ", 200)
	for i := range n {
		r.Scenarios = append(r.Scenarios, report.Scenario{
			ID: fmt.Sprintf("features/core/many.feature:%d", i+1), Feature: "Many", Name: fmt.Sprintf("failure %d %s", i, long),
			Profile: "core", Requirements: []string{"ADR0122-D3-02"}, Status: report.Failed, Message: long,
			Failure: &report.Failure{Requirement: "ADR0122-D3-02", Operation: "GET /x", Got: long, Want: long},
		})
	}
	for i := range n {
		r.Scenarios = append(r.Scenarios, report.Scenario{
			ID: fmt.Sprintf("features/core/broken.feature:%d", i+1), Feature: "Broken", Name: "harness " + long,
			Profile: "core", Status: report.HarnessError, Message: long,
		})
	}
	r.Baseline.Stale = nil
	for i := range n {
		r.Baseline.Stale = append(r.Baseline.Stale, report.BaselineEntry{Scenario: fmt.Sprintf("s%d", i), Reason: long})
	}
	r.Warnings = nil
	for i := range n {
		r.Warnings = append(r.Warnings, fmt.Sprintf("warning %d %s", i, long))
	}
	r.Totals = report.Totals{Failed: n, HarnessError: n}
	return r
}
