package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNothingOfTheKit: the engine's own binary links none of the conformance kit (its
// packages and their libraries, the requirement catalogue and OpenAPI document that package spec
// embeds), whose package initialisation would slow every start; of spec it links only the
// configuration it reads (spec/sutconfig).
func TestLinksNothingOfTheKit(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/loomcheck/loomcheck/spec" {
			t.Errorf("cmd/loom links %s", dep)
		}
		for _, kit := range []string{
			"github.com/loomcheck/loomcheck/harness", "github.com/loomcheck/loomcheck/schemas",
			"github.com/loomcheck/loomcheck/features", "github.com/cucumber/", "github.com/getkin/",
			"github.com/santhosh-tekuri/", "github.com/stretchr/",
		} {
			if strings.HasPrefix(dep, kit) {
				t.Errorf("cmd/loom links %s", dep)
			}
		}
	}
}
