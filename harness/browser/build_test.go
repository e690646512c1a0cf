package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// built is the one build of ./cmd/loomcheck the package's tests share (each used to build its
// own: under the race detector a link of several seconds each), in a directory TestMain removes.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// buildLoomcheck builds ./cmd/loomcheck of this module once for the package's tests, with the race
// detector when the test binary itself has it, so the server is checked under the same load.
func buildLoomcheck(t *testing.T, ctx context.Context) string {
	t.Helper()
	built.once.Do(func() { built.bin, built.err = buildOnce(ctx) })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func buildOnce(ctx context.Context) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go not on PATH: %w", err)
	}
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside a module (%q)", gomod)
	}
	if built.dir, err = os.MkdirTemp("", "loomcheck-browser-*"); err != nil {
		return "", err
	}
	bin := filepath.Join(built.dir, "loomcheck")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/loomcheck")
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return bin, nil
}
