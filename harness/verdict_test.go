package harness_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

func catalogue(t *testing.T) *spec.Catalogue {
	t.Helper()
	cat, err := spec.LoadCatalogue()
	require.NoError(t, err)
	return cat
}

// sample is a run of two scenarios of the core profile, one passed and one failed.
func sample() *report.Report {
	return &report.Report{
		Target: report.Target{Driver: "in-process", Profiles: []string{"core"}},
		Scenarios: []report.Scenario{
			{ID: "a.feature:3", Profile: "core", Requirements: []string{"ADR0122-D1-01"}, Status: report.Passed},
			{ID: "a.feature:9", Profile: "core", Requirements: []string{"ADR0122-D1-02"}, Status: report.Failed},
		},
	}
}

func TestJudgeFailureFailsTheRun(t *testing.T) {
	rep := harness.Judge(sample(), catalogue(t), nil)
	require.False(t, rep.Conformant)
	require.Equal(t, 1, rep.ExitCode)
}

func TestBaselineExcusesAFailure(t *testing.T) {
	base := &harness.Baseline{Entries: []report.BaselineEntry{{Requirement: "ADR0122-D1-02", Reason: "known bug #12"}}}
	rep := harness.Judge(sample(), catalogue(t), base)
	require.True(t, rep.Conformant)
	require.Equal(t, 0, rep.ExitCode)
	require.Equal(t, "known bug #12", rep.Scenarios[1].Expected)
}

func TestStaleBaselineEntryFailsTheRun(t *testing.T) {
	base := &harness.Baseline{Entries: []report.BaselineEntry{
		{Requirement: "ADR0122-D1-02", Reason: "known bug #12"},
		{Requirement: "ADR0122-D1-01", Reason: "fixed long ago"},
	}}
	rep := harness.Judge(sample(), catalogue(t), base)
	require.False(t, rep.Conformant, "a baseline entry that now passes is stale and fails the run")
	require.Equal(t, 1, rep.ExitCode)
	require.Len(t, rep.Baseline.Stale, 1)
	require.Equal(t, "ADR0122-D1-01", rep.Baseline.Stale[0].Requirement)
}

func TestHarnessErrorExitsTwo(t *testing.T) {
	r := sample()
	r.Scenarios[1].Status = report.HarnessError
	rep := harness.Judge(r, catalogue(t), nil)
	require.Equal(t, 2, rep.ExitCode)
	require.Equal(t, 0, rep.Totals.Failed, "a harness error is never counted as a failure of the system")
}

func TestCertifyRefusesUnjudgedScenarios(t *testing.T) {
	r := sample()
	r.Scenarios[1].Status = report.NotApplicable
	rep := harness.Judge(r, catalogue(t), nil)
	require.True(t, rep.Conformant)
	harness.Certify(rep)
	require.False(t, rep.Conformant, "a certification judges every scenario of a claimed profile")
	require.Equal(t, 1, rep.ExitCode)
}

func TestShouldFailureIsAWarning(t *testing.T) {
	cat := catalogue(t)
	// Pretend the failed requirement were a SHOULD.
	for i := range cat.Requirements {
		if cat.Requirements[i].ID == "ADR0122-D1-02" {
			cat.Requirements[i].Level = spec.Should
		}
	}
	rep := harness.Judge(sample(), cat, nil)
	require.True(t, rep.Conformant)
	require.Len(t, rep.Warnings, 1)
}

func TestBaselineFileNeedsReasons(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/b.json"
	require.NoError(t, os.WriteFile(path, []byte(`{"entries":[{"requirement":"ADR0122-D1-02"}]}`), 0o600))
	_, err := harness.LoadBaseline(path)
	require.ErrorIs(t, err, harness.ErrUsage)
}

// TestHarnessFaultsAreNotFailures runs features the kit itself gets wrong against the reference:
// each is a harness error and the run exits 2, and none is blamed on the system under test.
func TestHarnessFaultsAreNotFailures(t *testing.T) {
	rep, err := harness.Execute(context.Background(), harness.Options{
		Factory: func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
			return reference.OpenConfig(ctx, cfg)
		},
		Features: os.DirFS("testdata/harnessfault"),
	})
	require.NoError(t, err)
	rep = harness.Judge(rep, catalogue(t), nil)
	require.Equal(t, 2, rep.ExitCode)
	require.Equal(t, 0, rep.Totals.Failed)
	require.Equal(t, 2, rep.Totals.HarnessError)
}

