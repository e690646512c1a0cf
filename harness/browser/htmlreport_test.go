package browser

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// injectedFlag is the window property the report's script-injection payloads would set if any of
// them ever ran.
const injectedFlag = "__loomcheckInjected"

// Payloads that would run script, or fetch something, if the report ever treated text as markup.
var (
	scriptPayload = `</script><script>window.` + injectedFlag + `="name"</script>`
	imgPayload    = `<img src="x" onerror="window.` + injectedFlag + `='img'">`
	svgPayload    = `<svg onload="window.` + injectedFlag + `='svg'"></svg>`
)

// secretToken is a credential the report carries and WriteAll must redact.
const secretToken = "tok-3b9f0c2e7d41"

// richReport builds a report with every status, a baseline, warnings, exchanges with events and
// credentials, and markup payloads in the fields a reader sees.
func richReport() *report.Report {
	r := &report.Report{
		Kit:         report.Kit{Name: "loomcheck", Version: "0.3.0"},
		SpecVersion: sutconfig.Version,
		Target: report.Target{
			Driver: "process", Description: "./bin/loom serve " + svgPayload,
			Implementation: "loom-ref 1.2 <b>bold</b> & co", Profiles: []string{"core", "durability"},
		},
		StartedAt:  time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC),
		DurationMs: 12345,
		Conformant: false,
		ExitCode:   1,
		Contract: report.Contract{ExchangesValidated: 12, EventsValidated: 40, Violations: 1,
			Requirement: "ADR0122-D6-01", Rule: "Every exchange follows the contract.",
			Findings: []report.ContractFinding{{
				Route: "POST /conversations", Location: "header:X-Content-Type-Options",
				Schema:  "#/paths/~1conversations/post/responses/201/headers/X-Content-Type-Options",
				Message: "required header is missing " + scriptPayload, Occurrences: 1,
				Scenarios: []string{"features/core/turns.feature:12"},
				Example: &report.Exchange{Method: "POST", URL: "/conversations", Status: 201,
					RequestHeaders: map[string][]string{"Authorization": {"Bearer " + secretToken}}, ResponseBody: imgPayload},
			}}},
		Warnings: []string{"ADR0122-D3-09 (SHOULD) failed: retries are not jittered " + imgPayload},
	}
	auth := map[string][]string{"Authorization": {"Bearer " + secretToken}, "Content-Type": {"application/json"}}
	r.Scenarios = []report.Scenario{
		{
			ID: "features/core/turns.feature:12", Feature: "Turns", Name: "A user turn is answered",
			Profile: "core", Requirements: []string{"ADR0122-D3-01"}, Status: report.Passed, DurationMs: 250,
			Notes: []string{"contract violation (reported once among the contract findings): POST /conversations header:X-Content-Type-Options"},
			Steps: []report.Step{
				{Keyword: "Given ", Text: "a new conversation", Status: report.Passed, DurationMs: 20},
				{Keyword: "When ", Text: "the user says", Status: report.Passed, DurationMs: 200, DocString: "hello " + imgPayload},
				{Keyword: "Then ", Text: "the events are", Status: report.Passed, Table: [][]string{{"event", "count"}, {"delta", svgPayload}}},
			},
			Exchanges: []report.Exchange{{
				Method: "POST", URL: "http://127.0.0.1:8080/conversations", Status: 201, RequestHeaders: auth,
				RequestBody: `{"text":"hello"}`, ResponseBody: imgPayload,
				Events: []report.Event{
					{ID: "0.1", Type: "message", Data: `{"ord":1}`},
					{Type: "delta", Data: `{"text":"` + strings.ReplaceAll(scriptPayload, `"`, `\"`) + `"}`},
				},
				DurationMs: 180,
			}},
		},
		{
			ID: "features/core/turns.feature:30", Feature: "Turns", Name: "Replay resumes after the last event id",
			Profile: "core", Requirements: []string{"ADR0122-D3-02", "ADR0122-D3-03"}, Status: report.Failed, DurationMs: 410,
			Message: "replay started at the beginning " + scriptPayload,
			Failure: &report.Failure{Requirement: "ADR0122-D3-02", Rule: "A resumed stream starts after Last-Event-ID.",
				Operation: "GET /conversations/c1/events", Got: "first event id 1 " + imgPayload, Want: "first event id 5"},
			Steps: []report.Step{
				{Keyword: "Given ", Text: "a conversation with 4 events", Status: report.Passed},
				{Keyword: "When ", Text: "the client resumes from event 4", Status: report.Failed, Error: "got 1, want 5 (bearer " + secretToken + ")"},
				{Keyword: "Then ", Text: "nothing is repeated", Status: report.Skipped},
			},
		},
		{
			ID: "features/durability/restart.feature:8", Feature: "Restart", Name: "A turn survives a restart",
			Profile: "durability", Requirements: []string{"ADR0122-D4-01"}, Status: report.HarnessError, Message: "address in use",
			SystemOutput: "[node-1] listen tcp 127.0.0.1:4000: address in use " + imgPayload + "\n",
			Steps:        []report.Step{{Keyword: "Given ", Text: "a running system", Status: report.HarnessError, Error: "listen tcp: address in use"}},
		},
		{
			ID: "features/gateway/route.feature:5", Feature: "Gateway routing", Name: "Requests are routed by tenant",
			Profile: "gateway", Requirements: []string{"ADR0130-G1-01"}, Status: report.NotApplicable, Message: "profile gateway is not claimed",
		},
		{
			ID: "features/core/budget.feature:3", Feature: "Budget", Name: "Skipped scenario", Profile: "core",
			Requirements: []string{"ADR0122-D5-01"}, Status: report.Skipped, Message: "tagged @wip",
			Steps: []report.Step{{Keyword: "Given ", Text: "a budget", Status: report.Skipped}},
		},
		{
			ID: "features/core/budget.feature:9", Feature: "Budget", Name: "Undefined step", Profile: "core",
			Requirements: []string{"ADR0122-D5-02"}, Status: report.Undefined,
			Steps: []report.Step{{Keyword: "Given ", Text: "a step nobody wrote", Status: report.Undefined}},
		},
		{
			ID: "features/core/budget.feature:15", Feature: "Budget", Name: "Pending step", Profile: "core",
			Requirements: []string{"ADR0122-D5-03"}, Status: report.Pending,
			Steps: []report.Step{{Keyword: "Given ", Text: "a step not done yet", Status: report.Pending}},
		},
		{
			ID: "features/durability/restart.feature:20", Feature: "Restart", Name: "Known failure", Profile: "durability",
			Requirements: []string{"ADR0122-D4-02"}, Status: report.Failed, Expected: "tracked in issue 42",
			Failure: &report.Failure{Operation: "POST /restart", Got: "500", Want: "204"},
			Steps:   []report.Step{{Keyword: "When ", Text: "the system restarts", Status: report.Failed, Error: "status 500"}},
		},
		{
			ID: "features/core/retry.feature:4", Feature: "Retry", Name: "Retries are jittered", Profile: "core",
			Requirements: []string{"ADR0122-D3-09"}, Status: report.Failed,
			Failure: &report.Failure{Requirement: "ADR0122-D3-09", Operation: "retry timing", Got: "fixed 1s", Want: "jittered"},
			Steps:   []report.Step{{Keyword: "Then ", Text: "retries are jittered", Status: report.Failed, Error: "fixed delay"}},
		},
		{
			ID: "features/core/escape.feature:2", Feature: "Escaping <b>&amp;</b> " + svgPayload, Name: scriptPayload,
			Profile: "core", Requirements: []string{"ADR0122-D3-01"}, Status: report.Passed, DurationMs: 1,
			Steps: []report.Step{{Keyword: "Given ", Text: `text with "quotes" & <angle> brackets ]]> ` + scriptPayload, Status: report.Passed}},
		},
	}
	r.Requirements = []report.RequirementResult{
		{ID: "ADR0122-D3-01", Level: "MUST", Profile: "core", Rule: "A user turn gets an answer.", Status: report.Passed,
			Scenarios: []string{"features/core/turns.feature:12", "features/core/escape.feature:2"}},
		{ID: "ADR0122-D3-02", Level: "MUST", Profile: "core", Rule: "A resumed stream starts after Last-Event-ID.", Status: report.Failed,
			Scenarios: []string{"features/core/turns.feature:30"}},
		{ID: "ADR0122-D3-03", Level: "MUST", Profile: "core", Rule: "No event is repeated. " + imgPayload, Status: report.Failed,
			Scenarios: []string{"features/core/turns.feature:30"}},
		{ID: "ADR0122-D3-09", Level: "SHOULD", Profile: "core", Rule: "Retries are jittered.", Status: report.Failed,
			Scenarios: []string{"features/core/retry.feature:4"}},
		{ID: "ADR0122-D4-01", Level: "MUST", Profile: "durability", Rule: "Turns survive restarts.", Status: report.HarnessError,
			Scenarios: []string{"features/durability/restart.feature:8"}},
		{ID: "ADR0122-D4-02", Level: "MUST", Profile: "durability", Rule: "Restart answers 204.", Status: report.Failed,
			Scenarios: []string{"features/durability/restart.feature:20"}},
		{ID: "ADR0130-G1-01", Level: "MUST", Profile: "gateway", Rule: "Route by tenant.", Status: report.NotApplicable,
			Scenarios: []string{"features/gateway/route.feature:5"}},
		{ID: "ADR0122-D5-01", Level: "MAY", Profile: "core", Rule: "Budgets.", Status: report.Skipped, Scenarios: []string{}},
	}
	r.Baseline = &report.BaselineResult{
		File:       "baseline.yaml",
		Expected:   []report.BaselineEntry{{Scenario: "features/durability/restart.feature:20", Reason: "tracked in issue 42"}},
		Stale:      []report.BaselineEntry{{Requirement: "ADR0122-D3-01", Reason: "was flaky " + svgPayload}},
		Unexpected: []string{"features/core/turns.feature:30"},
	}
	profiles := map[string]*report.ProfileResult{}
	var order []string
	for _, sc := range r.Scenarios {
		r.Totals.Add(sc.Status)
		p := profiles[sc.Profile]
		if p == nil {
			p = &report.ProfileResult{Name: sc.Profile, Claimed: slices.Contains(r.Target.Profiles, sc.Profile)}
			profiles[sc.Profile] = p
			order = append(order, sc.Profile)
		}
		p.Totals.Add(sc.Status)
	}
	for _, name := range order {
		r.Profiles = append(r.Profiles, *profiles[name])
	}
	return r
}

