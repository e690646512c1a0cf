package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/steps"
)

type scenarioKey struct{}

// scenarioRun is the state one pickle's hooks share: the scenario, the requirements it judges, its
// entry in the report, when it began, why it does not apply (empty when it does) and the step being
// run.
type scenarioRun struct {
	r         *runner
	s         *steps.Scenario
	sc        *godog.ScenarioContext
	res       *report.Scenario
	begun     time.Time
	na        string
	stepIndex int
	stepStart time.Time
	reqs      []string
}

// initScenario binds a fresh scenario state to one pickle.
func (r *runner) initScenario(sc *godog.ScenarioContext) {
	sr := &scenarioRun{r: r, s: steps.NewScenario(r.shared), sc: sc}
	sc.Before(sr.beginScenario)
	sc.StepContext().Before(sr.beginStep)
	sc.StepContext().After(sr.endStep)
	sc.After(sr.endScenario)
}

// beginScenario starts the scenario: it binds the steps, makes the report entry, decides whether the
// scenario applies to the system and sets the system up when it does.
func (sr *scenarioRun) beginScenario(ctx context.Context, p *godog.Scenario) (context.Context, error) {
	r, s := sr.r, sr.s
	sr.begun = time.Now()
	// Bound before anything can end the scenario: godog matches every step, the skipped
	// ones too, against the steps bound by then.
	texts := make([]string, len(p.Steps))
	for i, st := range p.Steps {
		texts[i] = st.Text
	}
	s.Register(sr.sc, texts)
	id, tags := r.scenarioID(p), tagNames(p)
	profile, reqs, needs := meta(tags)
	s.Begin(ctx, id, p.Name, tags, profile, reqs)
	sr.reqs = reqs
	sr.res = r.reportEntry(id, tags, profile, reqs, p)
	if profile == "" {
		sr.na = ""
		return ctx, harnessErr("the scenario has no @profile tag")
	}
	sr.na = r.notApplicable(profile, needs)
	if sr.na != "" {
		return ctx, godog.ErrSkip
	}
	if err := s.Setup(); err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, scenarioKey{}, s), nil
}

// reportEntry is the report's entry for the scenario before it runs: every step skipped, with its
// keyword, line, doc string and table.
func (r *runner) reportEntry(id string, tags []string, profile string, reqs []string, p *godog.Scenario) *report.Scenario {
	res := &report.Scenario{ID: id, Feature: r.features[p.Uri], Name: p.Name, Tags: tags, Profile: profile,
		Requirements: append([]string{}, reqs...), Steps: []report.Step{}}
	if res.Feature == "" {
		res.Feature = p.Uri
	}
	for _, st := range p.Steps {
		rs := report.Step{Keyword: r.keywords[firstID(st.AstNodeIds)], Line: r.lines[firstID(st.AstNodeIds)], Text: st.Text, Status: report.Skipped}
		if st.Argument != nil {
			if ds := st.Argument.DocString; ds != nil {
				rs.DocString = ds.Content
			}
			if dt := st.Argument.DataTable; dt != nil {
				for _, row := range dt.Rows {
					var cells []string
					for _, c := range row.Cells {
						cells = append(cells, c.Value)
					}
					rs.Table = append(rs.Table, cells)
				}
			}
		}
		res.Steps = append(res.Steps, rs)
	}
	return res
}

// notApplicable says why a scenario of the profile that needs these things does not apply to the
// system under test, or is empty when it applies.
func (r *runner) notApplicable(profile string, needs []string) string {
	switch {
	case !r.claimed[profile]:
		return fmt.Sprintf("the system does not claim profile %q", profile)
	case slices.Contains(needs, "crash") && !r.shared.Kind.CanCrash:
		return "the scenario crashes the system, which a remote target does not allow"
	case slices.Contains(needs, "configures") && !r.shared.Kind.Configurable:
		return "the scenario configures the system, which a remote target does not allow"
	case slices.Contains(needs, "fresh-system") && r.shared.Kind.Shared:
		return "the scenario judges what the system keeps once for all its callers, which other scenarios on a shared remote target have already used"
	}
	return ""
}

// beginStep notes when a step starts.
func (sr *scenarioRun) beginStep(ctx context.Context, st *godog.Step) (context.Context, error) {
	sr.stepStart = time.Now()
	sr.s.StepBegins()
	return ctx, nil
}

// endStep records a step's outcome in the report entry; a step that passed fails when work it
// started in the background failed.
func (sr *scenarioRun) endStep(ctx context.Context, st *godog.Step, status godog.StepResultStatus, err error) (context.Context, error) {
	s, res := sr.s, sr.res
	if err == nil && status == godog.StepPassed {
		err = s.TakeAsync()
		if err != nil {
			status = godog.StepFailed
		}
	}
	if err != nil {
		s.MarkTimeout(err)
	}
	if res != nil && sr.stepIndex < len(res.Steps) {
		rs := &res.Steps[sr.stepIndex]
		rs.Status = stepStatus(status, err)
		rs.DurationMs = time.Since(sr.stepStart).Milliseconds()
		if err != nil {
			rs.Error = err.Error()
		}
	}
	sr.stepIndex++
	if err != nil && errors.Is(err, ErrNotApplicable) && sr.na == "" {
		// The scenario does not apply (the step found the system cannot be judged so): it is
		// recorded so at its end, and godog, under go test, fails no subtest for a skip.
		sr.na = err.Error()
		return ctx, godog.ErrSkip
	}
	return ctx, err
}

