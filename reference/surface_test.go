package reference_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// publicPackages are the packages under reference/ that a program outside this module may
// import. The list is short on purpose: an embedder opens an engine (reference, whose aliases name
// the types it writes), serves it (server), chooses and tests a store (store and its backends and
// suite), reads the kernel and the shared types (kernel, loomtype, model), and runs the
// benchmarks and the suite (perf, conformance). Everything else is the engine's own business and
// lives under reference/internal, free to change shape without breaking anyone. A new package
// goes under internal/ unless an embedder or a backend author cannot do without it; then it is
// added here, on purpose, in the same change.
var publicPackages = []string{
	"github.com/loomcheck/loomcheck/reference",
	"github.com/loomcheck/loomcheck/reference/conformance",
	"github.com/loomcheck/loomcheck/reference/kernel",
	"github.com/loomcheck/loomcheck/reference/loomtype",
	"github.com/loomcheck/loomcheck/reference/model",
	"github.com/loomcheck/loomcheck/reference/perf",
	"github.com/loomcheck/loomcheck/reference/server",
	"github.com/loomcheck/loomcheck/reference/store",
	"github.com/loomcheck/loomcheck/reference/store/postgres",
	"github.com/loomcheck/loomcheck/reference/store/postgres/pgtest",
	"github.com/loomcheck/loomcheck/reference/store/sqlite",
	"github.com/loomcheck/loomcheck/reference/store/storetest",
}

// outsideInternal returns, sorted, the packages of pkgs that are not under an internal directory.
func outsideInternal(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if p == "" || strings.HasSuffix(p, "/internal") || strings.Contains(p, "/internal/") {
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// TestPublicSurface lists the packages under reference/ (go list, as the store's import rule
// does) and fails when one outside reference/internal is not in publicPackages, or one of the list
// is gone.
func TestPublicSurface(t *testing.T) {
	out, err := exec.Command("go", "list", "github.com/loomcheck/loomcheck/reference/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	all := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !slices.Contains(all, "github.com/loomcheck/loomcheck/reference/internal/threads") {
		t.Fatalf("go list did not list the engine's packages: %d listed", len(all))
	}
	got := outsideInternal(all)
	for _, p := range got {
		if !slices.Contains(publicPackages, p) {
			t.Errorf("%s is public: move it under reference/internal, or add it to publicPackages if an embedder needs it", p)
		}
	}
	for _, p := range publicPackages {
		if !slices.Contains(got, p) {
			t.Errorf("%s is in publicPackages and no longer a public package: take it off the list", p)
		}
	}
}

// TestPublicSurfaceRuleNamesANewPackage: the rule skips what is under internal/ and keeps the
// rest, so a package added beside the public ones is seen.
func TestPublicSurfaceRuleNamesANewPackage(t *testing.T) {
	m := "github.com/loomcheck/loomcheck/reference"
	got := outsideInternal([]string{m + "/internal/gateway", m + "/newpkg", m, m + "/internal", m + "/store/internal/x", m + "/kernel"})
	want := []string{m, m + "/kernel", m + "/newpkg"}
	if !slices.Equal(got, want) {
		t.Fatalf("outside internal %v, want %v", got, want)
	}
}
