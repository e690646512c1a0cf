package harness_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/harness/world"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// TestRemoteTarget judges a running system the kit neither configures nor crashes: it is started
// with the configuration RemoteConfig gives, and the run reports every scenario that would need
// a crash or another configuration as not applicable, never as passed.
func TestRemoteTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the suite")
	}
	w := world.New(world.Options{})
	_, err := w.Start("")
	require.NoError(t, err)
	defer w.Close()
	cfg := harness.RemoteConfig(w, sutconfig.SUTConfig{DataDir: filepath.Join(t.TempDir(), "data")})
	eng, err := reference.OpenConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer eng.Close()
	srv := httptest.NewServer(eng.Handler())
	defer srv.Close()

	rep, err := harness.Execute(context.Background(), harness.Options{Target: srv.URL, World: w, RemoteConfig: &cfg,
		Tags: "@profile:core,@profile:durability", Profiles: []string{"core", "durability"}})
	require.NoError(t, err)
	cat, err := spec.LoadCatalogue()
	require.NoError(t, err)
	rep = harness.Judge(rep, cat, nil)
	// Every durability scenario crashes the system, which a remote run cannot: the profile is
	// not run, and so the run is not conformant although nothing failed.
	require.Equal(t, 0, rep.Totals.Failed+rep.Totals.HarnessError, "the reference passes what a remote run can judge")
	require.Equal(t, []string{"durability"}, rep.NotRun)
	require.Equal(t, 1, rep.ExitCode)
	for _, p := range rep.Profiles {
		if p.Name == "core" {
			require.True(t, p.Conformant)
		}
	}
	var crash, configures int
	for _, sc := range rep.Scenarios {
		for _, tag := range sc.Tags {
			switch tag {
			case "@crash":
				crash++
				require.Equal(t, report.NotApplicable, sc.Status, sc.ID)
			case "@configures":
				configures++
				require.Equal(t, report.NotApplicable, sc.Status, sc.ID)
			}
		}
	}
	require.Positive(t, crash)
	require.Positive(t, configures)
	require.Positive(t, rep.Totals.Passed)
}

// TestRemoteTargetTwice runs scenarios that choose their own ids and keys twice against one
// running system, as two runs against staging would: both pass, since every id and key a
// scenario chooses is its own, and a scenario that judges what the system keeps once for all
// its callers (@fresh-system) is not applicable there, never passed.
func TestRemoteTargetTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the suite twice")
	}
	w := world.New(world.Options{})
	_, err := w.Start("")
	require.NoError(t, err)
	defer w.Close()
	cfg := harness.RemoteConfig(w, sutconfig.SUTConfig{DataDir: filepath.Join(t.TempDir(), "data")})
	eng, err := reference.OpenConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer eng.Close()
	srv := httptest.NewServer(eng.Handler())
	defer srv.Close()
	cat, err := spec.LoadCatalogue()
	require.NoError(t, err)

	for run := 1; run <= 2; run++ {
		rep, err := harness.Execute(context.Background(), harness.Options{Target: srv.URL, World: w, RemoteConfig: &cfg,
			Tags:     "@req:ADR0122-D1-05,@req:ADR0121-RUN-01,@req:ADR0052-S-11,@req:ADR0052-S-12",
			Profiles: []string{"core", "agent", "stream"}})
		require.NoError(t, err)
		rep = harness.Judge(rep, cat, nil)
		require.Equal(t, 0, rep.Totals.Failed+rep.Totals.HarnessError, "run %d", run)
		require.Positive(t, rep.Totals.Passed, "run %d", run)
		fresh := 0
		for _, sc := range rep.Scenarios {
			if slices.Contains(sc.Tags, "@fresh-system") {
				fresh++
				require.Equal(t, report.NotApplicable, sc.Status, sc.ID)
			}
		}
		require.Positive(t, fresh, "run %d", run)
	}
}