// failuresFirst is the order report.html shows scenarios in: failures and harness errors (those
// the baseline expects after the rest), then undefined and pending, then the others, each group
// in report order.
func failuresFirst(scs []report.Scenario) []report.Scenario {
	rank := func(sc report.Scenario) int {
		switch {
		case (sc.Status == report.Failed || sc.Status == report.HarnessError) && sc.Expected == "":
			return 0
		case sc.Status == report.Failed || sc.Status == report.HarnessError:
			return 1
		case sc.Status == report.Undefined || sc.Status == report.Pending:
			return 2
		}
		return 3
	}
	out := slices.Clone(scs)
	slices.SortStableFunc(out, func(a, b report.Scenario) int { return rank(a) - rank(b) })
	return out
}

type reportRow struct {
	Profile     string `json:"profile"`
	Requirement string `json:"requirement"`
	Claimed     string `json:"claimed"`
	Conformant  string `json:"conformant"`
	Status      string `json:"status"`
	Links       int    `json:"links"`
}

type renderedScenario struct {
	ID           string  `json:"id"`
	ScenarioID   string  `json:"scenarioId"`
	Status       string  `json:"status"`
	Hidden       bool    `json:"hidden"`
	Visible      bool    `json:"visible"`
	Name         *string `json:"name"`
	NameElements int     `json:"nameElements"`
}