// endScenario ends the scenario: it classifies the outcome, attaches what the system printed and the
// exchanges, records the result and tears the scenario down.
func (sr *scenarioRun) endScenario(ctx context.Context, p *godog.Scenario, err error) (context.Context, error) {
	r, s, res := sr.r, sr.s, sr.res
	defer s.Teardown()
	if res == nil {
		return ctx, err
	}
	res.DurationMs = time.Since(sr.begun).Milliseconds()
	if err == nil && sr.na == "" {
		err = unfinishedStep(res.Steps)
	}
	res.Status, res.Message, res.Failure = r.classify(sr.reqs, sr.na, err)
	if res.Status == report.Failed || res.Status == report.HarnessError {
		if logs := s.Logs(800); logs != "" && res.Status == report.HarnessError {
			res.Message += "; the system printed: " + logs
		}
		res.SystemOutput = s.Logs(report.SystemOutputBytes)
	}
	seen, observed := s.Observed()
	if observed {
		res.Exchanges = seen.Exchanges
		res.Notes = contractNotes(seen.Seen)
	}
	r.finish(res, seen)
	return ctx, err
}

// unfinishedStep is the error of the first undefined or pending step, or nil. godog ends a
// scenario whose step is undefined or pending without an error: the step's own status says so,
// and such a scenario never passes.
func unfinishedStep(steps []report.Step) error {
	for _, st := range steps {
		if st.Status == report.Undefined {
			return fmt.Errorf("%w: %s", godog.ErrUndefined, st.Text)
		}
		if st.Status == report.Pending {
			return godog.ErrPending
		}
	}
	return nil
}

func firstID(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

func stepStatus(st godog.StepResultStatus, err error) report.Status {
	switch st {
	case godog.StepPassed:
		return report.Passed
	case godog.StepUndefined:
		return report.Undefined
	case godog.StepPending:
		return report.Pending
	case godog.StepSkipped:
		return report.Skipped
	}
	var f *Failure
	if errors.As(err, &f) {
		return report.Failed
	}
	return report.HarnessError
}

// classify turns a scenario's error into its outcome. Only a *Failure is the SUT's fault;
// anything the kit did not classify (a panic, an unexpected error) is a harness error.
func (r *runner) classify(reqs []string, na string, err error) (report.Status, string, *report.Failure) {
	var f *Failure
	switch {
	case na != "":
		return report.NotApplicable, na, nil
	case err == nil:
		return report.Passed, "", nil
	case errors.Is(err, ErrNotApplicable):
		return report.NotApplicable, err.Error(), nil
	case errors.Is(err, godog.ErrUndefined):
		return report.Undefined, "a step is not defined yet: " + strings.TrimPrefix(err.Error(), godog.ErrUndefined.Error()+": "), nil
	case errors.Is(err, godog.ErrPending):
		return report.Pending, "a step is pending", nil
	case errors.Is(err, godog.ErrSkip):
		return report.Skipped, "skipped", nil
	case errors.As(err, &f):
		rf := &report.Failure{Requirement: f.Requirement, Rule: f.Rule, Operation: f.Op, Got: f.Got, Want: f.Want}
		named := reqs
		if rf.Requirement == "" && len(reqs) > 0 {
			rf.Requirement = strings.Join(reqs, ", ")
		} else if rf.Requirement != "" {
			named = []string{rf.Requirement} // the rule quoted is the requirement's named
		}
		if rf.Rule == "" {
			for _, id := range named {
				if q, ok := r.cat.Get(id); ok {
					rf.Rule = q.Rule
					break
				}
			}
		}
		msg := f.Error()
		if rf.Requirement != "" {
			msg = rf.Requirement + ": " + msg
		}
		return report.Failed, msg, rf
	default:
		return report.HarnessError, err.Error(), nil
	}
}

// finish records a scenario's result and what its client saw (seen: nothing when it had none).
func (r *runner) finish(res *report.Scenario, seen steps.Observed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[res.ID] = res
	r.done++
	r.contractStats.ExchangesValidated += seen.Validated
	r.contractStats.EventsValidated += seen.Events
	r.contractStats.Violations += seen.Violations
	r.addFindings(res.ID, seen.Seen)
	switch res.Status {
	case report.Failed:
		r.failed++
	case report.HarnessError:
		r.harness++
	}
	if r.opt.Progress != nil {
		line := fmt.Sprintf("%d/%d scenarios, %d failed, %d harness errors", r.done, r.total, r.failed, r.harness)
		switch {
		case isTerminal(r.opt.Progress):
			fmt.Fprint(r.opt.Progress, "\r"+line)
		case r.done == r.total || r.done%max(1, r.total/10) == 0 || res.Status == report.Failed || res.Status == report.HarnessError:
			fmt.Fprintln(r.opt.Progress, line)
		}
	}
	if t := r.opt.TestingT; t != nil {
		switch res.Status {
		case report.Failed, report.HarnessError:
			t.Errorf("%s %q: %s: %s", res.Status, res.Name, res.ID, res.Message)
		}
	}
}