// TestUnstartableSystemFailsTheRun: a system that cannot be started is the system's failure, not
// the kit's: the run ends not conformant (exit 1) with a report that says why, and no scenario is
// counted as run.
func TestUnstartableSystemFailsTheRun(t *testing.T) {
	rep, err := harness.Execute(context.Background(), harness.Options{
		Factory: func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
			return nil, os.ErrPermission
		},
	})
	require.NoError(t, err)
	require.False(t, rep.Conformant)
	require.Equal(t, 1, rep.ExitCode)
	require.Contains(t, rep.Unstarted, os.ErrPermission.Error())
	require.Zero(t, rep.Totals.Total())
}

func referenceFactory(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
	return reference.OpenConfig(ctx, cfg)
}

// TestFilterThatSelectsNothingIsAUsageError: a typo in a CI job's filter must not go green.
func TestFilterThatSelectsNothingIsAUsageError(t *testing.T) {
	for _, opt := range []harness.Options{
		{Tags: "@req:ADR0122-D1-99"},              // no such requirement
		{Tags: "@profile:core && ~@profile:core"}, // selects nothing
		{Profiles: []string{"nosuch"}},            // not a profile of the catalogue
		{Tags: "@req:ADR0122-D1-01 &&"},           // malformed
		{Tags: "@"},                               // malformed
	} {
		opt.Factory = referenceFactory
		rep, err := harness.Execute(context.Background(), opt)
		require.ErrorIs(t, err, harness.ErrUsage, "%+v", opt)
		require.Nil(t, rep)
	}
	_, err := harness.Execute(context.Background(), harness.Options{Factory: referenceFactory, Tags: "@a && && @b"})
	var te *harness.TagExprError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 7, te.Pos)
}

// TestClaimedProfileNotRunIsNeverConformant: a filtered run judges what ran and reports the
// claimed profiles it did not run; neither the verdict nor the exit status calls them conformant.
func TestClaimedProfileNotRunIsNeverConformant(t *testing.T) {
	rep, err := harness.Execute(context.Background(), harness.Options{Factory: referenceFactory, Tags: "@req:ADR0122-D1-01"})
	require.NoError(t, err)
	require.Greater(t, rep.Totals.Passed, 0)
	require.Equal(t, 0, rep.Totals.Failed)
	require.False(t, rep.Conformant)
	require.Equal(t, 1, rep.ExitCode)
	require.NotEmpty(t, rep.NotRun)
	for _, p := range rep.Profiles {
		switch {
		case p.Name == "core":
			require.Equal(t, report.ProfileConformant, p.Verdict)
			require.True(t, p.Conformant)
		case p.Claimed:
			require.Equal(t, report.ProfileNotRun, p.Verdict, p.Name)
			require.False(t, p.Conformant, p.Name)
			require.Contains(t, rep.NotRun, p.Name)
		}
	}
	// Narrowed to the profile that ran, the same run is conformant.
	rep, err = harness.Execute(context.Background(), harness.Options{Factory: referenceFactory, Tags: "@req:ADR0122-D1-01", Profiles: []string{"core"}})
	require.NoError(t, err)
	require.True(t, rep.Conformant)
	require.Equal(t, 0, rep.ExitCode)
	require.Empty(t, rep.NotRun)
}

func TestJudgeProfileWithOnlyNotApplicableScenariosIsNotRun(t *testing.T) {
	rep := &report.Report{
		Target: report.Target{Driver: "remote", Profiles: []string{"core", "durability"}},
		Scenarios: []report.Scenario{
			{ID: "a.feature:3", Profile: "core", Requirements: []string{"ADR0122-D1-01"}, Status: report.Passed},
			{ID: "b.feature:3", Profile: "durability", Requirements: []string{"ADR0122-D1-07"}, Status: report.NotApplicable},
		},
	}
	rep = harness.Judge(rep, catalogue(t), nil)
	require.False(t, rep.Conformant)
	require.Equal(t, 1, rep.ExitCode)
	require.Equal(t, []string{"durability"}, rep.NotRun)
}

// TestUndefinedStepIsNeverAPass: a scenario whose step has no definition is reported undefined
// (godog itself ends such a scenario without an error), and the run is not conformant.
func TestUndefinedStepIsNeverAPass(t *testing.T) {
	rep, err := harness.Execute(context.Background(), harness.Options{
		Factory: func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
			return reference.OpenConfig(ctx, cfg)
		},
		Features: os.DirFS("testdata/undefined"),
	})
	require.NoError(t, err)
	rep = harness.Judge(rep, catalogue(t), nil)
	require.Equal(t, 0, rep.Totals.Passed)
	require.Equal(t, 1, rep.Totals.Undefined)
	require.NotEqual(t, 0, rep.ExitCode)
}
