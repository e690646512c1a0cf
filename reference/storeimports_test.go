package reference_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The store's importers: above the store everything durable goes through the kernel (its
// journals, record tables and auxiliary streams), so reference/store is imported by the kernel,
// the store's own packages (the contract, the backends, their helpers and the store suite) and
// the benchmarks, and by nothing else.
const storePkg = "github.com/loomcheck/loomcheck/reference/store"

var storeImporters = []string{
	"github.com/loomcheck/loomcheck/reference/kernel",
	"github.com/loomcheck/loomcheck/reference/perf",
}

// storeImportExceptions still import the store, and are the next to move onto the kernel: the
// engine's wiring (engine.go, node.go and storage.go open the store and hold its lease, which the
// kernel could own). Take a package off this list once it has moved; never add one.
var storeImportExceptions = []string{
	"github.com/loomcheck/loomcheck/reference",
}

// storeImportBreaches returns, by name, the packages of imports (package -> what its non-test
// files import) that import the store and may not.
func storeImportBreaches(imports map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		switch {
		case !slices.Contains(imps, storePkg), pkg == storePkg, strings.HasPrefix(pkg, storePkg+"/"),
			slices.Contains(storeImporters, pkg), slices.Contains(storeImportExceptions, pkg):
			continue
		}
		out = append(out, pkg)
	}
	slices.Sort(out)
	return out
}

// TestOnlyTheKernelImportsTheStore lists every package of the module with what its non-test
// files import (go list) and fails naming each one that imports reference/store and may not.
func TestOnlyTheKernelImportsTheStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "github.com/loomcheck/loomcheck/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := imports["github.com/loomcheck/loomcheck/reference/internal/threads"]; !ok {
		t.Fatalf("go list did not list the module's packages: %d listed", len(imports))
	}
	for _, pkg := range storeImportExceptions {
		if !slices.Contains(imports[pkg], storePkg) {
			t.Errorf("%s no longer imports the store: take it off storeImportExceptions", pkg)
		}
	}
	if bad := storeImportBreaches(imports); len(bad) > 0 {
		t.Errorf("packages import %s, which only the kernel, the store's packages and the benchmarks may: %v", storePkg, bad)
	}
}

// TestStoreImportRuleNamesANewImporter: the rule catches a package that imports the store and is
// none of those allowed, and passes the allowed ones and those that import a backend only.
func TestStoreImportRuleNamesANewImporter(t *testing.T) {
	m := "github.com/loomcheck/loomcheck/"
	imports := map[string][]string{
		m + "reference/internal/threads":      {m + "reference/kernel", storePkg},
		m + "reference/kernel":                {storePkg},
		m + "reference/store/sqlite":          {storePkg},
		m + "reference/store/postgres/pgtest": {storePkg},
		m + "reference/internal/sessions":     {storePkg},
		m + "reference/perf":                  {storePkg},
		m + "cmd/loomcheck":                   {storePkg + "/postgres"},
		m + "reference/storefake":             {storePkg + "x"},
		m + "harness/newpkg":                  {"fmt", storePkg},
	}
	got := storeImportBreaches(imports)
	want := []string{m + "harness/newpkg", m + "reference/internal/sessions", m + "reference/internal/threads"}
	if !slices.Equal(got, want) {
		t.Fatalf("breaches %v, want %v", got, want)
	}
}