type reportResult struct {
	pageRecord
	FileURL string `json:"fileURL"`
	Before  struct {
		URL     string `json:"url"`
		Verdict *struct {
			Conformant string `json:"conformant"`
			ExitCode   string `json:"exitCode"`
			ClassName  string `json:"className"`
			Text       string `json:"text"`
		} `json:"verdict"`
		Profiles     []reportRow       `json:"profiles"`
		Requirements []reportRow       `json:"requirements"`
		Totals       map[string]string `json:"totals"`
		FilterCounts map[string]string `json:"filterCounts"`
		Filter       string            `json:"filter"`
		Findings     []struct {
			Route    string `json:"route"`
			Location string `json:"location"`
			Message  string `json:"message"`
			Links    int    `json:"links"`
			Examples int    `json:"examples"`
		} `json:"findings"`
		Notes int `json:"notes"`
		// Output is the text of each scenario's "what the system printed" block.
		Output  []string `json:"systemOutput"`
		Scripts int      `json:"scriptElements"`
		Width   struct {
			Page     int `json:"page"`
			Viewport int `json:"viewport"`
		} `json:"width"`
		Flag      *string            `json:"flag"`
		Text      string             `json:"text"`
		Scenarios []renderedScenario `json:"scenarios"`
	} `json:"before"`
	After struct {
		Filter        string             `json:"filter"`
		Pressed       string             `json:"pressed"`
		PressedActive bool               `json:"pressedActive"`
		EmptyHidden   bool               `json:"emptyHidden"`
		Scenarios     []renderedScenario `json:"scenarios"`
		TotalLink     struct {
			Filter string   `json:"filter"`
			Shown  []string `json:"shown"`
		} `json:"totalLink"`
	} `json:"after"`
	FlagAtEnd *string `json:"flagAtEnd"`
}

