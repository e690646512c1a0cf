package harness_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomcheck/loomcheck/harness"
	"github.com/loomcheck/loomcheck/harness/report"
	"github.com/loomcheck/loomcheck/reference"
	"github.com/loomcheck/loomcheck/spec/sutconfig"
)

// withoutNosniff is the reference engine with one break of the contract: its answers to
// POST /conversations/{id}/turns lack X-Content-Type-Options.
type withoutNosniff struct{ harness.Instance }

var turnsRoute = regexp.MustCompile(`^/conversations/[^/]+/turns$`)

func (w withoutNosniff) Handler() http.Handler {
	h := w.Instance.Handler()
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && turnsRoute.MatchString(r.URL.Path) {
			rw = &dropHeader{ResponseWriter: rw, name: "X-Content-Type-Options"}
		}
		h.ServeHTTP(rw, r)
	})
}

// dropHeader removes one header just before the status line goes out.
type dropHeader struct {
	http.ResponseWriter
	name  string
	wrote bool
}

func (d *dropHeader) WriteHeader(code int) {
	if !d.wrote {
		d.wrote = true
		d.Header().Del(d.name)
	}
	d.ResponseWriter.WriteHeader(code)
}

func (d *dropHeader) Write(b []byte) (int, error) {
	if !d.wrote {
		d.WriteHeader(http.StatusOK)
	}
	return d.ResponseWriter.Write(b)
}

// TestContractViolationIsOneFinding: a system whose answers miss one documented header gets one
// contract finding under the contract requirement, quoting that requirement's rule; the
// behavioural scenarios that met it still pass, each noting it; the contract's own scenario
// fails under the contract requirement with its rule; and the run is not conformant (exit 1).
func TestContractViolationIsOneFinding(t *testing.T) {
	cat := catalogue(t)
	rep, err := harness.Execute(context.Background(), harness.Options{
		Factory: func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
			inst, err := reference.OpenConfig(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return withoutNosniff{inst}, nil
		},
		Tags:     "@req:ADR0122-D1-01,@req:ADR0122-D6-01",
		Profiles: []string{"core"},
	})
	require.NoError(t, err)
	rep = harness.Judge(rep, cat, nil)

	require.Len(t, rep.Contract.Findings, 1, "%+v", rep.Contract.Findings)
	f := rep.Contract.Findings[0]
	require.Equal(t, "POST /conversations/{id}/turns", f.Route)
	require.Equal(t, "header:X-Content-Type-Options", f.Location)
	require.True(t, strings.HasPrefix(f.Schema, "#/paths/~1conversations~1{id}~1turns/post/responses/"), f.Schema)
	require.True(t, strings.HasSuffix(f.Schema, "/headers/X-Content-Type-Options"), f.Schema)
	require.NotNil(t, f.Example)
	require.Equal(t, http.MethodPost, f.Example.Method)
	require.Empty(t, f.Example.ResponseHeaders["X-Content-Type-Options"])
	require.GreaterOrEqual(t, f.Occurrences, len(f.Scenarios))
	contractRule, ok := cat.Get(harness.ContractRequirement)
	require.True(t, ok)
	require.Equal(t, harness.ContractRequirement, rep.Contract.Requirement)
	require.Equal(t, contractRule.Rule, rep.Contract.Rule)

	noted := 0
	for _, sc := range rep.Scenarios {
		judgesContract := false
		for _, id := range sc.Requirements {
			judgesContract = judgesContract || id == harness.ContractRequirement
		}
		if judgesContract {
			if sc.Status == report.Failed {
				require.Equal(t, harness.ContractRequirement, sc.Failure.Requirement, sc.ID)
				require.Equal(t, contractRule.Rule, sc.Failure.Rule, sc.ID)
			}
			continue
		}
		require.Equal(t, report.Passed, sc.Status, "%s: %s", sc.ID, sc.Message)
		if len(sc.Notes) > 0 {
			noted++
			require.Len(t, sc.Notes, 1, sc.ID)
			require.Contains(t, f.Scenarios, sc.ID)
		}
	}
	require.Positive(t, noted, "no behavioural scenario noted the violation")
	t.Logf("%d scenarios, %d noting the finding; %d occurrences; totals %+v", len(rep.Scenarios), noted, f.Occurrences, rep.Totals)
	for _, q := range rep.Requirements {
		if q.ID == harness.ContractRequirement {
			require.Equal(t, report.Failed, q.Status)
		}
	}
	require.False(t, rep.Conformant)
	require.Equal(t, 1, rep.ExitCode)
}
