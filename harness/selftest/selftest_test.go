package selftest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCancelledSelftestBlamesTheClock: defects a cancelled self-test did not reach are "not
// judged: interrupted", never "the patch does not apply".
func TestCancelledSelftestBlamesTheClock(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Root: root, Defects: filepath.Join(root, "fixtures", "defects")}
	defects, err := Load(opt.Defects)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	// The control run comes first: cancelled, the whole self-test is interrupted.
	opt.Only = []string{defects[0].Name}
	if _, err := Run(ctx, opt); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Run with a cancelled context: got %v, want ErrInterrupted", err)
	}

	// A defect cancelled on the way (here: before its patch is applied) is not judged.
	res := judge(ctx, opt, defects[0])
	if !res.Interrupted || res.Error != NotJudged || res.Caught {
		t.Fatalf("judge with a cancelled context: got %+v, want interrupted and %q", res, NotJudged)
	}
	if Interrupted([]Result{res, {Defect: defects[0], Caught: true}}) != 1 {
		t.Fatal("Interrupted must count only the unjudged results")
	}
	dir := t.TempDir()
	if err := Write(dir, []Result{res}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "selftest.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), NotJudged) || strings.Contains(string(md), "does not apply") || strings.Contains(string(md), "**missed**") {
		t.Fatalf("selftest.md must say the defect was not judged:\n%s", md)
	}
}