// TestHTMLReportRenders opens a written report.html from disk in chromium and checks the page a
// reader gets: the verdict, the profile and requirement tables, one article per scenario, the
// "failed" filter, markup in report text shown as text and never run, and nothing fetched.
func TestHTMLReportRenders(t *testing.T) {
	requireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()

	rep := richReport()
	dir := t.TempDir()
	if err := report.WriteAll(dir, rep, secretToken); err != nil {
		t.Fatal(err)
	}
	htmlPath := filepath.Join(dir, report.HTMLFile)
	shot := filepath.Join(dir, "report.png")

	node := startNode(t, "report.mjs", "--file", htmlPath, "--screenshot", shot, "--flag", injectedFlag)
	var res reportResult
	node.result(ctx, &res)
	t.Logf("rendered, filtered and photographed in %.2fs", time.Since(began).Seconds())

	if v := res.Before.Verdict; v == nil {
		t.Errorf("#verdict missing")
	} else if v.Conformant != fmt.Sprint(rep.Conformant) || v.ExitCode != fmt.Sprint(rep.ExitCode) {
		t.Errorf("#verdict: data-conformant=%q data-exit-code=%q, want %v and %d", v.Conformant, v.ExitCode, rep.Conformant, rep.ExitCode)
	}

	var gotProfiles, wantProfiles []string
	for _, p := range res.Before.Profiles {
		gotProfiles = append(gotProfiles, p.Profile+" claimed="+p.Claimed)
	}
	for _, p := range rep.Profiles {
		wantProfiles = append(wantProfiles, fmt.Sprintf("%s claimed=%v", p.Name, p.Claimed))
	}
	if !slices.Equal(gotProfiles, wantProfiles) {
		t.Errorf("profile rows: got %v, want %v", gotProfiles, wantProfiles)
	}
	var gotReqs, wantReqs []string
	for _, r := range res.Before.Requirements {
		gotReqs = append(gotReqs, r.Requirement+" "+r.Status)
	}
	for _, r := range rep.Requirements {
		wantReqs = append(wantReqs, r.ID+" "+string(r.Status))
	}
	if !slices.Equal(gotReqs, wantReqs) {
		t.Errorf("requirement rows: got %v, want %v", gotReqs, wantReqs)
	}

	if len(res.Before.Scenarios) != len(rep.Scenarios) {
		t.Fatalf("scenario articles: got %d, want %d", len(res.Before.Scenarios), len(rep.Scenarios))
	}
	failed := 0
	for i, sc := range failuresFirst(rep.Scenarios) {
		got := res.Before.Scenarios[i]
		if got.ScenarioID != sc.ID || got.Status != string(sc.Status) || got.Hidden {
			t.Errorf("article %d: %s %s hidden=%v, want %s %s shown", i, got.ScenarioID, got.Status, got.Hidden, sc.ID, sc.Status)
		}
		if sc.Status == report.Failed {
			failed++
		}
		if sc.Name == scriptPayload {
			if got.Name == nil || *got.Name != scriptPayload || got.NameElements != 0 {
				t.Errorf("the </script> scenario name should be shown as plain text; got %v with %d child elements",
					deref(got.Name), got.NameElements)
			}
		}
	}
	if res.Before.Filter != "all" {
		t.Errorf("#scenarios data-filter at load: %q, want all", res.Before.Filter)
	}
	if got := res.Before.Totals["failed"]; got != fmt.Sprint(failed) {
		t.Errorf("#totals failed: %q, want %d", got, failed)
	}
	if got := res.Before.FilterCounts["failed"]; got != fmt.Sprint(failed) {
		t.Errorf("failed filter button count: %q, want %d", got, failed)
	}

	// The contract's finding is shown once, with its scenario and example; the scenario notes it.
	if len(res.Before.Findings) != 1 {
		t.Errorf("contract findings shown: %+v, want 1", res.Before.Findings)
	} else if f, want := res.Before.Findings[0], rep.Contract.Findings[0]; f.Route != want.Route || f.Location != want.Location ||
		f.Message != want.Message || f.Links != 1 || f.Examples != 1 {
		t.Errorf("contract finding shown as %+v, want %s %s %q with 1 scenario link and 1 example", f, want.Route, want.Location, want.Message)
	}
	if want := "[node-1] listen tcp 127.0.0.1:4000: address in use " + imgPayload + "\n"; len(res.Before.Output) != 1 || res.Before.Output[0] != want {
		t.Errorf("system output shown as %q, want one block holding %q as text", res.Before.Output, want)
	}
	if res.Before.Notes != 1 {
		t.Errorf("scenario notes shown: %d, want 1", res.Before.Notes)
	}
	// The summary's harness-error count shows exactly the harness errors.
	if tl := res.After.TotalLink; tl.Filter != string(report.HarnessError) || !slices.Equal(tl.Shown, []string{string(report.HarnessError)}) {
		t.Errorf("after clicking the harness-error count: filter %q, shown %v", tl.Filter, tl.Shown)
	}

	// Pressing "failed" leaves exactly the failed scenarios shown.
	if res.After.Filter != "failed" || res.After.Pressed != "failed" || !res.After.PressedActive || !res.After.EmptyHidden {
		t.Errorf("after pressing failed: data-filter=%q pressed=%q active=%v filter-empty hidden=%v",
			res.After.Filter, res.After.Pressed, res.After.PressedActive, res.After.EmptyHidden)
	}
	shown := 0
	for _, a := range res.After.Scenarios {
		isFailed := a.Status == string(report.Failed)
		if isFailed == a.Hidden || isFailed != a.Visible {
			t.Errorf("after pressing failed, article %s (%s): hidden=%v visible=%v", a.ID, a.Status, a.Hidden, a.Visible)
		}
		if !a.Hidden {
			shown++
		}
	}
	if shown != failed {
		t.Errorf("after pressing failed: %d articles shown, want %d", shown, failed)
	}

	// Nothing injected ran, nothing was fetched, nothing complained.
	if res.Before.Flag != nil || res.FlagAtEnd != nil {
		t.Errorf("an injected payload ran: window.%s = %v (at load), %v (at the end)", injectedFlag, deref(res.Before.Flag), deref(res.FlagAtEnd))
	}
	if res.Before.Scripts != 2 {
		t.Errorf("the page has %d script elements, want the report's own 2", res.Before.Scripts)
	}
	if strings.Contains(res.Before.Text, secretToken) {
		t.Errorf("the rendered page shows the credential %q", secretToken)
	}
	if res.Before.URL != res.FileURL {
		t.Errorf("the page is at %q, want %q", res.Before.URL, res.FileURL)
	}
	sawSelf := false
	for _, r := range res.Requests {
		if r.URL != res.FileURL {
			t.Errorf("the report made a request: %s %s (%s)", r.Method, r.URL, r.ResourceType)
		} else {
			sawSelf = true
		}
	}
	if !sawSelf {
		t.Errorf("the request recorder did not see the report's own %s; requests: %+v", res.FileURL, res.Requests)
	}
	if len(res.FailedRequests) > 0 {
		t.Errorf("failed requests: %+v", res.FailedRequests)
	}
	if errs := res.consoleErrors(); len(errs) > 0 {
		t.Errorf("console errors: %+v", errs)
	}
	if len(res.PageErrors) > 0 {
		t.Errorf("page errors: %v", res.PageErrors)
	}
	if len(res.Console) > 0 {
		t.Logf("console: %+v", res.Console)
	}
	// Not a failure (yet): the requirement table's scenario links have no break opportunity
	// between them, so a requirement with several scenarios widens the page past the viewport.
	if w := res.Before.Width; w.Page > w.Viewport {
		t.Logf("note: the page is %dpx wide in a %dpx viewport (it scrolls sideways)", w.Page, w.Viewport)
	}

	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10<<10 {
		t.Errorf("screenshot %s: %d bytes, not a plausible full-page PNG", shot, len(png))
	}
	if out := os.Getenv("LOOMCHECK_SCREENSHOT_DIR"); out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(out, "report-html.png")
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot copied to %s", dst)
	}
}
