package harness

import (
	"context"
	"strings"
	"testing"

	"github.com/loomcheck/loomcheck/harness/report"
)

// Run runs every scenario of the embedded features as a subtest of t, each against a fresh
// instance that newInstance opens, and fails t unless the implementation conforms to every
// profile it claims. It returns the report, so a test can also write or inspect it.
//
// Every problem is reported, not only the first: each failed scenario fails its own subtest with
// the rule it broke.
//
//	func TestConformance(t *testing.T) {
//		harness.Run(t, func(ctx context.Context, cfg sutconfig.SUTConfig) (harness.Instance, error) {
//			return myimpl.Open(ctx, cfg)
//		})
//	}
func Run(t *testing.T, newInstance Factory) *report.Report {
	t.Helper()
	return RunWith(t, Options{Factory: newInstance})
}

// RunWith is Run with options (tags, profiles, concurrency, timeouts). opt.TestingT is set to t.
func RunWith(t *testing.T, opt Options) *report.Report {
	t.Helper()
	opt.TestingT = t
	rep, err := Execute(context.Background(), opt)
	if err != nil {
		t.Fatalf("loomcheck could not run: %v", err)
		return nil
	}
	if rep.ExitCode != 0 {
		var bad []string
		for _, p := range rep.Profiles {
			if p.Claimed && !p.Conformant {
				bad = append(bad, p.Name)
			}
		}
		t.Errorf("not conformant (exit %d): profiles %s; %d failed, %d harness errors, %d undefined, %d pending",
			rep.ExitCode, strings.Join(bad, ", "), rep.Totals.Failed, rep.Totals.HarnessError, rep.Totals.Undefined, rep.Totals.Pending)
	}
	return rep
}
